"""``simreal_recorder``: record topics into a rosbag2 bag and measure the live sim-vs-real gap.

Subscriptions are raw (``raw=True``): the callback receives the CDR bytes and only appends
them to a queue; a writer thread writes them into the bag (:class:`simreal_ros.bag.
BagWriter`), flushing at least every ``flush_period_s``. Topics are given by name or glob
pattern (``*`` = all); the graph is re-read every ``discovery_period_s`` so publishers that
appear later are recorded too. Each subscription matches the QoS its publishers offer
(reliable only if all are, transient-local only if all are), and the offered profiles are
stored in the bag.

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
the oldest waiting message has been queued when the writer takes a batch (its bag time to
now, wall clock only), is ``write_lag_ms`` (the maximum over the last period) and
``write_lag_max_ms`` (since the start, also ``recorder.write_lag_max_ms`` in ``custom_data``).
"""

from __future__ import annotations

from collections import deque
import datetime
import fnmatch
import functools
import importlib
import os
from pathlib import Path
import struct
import sys
import threading
import time
from typing import Any, Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, JointState

from simreal_ros import __version__
from simreal_ros.bag import BagWriter, QosSpec, TypeRegistry
from simreal_ros.bag.process_writer import ProcessBagWriter
from simreal_ros.bag.provenance import embed_files, git_revision
from simreal_ros.bag.recorder_config import RecorderConfig
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.gap.image_metrics import IMAGE, UInt8Array, to_array
from simreal_ros.gap.live import LiveGap
from simreal_ros.gap.live_camera import PRIMARY, SECONDARY, LiveCameraGap
from simreal_ros.gap.stream_stats import StreamStats
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node

#: Messages written per lock hold of the writer thread.
WRITE_BATCH = 5000
#: The writer thread wakes this often when the queue is empty. The executor thread needs the
#: GIL for every message it takes; a writer that wakes rarely and then writes everything in one
#: burst costs it far fewer GIL hand-overs than one that polls often (measured: with a 2 ms
#: poll and a 0.2 ms switch interval the recorder fell behind 4 kHz + 30 Hz images).
WRITER_IDLE_S = 0.01
GIL_SWITCH_INTERVAL_S = 0.005
#: With keep-all, the depth bounds the samples DDS holds for the recorder before it refuses
#: more (the publisher then re-sends them after its next heartbeat, seconds later).
KEEP_ALL_DEPTH = 20_000
#: Messages taken per callback in addition to the one the executor handed over.
DRAIN_MAX = 500
def offered_qos(infos: list[Any]) -> list[QosSpec]:
    """Return the QoS each publisher (TopicEndpointInfo) offers."""
    offered: list[QosSpec] = []
    for info in infos:
        q = info.qos_profile
        rel = q.reliability == ReliabilityPolicy.RELIABLE
        dur = q.durability == DurabilityPolicy.TRANSIENT_LOCAL
        offered.append(QosSpec('reliable' if rel else 'best_effort',
                               'transient_local' if dur else 'volatile',
                               'keep_all' if q.history == HistoryPolicy.KEEP_ALL else 'keep_last',
                               int(q.depth)))
    return offered


def offered_profile(reliable: bool, transient: bool, depth: int = 0) -> QoSProfile:
    """Return the recorder's subscription profile (depth 0 = keep all)."""
    return QoSProfile(depth=depth or KEEP_ALL_DEPTH,
                      history=HistoryPolicy.KEEP_ALL if depth == 0 else HistoryPolicy.KEEP_LAST,
                      reliability=(ReliabilityPolicy.RELIABLE if reliable
                                   else ReliabilityPolicy.BEST_EFFORT),
                      durability=(DurabilityPolicy.TRANSIENT_LOCAL if transient
                                  else DurabilityPolicy.VOLATILE))


def import_message(msgtype: str) -> type:
    """``sensor_msgs/msg/JointState`` -> the Python class (SimrealError when not installed)."""
    pkg, _, name = msgtype.partition('/msg/')
    if not pkg or not name:
        raise SimrealError(f'message type {msgtype!r} is not of the form pkg/msg/Name')
    try:
        return getattr(importlib.import_module(f'{pkg}.msg'), name)  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        raise SimrealError(f'message type {msgtype!r} is not installed for Python (no '
                           f'{pkg}.msg.{name}); source the workspace that builds {pkg}') from None


def _has_header(cls: type) -> bool:
    fields: dict[str, str] = getattr(cls, 'get_fields_and_field_types', lambda: {})()
    first = next(iter(fields.items()), ('', ''))
    return first == ('header', 'std_msgs/Header')


def _stamp_of(data: bytes) -> int | None:
    """Header stamp (ns) from the CDR bytes of a message whose first field is a Header."""
    if len(data) < 12:
        return None
    fmt = '<iI' if data[1] == 1 else '>iI'
    sec, nsec = struct.unpack_from(fmt, data, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


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


class _Topic:
    __slots__ = ('name', 'msgtype', 'cls', 'handle', 'has_header', 'stats', 'sub', 'received',
                 'live_role', 'reliable', 'transient', 'publishers', 'last_stamp', 'held_back',
                 'camera')

    def __init__(self, name: str, msgtype: str, cls: type, handle: int) -> None:
        self.name = name
        self.msgtype = msgtype
        self.cls = cls
        self.handle = handle
        self.has_header = _has_header(cls)
        self.stats = StreamStats(window=20_000)
        self.sub: Any = None
        self.received = 0
        self.live_role = ''
        self.reliable = True
        self.transient = False
        self.publishers = 0
        self.last_stamp = 0  # the bag timestamp of the message taken last (ns)
        self.held_back = 0  # messages received before one taken ahead of them (DDS repair)
        self.camera: tuple[LiveCameraGap, int] | None = None  # (live camera gap, side)


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

        self.topics: dict[str, _Topic] = {}
        self.failed: dict[str, str] = {}
        self.queue: deque[tuple[_Topic, int, bytes]] = deque()
        self.queue_limit = p.queue_limit
        self.dropped = 0
        self.drain = True
        self.written = 0
        self.write_error = ''
        # write lag (wall clock only): bag time of the oldest queued message to its write
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
        self.thread = threading.Thread(target=self._write_loop, name='bag_writer', daemon=True)
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
            t = _Topic(name, types[0], cls, handle)
            t.reliable, t.transient = profile.reliability == ReliabilityPolicy.RELIABLE, \
                profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
            t.publishers = len(infos)
            if types[0] == IMAGE:
                self._attach_camera(t)
            if name == self.gap_topics[0]:
                t.live_role = 'primary'
            elif name == self.gap_topics[1]:
                t.live_role = 'secondary'
            t.sub = self.create_subscription(cls, name, self._make_callback(t), profile,
                                             raw=True)
            self.topics[name] = t
            self.get_logger().info(f'recording {name} [{types[0]}] '
                                   f'({profile.reliability.name.lower()}, '
                                   f'{profile.durability.name.lower()})')

    def _attach_camera(self, t: _Topic) -> None:
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

    def _revisit_qos(self, t: _Topic) -> None:
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
        old = t.sub
        callback = self._make_callback(t)
        try:  # nothing the old subscription holds is lost
            while self._take_waiting(t, old, DRAIN_MAX):
                pass
        except (AttributeError, TypeError):
            pass  # another rclpy without take_message: what the old one held is dropped
        t.sub = None
        self.destroy_subscription(old)
        profile = offered_profile(reliable, transient, self.p.depth)
        t.reliable, t.transient = reliable, transient
        t.sub = self.create_subscription(t.cls, t.name, callback, profile, raw=True)
        # the bag keeps the QoS its channel was written with (readers match on it); the
        # switch is recorded next to it
        rel, dur = profile.reliability.name.lower(), profile.durability.name.lower()
        with self.lock:
            self.writer.custom[f'qos_weakened.{t.name}'] = f'{rel},{dur}'
        self.get_logger().warning(
            f'{t.name}: a publisher with weaker QoS joined; recording it {rel}, {dur} from now on')

    def _enqueue(self, t: _Topic, data: bytes, info: Any) -> None:
        if len(self.queue) >= self.queue_limit:
            self.dropped += 1
            return
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
        self.queue.append((t, stamp, data))

    def _take_waiting(self, t: _Topic, sub: Any, limit: int) -> bool:
        """Take up to ``limit`` messages already waiting on ``sub`` (the executor's own call).

        Returns whether the limit was reached (more may wait). AttributeError/TypeError: this
        rclpy has no ``take_message``.
        """
        handle = sub.handle
        for _ in range(limit):
            with handle:
                got = handle.take_message(t.cls, True)
            if got is None:
                return False
            self._enqueue(t, got[0], got[1])
        return True

    def _make_callback(self, t: _Topic) -> Any:
        enqueue = functools.partial(self._enqueue, t)

        def on_message(data: bytes, info: Any) -> None:
            enqueue(data, info)
            # The executor takes one message per wait; under load, take what else is already
            # there in a tight loop (the same call the executor makes), which keeps the
            # per-message cost of the recorder below that of a plain subscriber.
            if not self.drain or t.sub is None:
                return
            try:
                self._take_waiting(t, t.sub, DRAIN_MAX)
            except (AttributeError, TypeError):
                self.drain = False  # another rclpy: fall back to one message per wait
            except Exception:  # noqa: BLE001 - subscription destroyed during shutdown
                return
        return on_message

    # -- writer thread ---------------------------------------------------------------------

    def _write_loop(self) -> None:
        try:
            self._write_queue()
        except Exception as exc:  # noqa: BLE001 - any storage failure ends the recording
            known = isinstance(exc, (OSError, SimrealError))
            self.write_error = str(exc) if known else f'{type(exc).__name__}: {exc}'
            self.get_logger().error(f'writing the bag failed: {self.write_error}')
            self.running = False
            self.queue.clear()
            self.exit_code = 2
            self.finished = True

    def _write_queue(self) -> None:
        writer = self.writer
        queue = self.queue
        while True:
            if not queue:
                if not self.running:
                    break
                if writer.flush_due():
                    with self.lock:
                        writer.flush()
                time.sleep(WRITER_IDLE_S)
                continue
            with self.lock:
                if not self.use_sim_time:  # how far behind DDS: the oldest waiting message's age
                    lag = time.time_ns() - queue[0][1]
                    self.lag_window_ns = max(self.lag_window_ns, lag)
                    self.lag_max_ns = max(self.lag_max_ns, lag)
                n = 0
                while queue and n < WRITE_BATCH:
                    t, stamp, data = queue.popleft()
                    writer.write(t.handle, stamp, data)  # raises: _write_loop ends the recording
                    n += 1
                    self.written += 1
                    t.received += 1
                    hstamp = _stamp_of(data) if t.has_header else None
                    t.stats.add(hstamp, stamp)
                    if t.live_role:
                        self._feed_live(t, data)
                    if t.camera is not None and hstamp is not None:
                        t.camera[0].offer(t.camera[1], hstamp, data)
                if writer.flush_due():
                    writer.flush()
            time.sleep(0)  # hand the GIL to the executor thread between batches

    def _feed_live(self, t: _Topic, data: bytes) -> None:
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
        elif self.dropped:
            level, message = 'warn', f'{self.dropped} messages dropped (queue full)'
        with self.lock:
            summaries = {t.name: (t.stats.summary(), t.held_back) for t in self.topics.values()}
            gap = self.live.summary() if self.gap_topics[0] else None
            cameras = {rest: g for rest, (g, sides) in self.camera_gaps.items()
                       if len(sides) == 2}
            values: dict[str, object] = {
                'bag': str(self.writer.path), 'messages_written': self.written,
                'megabytes_in': self.writer.bytes_in / 1e6, 'queue': len(self.queue),
                'dropped': self.dropped, 'topics': len(self.topics),
                'elapsed_s': time.monotonic() - self.start_mono,
            }
            if not self.use_sim_time:
                values['write_lag_ms'] = self.lag_window_ns / 1e6
                values['write_lag_max_ms'] = self.lag_max_ns / 1e6
                self.lag_window_ns = 0
        for topic, err in sorted(self.failed.items()):
            values[f'failed {topic}'] = err
        waiting = [t for t in self.patterns if not any(c in t for c in '*?[')
                   and t not in self.topics and t not in self.failed]
        if waiting:
            values['waiting_for_publishers'] = ','.join(waiting)
        statuses = [messages.diagnostic_status(f'{name}: recorder', 'bag', level, message,
                                               values)]
        for topic, (s, held_back) in sorted(summaries.items()):
            statuses.append(messages.diagnostic_status(
                f'{name}: topic {topic}', topic, 'ok' if not (s.out_of_order or s.duplicates)
                else 'warn', f'{s.rate_hz:.1f} Hz' if s.rate_hz == s.rate_hz else 'no data',
                {'count': s.count, 'rate_hz': s.rate_hz, 'gaps': s.gaps,
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

    def _check_duration(self) -> None:
        if time.monotonic() - self.start_mono >= self.p.duration_s:
            self.finished = True

    # -- shutdown --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the subscriptions, drain the queue into the bag and close it."""
        self.camera_stop.set()
        for t in self.topics.values():
            if t.sub is not None:
                self.destroy_subscription(t.sub)
                t.sub = None
        self.running = False
        self.thread.join(timeout=60.0)
        with self.lock:
            self.writer.custom['recorder.messages_written'] = str(self.written)
            self.writer.custom['recorder.dropped_queue_full'] = str(self.dropped)
            if not self.use_sim_time:
                self.writer.custom['recorder.write_lag_max_ms'] = f'{self.lag_max_ns / 1e6:.1f}'
            self.writer.close()
        counts = ', '.join(f'{t.name}: {t.received}' for t in self.topics.values())
        print(f'recorded {self.written} messages into {self.writer.path} ({counts})'
              + (f'; {self.dropped} dropped' if self.dropped else ''), flush=True)


def main(args: list[str] | None = None) -> int:
    """Run the recorder node."""
    return run_node(Recorder, args)


if __name__ == '__main__':
    raise SystemExit(main())
