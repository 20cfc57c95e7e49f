"""Recorder benchmark: figures measured side by side in one run.

* **ingest**: a publisher sends JointState messages on one topic as fast as it can (reliable,
  keep-all: a slow reader throttles the publisher instead of losing messages). The receive
  rate of the recorder (bag timestamps are receive times; every message must be in the bag)
  is compared with that of a bare rclpy raw subscriber process with the same QoS, which does
  nothing but count, once taking one message per executor wake-up (plain) and once taking
  every waiting message in each callback as the recorder does (draining). Target ratio
  recorder / bare >= 0.8 against both. Rounds alternate, median reported.
* **image_30hz**: four 1 kHz JointState topics plus a 640x480 rgb8 image stream at 30 Hz
  (27.6 MB/s) into the recorder, once with the bag written by a thread of the recorder (the
  default) and once by a child process (``writer_process:=true``), alternating
  (``image_30hz_backlog_s`` lists every round's backlog per mode). The images come from a
  participant of their own, as the stack's cameras publish them; one more round publishes them
  from the JointState topics' participant (``image_30hz_shared_participant``), where DDS itself
  holds the JointState samples back for 0.3-2 s (:mod:`simreal_ros.ros.image_participant`).
  Figures: MB/s offered (bytes / publishing time) and recorded (bytes / span of bag times),
  MB/s written to disk, whether every message arrived, the backlog (how long after the
  publisher's last message the last one reached the bag), ``max_delay_ms`` (the largest bag
  time - header stamp: how late any message could be taken) and the recorder's own
  ``write_lag_max_ms`` (queued to written); the same load into a bare subscriber for
  comparison, whose ``max_delay_ms`` is its take time - header stamp. Target: lossless,
  backlog and the largest delay <= 0.2 s, with the stack's layout.
"""

from __future__ import annotations

import json
from pathlib import Path
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from simreal_ros.bag import BagReader
from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.ros.client import RosClient

DOMAIN = bench_domain(3)

BARE = r"""
import json, struct, sys, time
from simreal_ros.core.netenv import apply_to_current_process
apply_to_current_process()
import rclpy
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, JointState
rclpy.init()
node = Node('bare_subscriber')
count = int(sys.argv[1])
drain = sys.argv[2] == 'drain'
got = []  # (receive ns, take ns, header stamp ns, bytes): every message starts with a Header
subs = {}
def keep(data, info):
    sec, nsec = struct.unpack_from('<iI', data, 4)
    got.append((info['received_timestamp'], time.time_ns(), sec * 1000000000 + nsec,
                len(data)))
def make_cb(name, cls):
    def cb(data, info):
        keep(data, info)
        while drain:  # the recorder's technique: take what else waits, in the same callback
            handle = subs[name].handle
            with handle:
                more = handle.take_message(cls, True)
            if more is None:
                return
            keep(*more)
    return cb
qos = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_ALL,
                 reliability=ReliabilityPolicy.RELIABLE)
for name in sys.argv[3:]:
    cls = Image if name.endswith('image_raw') else JointState
    subs[name] = node.create_subscription(cls, name, make_cb(name, cls), qos, raw=True)
deadline = time.monotonic() + 120
while len(got) < count and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
print(json.dumps({'received': len(got), 'first_ns': got[0][0] if got else 0,
                  'last_ns': max(g[0] for g in got) if got else 0,
                  'max_delay_ns': max(g[1] - g[2] for g in got) if got else 0,
                  'bytes': sum(g[3] for g in got)}), flush=True)
node.destroy_node()
rclpy.try_shutdown()
"""


def _loadgen(env: dict[str, str], *args: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, str(LOADGEN), *args], env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f'loadgen failed: {r.stderr[-2000:]}')
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _bare_round(env: dict[str, str], count: int, mode: str = 'plain') -> float:
    sub = subprocess.Popen([sys.executable, '-c', BARE, str(count), mode, '/load/t0'], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        _loadgen(env, '--rate', '0', '--count', str(count), '--depth', '0', '--settle', '0.5')
        out, _ = sub.communicate(timeout=180)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    res = json.loads(out)
    if res['received'] != count:
        raise RuntimeError(f'bare subscriber lost messages: {res["received"]} of {count}')
    return (count - 1) / ((res['last_ns'] - res['first_ns']) / 1e9)


def _recorder(tmp: Path, env: dict[str, str], name: str, topics: list[str],
              writer_process: bool = False) -> NodeProcess:
    spec = NodeSpec('recorder', 'recorder', '', {'bag': str(tmp / name), 'topics': topics,
                                                 'writer_process': writer_process})
    return NodeProcess(spec, env, tmp)


def _written(client: RosClient, diags: list[tuple[int, Any]]) -> int:
    with client.lock:
        for _t, arr in reversed(diags):
            for st in arr.status:
                if st.name.endswith(': recorder'):
                    return int({kv.key: kv.value for kv in st.values}['messages_written'])
    return 0


def _stop_when_written(client: RosClient, rec: NodeProcess, count: int) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    diags = client.collect(DiagnosticArray, '/diagnostics')
    deadline = time.monotonic() + 120
    while _written(client, diags) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    rec.stop()


def _recorder_round(tmp: Path, env: dict[str, str], client: RosClient, count: int,
                    k: int) -> tuple[float, int]:
    """Record ``count`` messages sent as fast as possible; (msg/s, messages in the bag)."""
    rec = _recorder(tmp, env, f'ingest_{k}', ['/load/t0'])
    try:
        _loadgen(env, '--rate', '0', '--count', str(count), '--depth', '0', '--settle', '0.5')
        _stop_when_written(client, rec, count)
    finally:
        rec.stop()
    with BagReader(tmp / f'ingest_{k}') as b:
        ts = [m.timestamp for m in b.messages()]
    return (len(ts) - 1) / ((ts[-1] - ts[0]) / 1e9), len(ts)


def ingest(tmp: Path, env: dict[str, str], client: RosClient, count: int, rounds: int
           ) -> dict[str, Any]:
    bare, draining, rec, kept = [], [], [], []
    for k in range(rounds):
        bare.append(_bare_round(env, count))
        draining.append(_bare_round(env, count, 'drain'))
        rate, n = _recorder_round(tmp, env, client, count, k)
        rec.append(rate)
        kept.append(n)
    b, d, r = float(np.median(bare)), float(np.median(draining)), float(np.median(rec))
    return {'messages_per_round': count, 'rounds': rounds,
            'bare_rounds': [round(x) for x in bare],
            'bare_draining_rounds': [round(x) for x in draining],
            'recorder_rounds': [round(x) for x in rec], 'recorded_per_round': kept,
            'bare_subscriber_msgs_per_s': b, 'bare_draining_subscriber_msgs_per_s': d,
            'recorder_msgs_per_s': r, 'ratio_recorder_over_bare': r / b,
            'ratio_recorder_over_bare_draining': r / d, 'target_ratio': TARGET_RATIO,
            'target_met': ingest_target_met(r / b, r / d), 'lossless': kept == [count] * rounds}


IMAGE_LOAD = ('--topics', '4', '--rate', '1000', '--image', '--image-rate', '30',
              '--settle', '0.5')
#: the camera-load target: lossless, and no message more than this late into the bag
TARGET_DELAY_S = 0.2
#: the load generator beside this file (run as a script)
LOADGEN = Path(__file__).with_name('_loadgen.py')
TARGET_RATIO = 0.8


def ingest_target_met(ratio_over_bare: float, ratio_over_draining: float) -> bool:
    """The ingest target: the recorder takes >= 0.8 of both bare subscribers' rates."""
    return min(ratio_over_bare, ratio_over_draining) >= TARGET_RATIO


def image_target_met(lossless: bool, backlog_s: float, max_delay_s: float,
                     write_lag_s: float) -> bool:
    """The image target: nothing lost, and every delay within :data:`TARGET_DELAY_S`."""
    return lossless and max(backlog_s, max_delay_s, write_lag_s) <= TARGET_DELAY_S


def _bare_images(env: dict[str, str], seconds: float, participant: str) -> dict[str, Any]:
    topics = [f'/load/t{i}' for i in range(4)] + ['/load/image_raw']
    ticks = int(round(seconds * 1000))
    every = max(1, int(round(1000 / 30)))  # as loadgen: one image every `every` ticks
    expected = 4 * ticks + (ticks + every - 1) // every
    sub = subprocess.Popen([sys.executable, '-c', BARE, str(expected), 'plain', *topics],
                           env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        load = _loadgen(env, *IMAGE_LOAD, '--image-participant', participant,
                        '--duration', str(seconds))
        out, _ = sub.communicate(timeout=180)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    res = json.loads(out)
    published_s = (load['last_ns'] - load['first_ns']) / 1e9
    return {'lossless': res['received'] == sum(load['sent'].values()),
            'offered_mb_per_s': res['bytes'] / 1e6 / published_s,
            'last_receive_after_publisher_s': (res['last_ns'] - load['last_ns']) / 1e9,
            'max_delay_ms': res['max_delay_ns'] / 1e6}


def images(tmp: Path, env: dict[str, str], client: RosClient, seconds: float,
           writer_process: bool = False, name: str = 'images', participant: str = 'own'
           ) -> dict[str, Any]:
    bare = _bare_images(env, seconds, participant)
    rec = _recorder(tmp, env, name, ['/load/*'], writer_process)
    try:
        load = _loadgen(env, *IMAGE_LOAD, '--image-participant', participant,
                        '--duration', str(seconds))
        sent = load['sent']
        _stop_when_written(client, rec, sum(sent.values()))
    finally:
        rec.stop()
    with BagReader(tmp / name) as b:
        counts = {t.lstrip('/'): n for t, (_ty, n) in b.info.topics.items()}
        lag_ms = float(b.info.custom_data['recorder.write_lag_max_ms'])
        first, last, size, delay = None, 0, 0, 0
        for m in b.messages():
            first = m.timestamp if first is None else first
            last = max(last, m.timestamp)
            size += len(m.data)
            sec, nsec = struct.unpack_from('<iI', m.data, 4)  # the header stamp
            delay = max(delay, m.timestamp - (sec * 1_000_000_000 + nsec))
    on_disk = sum(p.stat().st_size for p in (tmp / name).glob('*.mcap'))
    published_s = (load['last_ns'] - load['first_ns']) / 1e9
    span = (last - (first or last)) / 1e9
    backlog = (last - load['last_ns']) / 1e9
    return {'published_s': published_s, 'image_participant': participant,
            'writer': 'process' if writer_process else 'thread', 'sent': sent,
            'recorded': counts, 'lossless': counts == sent,
            'offered_mb_per_s': size / 1e6 / published_s,
            'recorded_mb_per_s': size / 1e6 / span, 'written_mb_per_s': on_disk / 1e6 / span,
            'last_receive_after_publisher_s': backlog, 'max_delay_ms': delay / 1e6,
            'write_lag_max_ms': lag_ms,
            'target_met': image_target_met(counts == sent, backlog, delay / 1e9, lag_ms / 1e3),
            'image_mb_per_s_nominal': 640 * 480 * 3 * 30 / 1e6, 'bare_subscriber': bare}


def run(quick: bool = False) -> dict[str, Any]:
    """Run both measurements; return their figures."""
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    client = RosClient(DOMAIN, 'bench_recorder_client')
    try:
        with tempfile.TemporaryDirectory(prefix='simreal_bench_recorder_') as d:
            tmp = Path(d)
            seconds = 1.0 if quick else 8.0
            rounds = 1 if quick else 2
            out = {'ingest': ingest(tmp, env, client, 5_000 if quick else 20_000,
                                    1 if quick else 5)}
            runs: dict[str, list[dict[str, Any]]] = {'process': [], 'thread': []}
            for k in range(rounds):  # alternating, so both see the same machine load
                for mode in ('thread', 'process'):
                    runs[mode].append(images(tmp, env, client, seconds, mode == 'process',
                                             f'images_{mode}_{k}'))
            out['image_30hz'] = runs['thread'][-1]
            out['image_30hz_writer_process'] = runs['process'][-1]
            out['image_30hz_shared_participant'] = images(
                tmp, env, client, seconds, name='images_shared', participant='shared')
            out['image_30hz_backlog_s'] = {
                mode: [r['last_receive_after_publisher_s'] for r in rs]
                for mode, rs in runs.items()}
            out['image_30hz_max_delay_ms'] = {mode: [r['max_delay_ms'] for r in rs]
                                              for mode, rs in runs.items()}
            out['image_30hz_write_lag_max_ms'] = {mode: [r['write_lag_max_ms'] for r in rs]
                                                  for mode, rs in runs.items()}
            out['image_30hz_lossless'] = {mode: [r['lossless'] for r in rs]
                                          for mode, rs in runs.items()}
            out['image_30hz_target_met'] = {mode: [r['target_met'] for r in rs]
                                            for mode, rs in runs.items()}
            return out
    finally:
        client.close()


if __name__ == '__main__':
    print(json.dumps(run(quick='--quick' in sys.argv), indent=2))
