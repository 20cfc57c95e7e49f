"""``simreal_recorder``: record topics into a rosbag2 bag and measure the live sim-vs-real gap.

Taking messages. The subscriptions live on a second rclpy node, ``<name>_take``, that no
executor ever spins; a dedicated take thread drains every subscription of it every
``TAKE_PERIOD_S`` (``take_message`` with the message info, raw CDR bytes) and writes what it
took straight into the bag (:class:`simreal_ros.bag.BagWriter`), flushing at least every
``flush_period_s``. The node itself keeps only its timers (discovery, diagnostics, duration).
Before, the executor took the messages in callbacks between those timers; on a loaded host the
DDS history of a keep-last subscription overflowed before the executor came round, and a
writer queue held messages that a SIGKILL lost (a killed recording kept 4226 of ~4822 messages
per topic, four topics at 1 kHz). Now a SIGKILL loses at most one take period plus one flush
period of messages. Topics are given by name or glob pattern (``*`` = all); the graph is
re-read every ``discovery_period_s`` so publishers that appear later are recorded too. Each
subscription matches the QoS its publishers offer (reliable only if all are, transient-local
only if all are), and the offered profiles are stored in the bag.

Missed messages. Every DDS sample carries its publisher's sequence number
(``publication_sequence_number``, 1, 2, 3, ... per publisher); a gap between two samples of
one publisher is the count of messages that publisher sent and the recorder never got (a
keep-last history that overflowed, a best-effort sample lost, a reliable writer that dropped
unacknowledged samples from its own keep-last history). They are counted per topic
(``missed``, next to ``taken``) in ``/diagnostics`` (WARN when any) and in the bag's
``custom_data`` (``recorder.missed``, ``recorder.missed.<topic>``, rewritten into the
recording's side-car every diagnostics period, so a killed recording keeps them too).
Publishers are told apart by ``publisher_gid`` where the message info carries it (Kilted);
where it does not (Jazzy's rclpy), gaps are counted only while the subscription matches
exactly one publisher, and the messages taken while it matched several are counted as
``unattributed``. Messages a publisher sent after the last one the recorder got (before it
went away) leave no gap and are not seen.

Live gap (``gap_primary`` / ``gap_secondary`` set, e.g. ``sim_a/joint_states`` and
``sim_b/joint_states``): the two JointState streams are paired by header stamp with
interpolation; ``gap/joint_error`` carries primary - secondary position and velocity for each
paired primary sample, and ``/diagnostics`` (``diagnostics_period_s``) carries per-joint
windowed RMSE and max error, the lag between the streams, and per-topic rate, gaps,
out-of-order and duplicate stamps and stamp-vs-receive skew. With the pair set, each camera
of the primary whose counterpart the secondary has (``/sim_a/camera/image_raw`` and
``/sim_b/camera/image_raw``) is compared live too (:mod:`simreal_ros.gap.live_camera`):
one pair of frames per ``camera_gap_period_s`` on a thread of its own, reported as
``<node>: camera gap <camera topic>``. The recorder's own lag, how long
how long a message waited in DDS before the take thread took it (its receive time to
the take, wall clock only), is ``write_lag_ms`` (the maximum over the last period) and
``write_lag_max_ms`` (since the start, also ``recorder.write_lag_max_ms`` in ``custom_data``).
"""

from __future__ import annotations

import datetime
import fnmatch
import os
from pathlib import Path
import sys
import threading
import time
from typing import Any, Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, JointState

from simreal_ros import __version__
from simreal_ros.bag import BagWriter, TypeRegistry
from simreal_ros.bag.process_writer import ProcessBagWriter
from simreal_ros.bag.provenance import embed_files, git_revision
from simreal_ros.bag.recorder_config import RecorderConfig
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.gap.image_metrics import IMAGE, UInt8Array, to_array
from simreal_ros.gap.live import LiveGap
from simreal_ros.gap.live_camera import PRIMARY, SECONDARY, LiveCameraGap
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.recorded_topic import (
    RecordedTopic,
    import_message,
    offered_profile,
    offered_qos,
    stamp_of,
)
from simreal_ros.ros.runtime import run_node

#: The take thread drains every subscription this often when nothing waits. Together with the
#: flush period it bounds what a SIGKILL loses: 5 ms + 50 ms, inside the 0.1 s a recording is
#: asked to keep.
TAKE_PERIOD_S = 0.005
#: Messages taken from one subscription per turn, so that one busy topic cannot starve the
#: others (and the diagnostics timer waits for the lock at most one turn).
TAKE_BATCH = 500
#: The take thread holds the GIL for whole turns; the executor (timers only) needs it rarely.
GIL_SWITCH_INTERVAL_S = 0.005
def _untaken(_msg: object) -> None:
    """Do nothing: the take node's subscriptions need a callback, which no executor calls."""


def _decode_image(data: bytes) -> UInt8Array:
    return to_array(deserialize_message(data, Image))


def _key_values(entries: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in entries:
        if not e:
            continue
        key, sep, value = e.partition('=')
        if not sep or not key:
            raise ConfigError('recorder', what, 'entries of the form key=value', e)
        out[key] = value
    return out


DESCRIPTIONS = {
    'bag': 'output bag directory (must not exist); "" = ./bags/simreal_<date>_<time>',
    'topics': 'topic names or glob patterns to record ("*" = all)',
    'exclude': 'names or patterns never recorded',
    'embed': 'key=path entries: files embedded in custom_data (robot spec, overlays, ...)',
    'custom_data': 'key=value entries added to custom_data',
    'depth': 'subscription history: 0 = keep all (lossless, back-pressure on reliable '
             'publishers), N = keep the last N',
    'writer_process': 'write the bag in a child process (true; measured slower on 2 loaded '
                      'cores, see docs/recording.md) or a thread of this one (false)',
    'camera_gap_period_s': 'with a gap pair: seconds between live comparisons of one pair of '
                           'frames per camera (0 = never)',
}


class Recorder(Node):
    """Record topics into a bag; publish the live gap and recorder diagnostics."""

    def __init__(self) -> None:
        super().__init__('recorder')
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        p = RecorderConfig.from_mapping(declare_dataclass(self, RecorderConfig, DESCRIPTIONS))
        self.p = p
        src = f'{self.get_fully_qualified_name()} params'
        self.patterns = [self._resolve(t) for t in p.topics if t]
        self.exclude = [self._resolve(t) for t in p.exclude if t]
        custom = _key_values(p.custom_data, 'custom_data')
        custom.update(embed_files(_key_values(p.embed, 'embed'), src))
        custom.setdefault('simreal_version', __version__)
        custom.setdefault('git_revision', git_revision())
        custom.setdefault('recorded_topics', ','.join(p.topics))
        bag = p.bag or os.path.join(
            'bags', datetime.datetime.now().strftime('simreal_%Y%m%d_%H%M%S'))
        if not p.bag:
            Path('bags').mkdir(exist_ok=True)
        self.writer: BagWriter | ProcessBagWriter = (
            ProcessBagWriter(bag, p.bag_options, custom) if p.writer_process
            else BagWriter(bag, p.bag_options, custom, TypeRegistry()))
        self.use_sim_time = bool(self.get_parameter('use_sim_time').value)

        self.topics: dict[str, RecordedTopic] = {}
        self.failed: dict[str, str] = {}
        self.written = 0
        self.write_error = ''
        self.missed_saved: dict[str, str] = {}  # the missed counts last put into custom_data
        # write lag (wall clock only): receive time of a message to its write
        self.lag_max_ns = 0
        self.lag_window_ns = 0
        self.lock = threading.Lock()
        self.gap_topics = (self._resolve(p.gap_primary) if p.gap_primary else '',
                           self._resolve(p.gap_secondary) if p.gap_secondary else '')
        self.live = LiveGap(int(p.gap_window_s * 1e9), int(p.gap_max_lag_s * 1e9))
        self.camera_gaps: dict[str, tuple[LiveCameraGap, set[int]]] = {}
        self.camera_stop = threading.Event()
        self.camera_thread: threading.Thread | None = None
        self.pub_error = self.create_publisher(JointState, 'gap/joint_error', qos.STATE)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.running = True
        self.finished = False
        self.exit_code = 0
        self.start_mono = time.monotonic()
        # the subscriptions' node: never spun, only the take thread takes from it (a name of
        # its own; global arguments would rename it to this node's name)
        self.take_node = Node(f'{self.get_name()}_take', namespace=self.get_namespace(),
                              context=self.context, use_global_arguments=False,
                              start_parameter_services=False)
        # a test hook: set take_paused, and the take thread sets take_holding once it holds
        self.take_paused = threading.Event()
        self.take_holding = threading.Event()
        self.thread = threading.Thread(target=self._take_loop, name='bag_take', daemon=True)
        self.thread.start()
        self._discover()
        self.create_timer(p.discovery_period_s, self._discover)
        self.create_timer(p.diagnostics_period_s, self._diagnostics)
        if p.duration_s > 0:
            self.create_timer(0.05, self._check_duration)
        self.get_logger().info(f'recording {self.patterns} into {self.writer.path} '
                               f'({p.storage}, compression {p.compression})')

    # -- topics ----------------------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        if any(c in name for c in '*?['):
            return name if name.startswith('/') else '/' + name
        return self.resolve_topic_name(name)

    def _wanted(self, name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, x) for x in self.exclude):
            return False
        if name == self.resolve_topic_name('gap/joint_error') and name not in self.patterns:
            return False
        return any(fnmatch.fnmatchcase(name, x) for x in self.patterns)

    def _discover(self) -> None:
        for name, types in self.get_topic_names_and_types():
            if name in self.topics:
                self._revisit_qos(self.topics[name])
                continue
            if name in self.failed or not self._wanted(name):
                continue
            infos = self.get_publishers_info_by_topic(name)
            if not infos:
                continue  # only subscribers so far: wait for a publisher to learn the QoS
            try:
                if len(types) != 1:
                    raise SimrealError(f'topic {name} has several types {types}; a bag topic '
                                       f'has one')
                cls = import_message(types[0])
                offered = offered_qos(infos)
                profile = offered_profile(all(q.reliability == 'reliable' for q in offered),
                                          all(q.durability == 'transient_local'
                                              for q in offered), self.p.depth)
                with self.lock:
                    handle = self.writer.add_topic(name, types[0], offered)
            except SimrealError as exc:
                self.failed[name] = str(exc)
                self.get_logger().error(f'cannot record {name}: {exc}')
                continue
            t = RecordedTopic(name, types[0], cls, handle)
            t.reliable, t.transient = profile.reliability == ReliabilityPolicy.RELIABLE, \
                profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
            t.publishers = len(infos)
            if types[0] == IMAGE:
                self._attach_camera(t)
            if name == self.gap_topics[0]:
                t.live_role = 'primary'
            elif name == self.gap_topics[1]:
                t.live_role = 'secondary'
            with self.lock:
                t.sub = self.take_node.create_subscription(cls, name, _untaken, profile,
                                                           raw=True)
                self.topics[name] = t
            self.get_logger().info(f'recording {name} [{types[0]}] '
                                   f'({profile.reliability.name.lower()}, '
                                   f'{profile.durability.name.lower()})')

    def _attach_camera(self, t: RecordedTopic) -> None:
        """Feed an image topic of either robot of the gap pair to its live camera gap."""
        if not self.gap_topics[0] or self.p.camera_gap_period_s <= 0:
            return
        pa, sa = (g.rpartition('/')[0] for g in self.gap_topics)
        if t.name.startswith(sa + '/'):  # first: the twin's namespace is inside the root one
            side, rest = SECONDARY, t.name[len(sa):]
        elif t.name.startswith(pa + '/'):
            side, rest = PRIMARY, t.name[len(pa):]
        else:
            return
        with self.lock:
            gap, sides = self.camera_gaps.setdefault(rest, (LiveCameraGap(
                pa + rest, sa + rest, int(self.p.gap_max_lag_s * 1e9)), set()))
            sides.add(side)
            t.camera = (gap, side)
        if self.camera_thread is None:
            self.camera_thread = threading.Thread(target=self._camera_loop, name='camera_gap',
                                                  daemon=True)
            self.camera_thread.start()

    def _camera_loop(self) -> None:
        """Compare one pair per camera every ``camera_gap_period_s`` (its own thread)."""
        while not self.camera_stop.wait(self.p.camera_gap_period_s):
            with self.lock:
                gaps = [g for g, sides in self.camera_gaps.values() if len(sides) == 2]
            for gap in gaps:
                gap.evaluate(_decode_image)

    def _revisit_qos(self, t: RecordedTopic) -> None:
        """Weaken a subscription when a publisher joins that it could not match.

        A best-effort publisher never reaches a reliable subscription, a volatile one never a
        transient-local one: the subscription is re-created with the weaker QoS, after taking
        every message the old one still holds.
        """
        infos = self.get_publishers_info_by_topic(t.name)
        if len(infos) == t.publishers:
            return
        t.publishers = len(infos)
        offered = offered_qos(infos)
        reliable = t.reliable and all(q.reliability == 'reliable' for q in offered)
        transient = t.transient and all(q.durability == 'transient_local' for q in offered)
        if (reliable, transient) == (t.reliable, t.transient) or t.sub is None:
            return
        profile = offered_profile(reliable, transient, self.p.depth)
        with self.lock:  # nothing the old subscription holds is lost
            old = t.sub
            while self._take_waiting(t, old, TAKE_BATCH) == TAKE_BATCH:
                pass
            t.sub = None
            self.take_node.destroy_subscription(old)
            t.reliable, t.transient = reliable, transient
            t.sub = self.take_node.create_subscription(t.cls, t.name, _untaken, profile,
                                                       raw=True)
        # the bag keeps the QoS its channel was written with (readers match on it); the
        # switch is recorded next to it
        rel, dur = profile.reliability.name.lower(), profile.durability.name.lower()
        with self.lock:
            self.writer.custom[f'qos_weakened.{t.name}'] = f'{rel},{dur}'
        self.get_logger().warning(
            f'{t.name}: a publisher with weaker QoS joined; recording it {rel}, {dur} from now on')

    def _record(self, t: RecordedTopic, data: bytes, info: Any) -> None:
        """Write one taken message into the bag (the caller holds the lock)."""
        stamp = (self.get_clock().now().nanoseconds if self.use_sim_time
                 else info['received_timestamp'])
        # A reliable reader hands messages over in the writer's order: a lost sample that DDS
        # re-sent is received after the ones behind it, which wait for it. Their receive times
        # then run backwards in take order (3 of 1132 IMU messages in a 4 s sim recording with
        # a camera on the loaded machine, 25-48 ms), and a reader sorting by bag time put them
        # out of order. The bag time is when a message could be taken: never before the one
        # taken ahead of it on the same topic.
        if stamp < t.last_stamp:
            stamp = t.last_stamp
            t.held_back += 1
        t.last_stamp = stamp
        self.writer.write(t.handle, stamp, data)  # raises: _take_loop ends the recording
        self.written += 1
        t.received += 1
        hstamp = stamp_of(data) if t.has_header else None
        t.stats.add(hstamp, stamp)
        if t.live_role:
            self._feed_live(t, data)
        if t.camera is not None and hstamp is not None:
            t.camera[0].offer(t.camera[1], hstamp, data)

    def _take_waiting(self, t: RecordedTopic, sub: Any, limit: int) -> int:
        """Take and record up to ``limit`` messages waiting on ``sub``; return how many.

        The caller holds the lock.
        """
        handle = sub.handle
        single = True
        n = 0
        for _ in range(limit):
            try:
                with handle:
                    got = handle.take_message(t.cls, True)
            except Exception:  # noqa: BLE001 - the last turn, after a Ctrl-C shut ROS down
                if self.running:
                    raise
                break
            if got is None:
                break
            data, info = got
            if n == 0:
                if not self.use_sim_time:  # how long it waited in DDS
                    lag = time.time_ns() - info['received_timestamp']
                    self.lag_window_ns = max(self.lag_window_ns, lag)
                    self.lag_max_ns = max(self.lag_max_ns, lag)
                if not info.get('publisher_gid'):  # Jazzy: only a lone publisher is certain
                    single = sub.get_publisher_count() == 1
            t.count_missed(info, single)
            self._record(t, data, info)
            n += 1
        return n

    # -- take thread -----------------------------------------------------------------------

    def _take_loop(self) -> None:
        try:
            self._take_all()
        except Exception as exc:  # noqa: BLE001 - any storage failure ends the recording
            known = isinstance(exc, (OSError, SimrealError))
            self.write_error = str(exc) if known else f'{type(exc).__name__}: {exc}'
            self.get_logger().error(f'writing the bag failed: {self.write_error}')
            self.running = False
            self.exit_code = 2
            self.finished = True

    def _take_all(self) -> None:
        """Drain every subscription each turn until stopped; one last turn after the stop."""
        writer = self.writer
        while True:
            running = self.running
            if self.take_paused.is_set() and running:
                self.take_holding.set()
                time.sleep(TAKE_PERIOD_S)
                continue
            self.take_holding.clear()
            full = False
            with self.lock:
                for t in list(self.topics.values()):
                    if t.sub is not None:
                        full |= self._take_waiting(t, t.sub, TAKE_BATCH) == TAKE_BATCH
                if writer.flush_due():
                    writer.flush()
            if not running and not full:
                break
            # more waits: go on at once, after handing the GIL to the executor thread
            time.sleep(0 if full else TAKE_PERIOD_S)

    def _feed_live(self, t: RecordedTopic, data: bytes) -> None:
        try:
            msg = deserialize_message(data, JointState)
        except Exception:  # noqa: BLE001 - a malformed message must not stop recording
            return
        stamp = messages.stamp_to_ns(msg.header.stamp)
        if t.live_role == 'primary':
            self.live.add_primary(stamp, msg.name, msg.position, msg.velocity)
        else:
            self.live.add_secondary(stamp, msg.name, msg.position, msg.velocity)
        errors = self.live.new_errors()
        names = self.live.names
        for stamp_ns, dq, dv in errors:
            if names is None or not self.context.ok():
                return
            try:
                self.pub_error.publish(messages.joint_state(list(names), stamp_ns, dq, dv))
            except Exception:  # noqa: BLE001 - shutting down: the bag matters, not this topic
                if self.context.ok():
                    raise
                return

    # -- diagnostics -----------------------------------------------------------------------

    def _diagnostics(self) -> None:
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        name = self.get_fully_qualified_name()
        level = 'ok'
        message = f'recording {len(self.topics)} topics'
        if self.write_error:
            level, message = 'error', f'write failed: {self.write_error}'
        elif self.failed:
            level, message = 'error', f'cannot record {sorted(self.failed)}'
        with self.lock:
            summaries = {t.name: (t.stats.summary(), t.held_back, t.received, t.missed,
                                  t.unattributed) for t in self.topics.values()}
            missed = self._missed_custom()
            if missed != self.missed_saved:  # a killed recording keeps them (the side-car)
                self.writer.update_custom(missed)
                self.missed_saved = missed
            gap = self.live.summary() if self.gap_topics[0] else None
            cameras = {rest: g for rest, (g, sides) in self.camera_gaps.items()
                       if len(sides) == 2}
            values: dict[str, object] = {
                'bag': str(self.writer.path), 'messages_written': self.written,
                'megabytes_in': self.writer.bytes_in / 1e6,
                'missed': int(missed['recorder.missed']), 'topics': len(self.topics),
                'elapsed_s': time.monotonic() - self.start_mono,
            }
            if not self.use_sim_time:
                values['write_lag_ms'] = self.lag_window_ns / 1e6
                values['write_lag_max_ms'] = self.lag_max_ns / 1e6
                self.lag_window_ns = 0
        missed_topics = sorted(t for t, v in summaries.items() if v[3])
        if level == 'ok' and missed_topics:
            level, message = 'warn', (f'{values["missed"]} messages missed (publisher '
                                      f'sequence gaps) on {", ".join(missed_topics)}')
        for topic, err in sorted(self.failed.items()):
            values[f'failed {topic}'] = err
        waiting = [t for t in self.patterns if not any(c in t for c in '*?[')
                   and t not in self.topics and t not in self.failed]
        if waiting:
            values['waiting_for_publishers'] = ','.join(waiting)
        statuses = [messages.diagnostic_status(f'{name}: recorder', 'bag', level, message,
                                               values)]
        for topic, (s, held_back, taken, t_missed, unattributed) in sorted(summaries.items()):
            statuses.append(messages.diagnostic_status(
                f'{name}: topic {topic}', topic, 'ok' if not (s.out_of_order or s.duplicates
                                                             or t_missed) else 'warn',
                (f'{s.rate_hz:.1f} Hz' if s.rate_hz == s.rate_hz else 'no data')
                + (f', {t_missed} missed' if t_missed else ''),
                {'taken': taken, 'missed': t_missed, 'unattributed': unattributed,
                 'count': s.count, 'rate_hz': s.rate_hz, 'gaps': s.gaps,
                 'max_gap_ms': s.max_gap_ms, 'out_of_order': s.out_of_order,
                 'duplicates': s.duplicates, 'skew_mean_ms': s.skew_mean_ms,
                 'skew_max_ms': s.skew_max_ms, 'held_back_by_repair': held_back}))
        if self.gap_topics[0]:
            gv: dict[str, object] = {'primary': self.gap_topics[0],
                                     'secondary': self.gap_topics[1]}
            if gap is None:
                statuses.append(messages.diagnostic_status(
                    f'{name}: gap', 'gap', 'stale', 'waiting for both streams', gv))
            else:
                gv.update({'pairs': gap.pairs, 'lag_ms': gap.lag_ms,
                           'window_s': self.p.gap_window_s})
                for joint, m in gap.joints.items():
                    gv[f'{joint}.rmse_rad'] = m.rmse
                    gv[f'{joint}.max_abs_rad'] = m.max_abs
                    gv[f'{joint}.velocity_rmse'] = m.velocity_rmse
                worst = max(gap.joints.items(), key=lambda kv: kv[1].rmse
                            if kv[1].rmse == kv[1].rmse else -1.0)
                statuses.append(messages.diagnostic_status(
                    f'{name}: gap', 'gap', 'ok',
                    f'worst {worst[0]} rmse {worst[1].rmse:.4g} rad, lag {gap.lag_ms:.2f} ms',
                    gv))
        for rest, cam in sorted(cameras.items()):
            statuses.append(self._camera_status(f'{name}: camera gap {rest}', cam.summary()))
        arr.status = statuses
        self.pub_diag.publish(arr)

    @staticmethod
    def _camera_status(name: str, summary: dict[str, object]) -> Any:
        if 'error' in summary:
            return messages.diagnostic_status(name, 'camera_gap', 'warn',
                                              f'cannot compare: {summary["error"]}', summary)
        if 'ssim_mean' not in summary:
            return messages.diagnostic_status(name, 'camera_gap', 'stale',
                                              'waiting for a pair of frames', summary)
        return messages.diagnostic_status(
            name, 'camera_gap', 'ok', f'ssim {summary["ssim_mean"]:.3f}, psnr '
            f'{summary["psnr_db_mean"]:.1f} dB over the last {summary["window_pairs"]} pairs',
            summary)

    def _missed_custom(self) -> dict[str, str]:
        """Return the missed counts as ``custom_data`` entries (the caller holds the lock)."""
        out = {'recorder.missed': str(sum(t.missed for t in self.topics.values()))}
        for t in self.topics.values():
            out[f'recorder.missed.{t.name}'] = str(t.missed)
            if t.unattributed:
                out[f'recorder.unattributed.{t.name}'] = str(t.unattributed)
        return out

    def _check_duration(self) -> None:
        if time.monotonic() - self.start_mono >= self.p.duration_s:
            self.finished = True

    # -- shutdown --------------------------------------------------------------------------

    def close(self) -> None:
        """Take what waits, stop taking, close the bag (messages DDS delivers later are not)."""
        self.camera_stop.set()
        self.take_paused.clear()
        self.running = False
        self.thread.join(timeout=60.0)  # its last turn takes what the subscriptions hold
        with self.lock:
            for t in self.topics.values():
                if t.sub is not None:
                    self.take_node.destroy_subscription(t.sub)
                    t.sub = None
            self.writer.custom.update(self._missed_custom())
            self.writer.custom['recorder.messages_written'] = str(self.written)
            if not self.use_sim_time:
                self.writer.custom['recorder.write_lag_max_ms'] = f'{self.lag_max_ns / 1e6:.1f}'
            self.writer.close()
        self.take_node.destroy_node()
        counts = ', '.join(f'{t.name}: {t.received}' for t in self.topics.values())
        missed = sum(t.missed for t in self.topics.values())
        print(f'recorded {self.written} messages into {self.writer.path} ({counts})'
              + (f'; {missed} missed (publisher sequence gaps)' if missed else ''), flush=True)


def main(args: list[str] | None = None) -> int:
    """Run the recorder node."""
    return run_node(Recorder, args)


if __name__ == '__main__':
    raise SystemExit(main())
