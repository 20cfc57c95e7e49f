"""``simreal_injector``: relay topics with the latency, jitter, loss and value faults of robots.

Each route subscribes its input topic as raw serialized bytes and republishes the same bytes on
its output topic (no deserialization unless the route perturbs values). What happens to each
message is decided by :class:`simreal_ros.latency.injection.RouteState`; deliveries are scheduled
on one dedicated thread with a precise wait on the ROS clock (sim time when ``use_sim_time``).
The fate of every message goes to ``~/events`` (std_msgs/Int64MultiArray, see
``docs/injector.md``) and per-route statistics to ``/diagnostics``, with a ``timing`` status of
the injector's own lateness (delivery - scheduled time) and its real-time state.

Real time (docs/realtime.md): ``rt_priority`` puts the delivery thread under SCHED_FIFO, and
``receive_rt_priority`` (-1: the same) the receive path: the executor thread and the
middleware's threads, which receive and stamp every message before any Python runs. The
delivery thread sleeps until ``spin_us`` before a deadline, then busy-waits (bounded by
:data:`simreal_ros.core.realtime.MAX_SPIN_NS`), and beats a heartbeat that the ``timing``
status turns into ERROR when it stops.

Image routes (``LAZY_TYPES``) are relayed only while their output is watched, and published
through a participant of their own (:mod:`simreal_ros.ros.image_participant`): a 640x480
frame crowds the other samples of its participant (here the relayed joint streams) out of the
shared-memory segment, and their repair stalls their subscribers for up to seconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
import heapq
import importlib
import itertools
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.clock import Clock, ClockType  # type: ignore[attr-defined]  # re-exported
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import Int64MultiArray, MultiArrayDimension

from simreal_ros.core.realtime import (
    Heartbeat,
    RtSettings,
    ThreadRt,
    apply_to_threads,
    process_threads,
    sleep_until_ns,
)
from simreal_ros.errors import ConfigError
from simreal_ros.latency.injection import (
    EVENT_COLUMNS,
    Delivery,
    EventLog,
    Profile,
    RouteConfig,
    RouteState,
    load_profile,
    percentiles_ms,
)
from simreal_ros.latency.injector_config import InjectorConfig
from simreal_ros.ros import messages, qos
from simreal_ros.ros.image_participant import ImageParticipant
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.perturb import PERTURBERS, check_applicable
from simreal_ros.ros.publisher_gaps import PublisherGaps
from simreal_ros.ros.runtime import fast_thread_switching, log_rt, run_node, start_rt

SIM_TIME_POLL_S = 0.0002     # sim time moves in /clock steps: poll it
#: the input history of an image route (LAZY_TYPES) and the messages held for the sim clock
QUEUE_DEPTH = 1000
#: the input history of every other route: 10 s at 1 kHz. A keep-last history drops its oldest
#: message when the executor falls this far behind: with 1000, a 1 kHz stream lost 21-651 of
#: 2000 messages while the injector shared 2 cores with a busy loop and another test worker
#: (load average 18-28): its executor got too little CPU to keep up for over a second.
INPUT_DEPTH = 10_000
#: message types relayed only while watched (see Injector._watch_lazy)
LAZY_TYPES = frozenset({'sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage',
                        'sensor_msgs/msg/CameraInfo'})
LAZY_CHECK_S = 0.2
TYPE_WAIT_WARN_S = 5.0
#: the delivery thread beats at least every 0.1 s (its longest idle wait)
STALL_S = 1.0


def parse_binding(text: str, source: str) -> tuple[str, str, str]:
    """Parse ``route:input>output`` (the planner's way to bind a profile route to topics)."""
    name, sep, rest = text.partition(':')
    src, sep2, dst = rest.partition('>')
    if not (sep and sep2 and name and src and dst):
        raise ConfigError(source, 'bindings', 'entries of the form route:input>output', text)
    return name, src, dst


def message_class(type_name: str, source: str, key: str) -> Any:
    """Import ``pkg/msg/Name`` and return the class, or fail naming the fix."""
    parts = type_name.split('/')
    if len(parts) != 3 or parts[1] != 'msg':
        raise ConfigError(source, key, 'a ROS message type such as sensor_msgs/msg/JointState',
                          type_name)
    try:
        return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError):
        raise ConfigError(source, key, f'an installed message type (is the Python package '
                          f'{parts[0]} installed, e.g. pip install ros-'
                          f'{parts[0].replace("_", "-")}?)', type_name) from None


@dataclass
class _Route:
    cfg: RouteConfig
    state: RouteState
    msg_type: str = ''
    cls: Any = None
    pub: Any = None
    sub: Any = None
    qos: Any = None
    #: subscribed only while the output has subscribers (camera topics, LAZY_TYPES)
    lazy: bool = False
    held: bytes | None = None
    #: messages received while the sim clock still read 0 (before the first /clock)
    unclocked: deque[bytes] = field(default_factory=lambda: deque(maxlen=QUEUE_DEPTH))
    order_lock: threading.Lock = field(default_factory=threading.Lock)
    waiting_since: float = field(default_factory=time.monotonic)
    achieved_ns: list[int] = field(default_factory=list)
    lateness_ns: list[int] = field(default_factory=list)
    perturb_errors: int = 0
    last_perturb_error: str = ''
    #: messages a publisher sent that never reached the route (publication sequence gaps)
    gaps: PublisherGaps = field(default_factory=PublisherGaps)
    #: messages dropped from ``unclocked`` when it was full (oldest first)
    unclocked_dropped: int = 0


class Injector(Node):
    """The latency / loss / value fault relay."""

    def __init__(self) -> None:
        super().__init__('injector')
        cfg = InjectorConfig.from_mapping(declare_dataclass(self, InjectorConfig))
        source = f'{self.get_fully_qualified_name()} params'
        self.events_period_s = cfg.events_period_s
        self.rt_delivery = cfg.rt
        self.rt_receive = replace(self.rt_delivery, lock_memory=False,
                                  priority=self.rt_delivery.priority
                                  if cfg.receive_rt_priority == -1 else cfg.receive_rt_priority)
        self.spin_ns = cfg.spin_us * 1000
        self.heartbeat = Heartbeat(int(STALL_S * 1e9))
        self.rt_state: dict[str, ThreadRt] = {}
        self._rt_tids: set[int] = set()
        self.profile = self._bind(load_profile(cfg.profile), [b for b in cfg.bindings if b],
                                  source)
        self.sim_time = bool(self.get_parameter('use_sim_time').value)
        self._clock: Clock = self.get_clock()  # type: ignore[assignment]  # a ROSClock
        self.routes = [_Route(r, RouteState(r, cfg.seed, i))
                       for i, r in enumerate(self.profile.routes)]
        self.events = EventLog([r.name for r in self.profile.routes])
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.heap: list[tuple[int, int, int, int, int, int, int, bytes]] = []
        self._counter = itertools.count()
        self.running = True
        self._lazy_timer: Any = None
        self.images: ImageParticipant | None = None
        for r in self.routes:
            if r.cfg.msg_type:
                self._open(r, r.cfg.msg_type, configured=True)
        self.pub_events = self.create_publisher(Int64MultiArray, '~/events',
                                                QoSProfile(depth=100))
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        # reporting runs on the wall clock: a paused or lockstep sim must not hold it back
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.events_period_s, self._publish_events, clock=steady)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics, clock=steady)
        if any(r.cls is None for r in self.routes):
            self.create_timer(0.2, self._resolve_types, clock=steady)
        fast_thread_switching()
        self._apply_receive_rt()   # before the delivery thread exists: every thread so far
        self.thread = threading.Thread(target=self._deliver_loop, name='deliveries',
                                       daemon=True)
        self.thread.start()
        self.get_logger().info(
            f'profile {self.profile.name!r}: ' + '; '.join(
                f'{r.cfg.name}: {self.resolve_topic_name(r.cfg.input)} -> '
                f'{self.resolve_topic_name(r.cfg.output)}'
                + (' (pass-through)' if r.cfg.passthrough else '') for r in self.routes))

    # ---- real time ---------------------------------------------------------------------------
    def _apply_receive_rt(self) -> None:
        """Give the receive path (executor + middleware threads) ``receive_rt_priority``.

        Called at start and with every diagnostics report: the middleware may start threads
        later (e.g. when a route's subscription is created from the graph).
        """
        if not self.rt_receive.enabled:
            return
        thread = getattr(self, 'thread', None)
        skip = self._rt_tids | ({thread.native_id} if thread is not None else set())
        new = sorted(t for t in process_threads() if t not in skip)
        if not new:
            return
        self._rt_tids.update(new)
        result = apply_to_threads(RtSettings(self.rt_receive.priority, self.rt_receive.cpus),
                                  new, 'receive')
        first = 'receive' not in self.rt_state
        if first or result.errors:
            self.rt_state['receive'] = result
        if first or result.warning:
            log_rt(self, result)

    # ---- configuration ---------------------------------------------------------------------
    def _bind(self, profile: Profile, bindings: list[str], source: str) -> Profile:
        """Apply ``route:input>output`` bindings; with bindings, only bound routes run."""
        routes: list[RouteConfig] = list(profile.routes)
        if bindings:
            routes = []
            for text in bindings:
                name, src, dst = parse_binding(text, source)
                routes.append(replace(profile.route(name), input=src, output=dst))
        for r in routes:
            if not r.input or not r.output:
                raise ConfigError(profile.source, f'routes.{r.name}',
                                  'input and output topics (in the profile, or bound with the '
                                  'bindings parameter route:input>output)',
                                  f'input {r.input!r}, output {r.output!r}')
            if self.resolve_topic_name(r.input) == self.resolve_topic_name(r.output):
                raise ConfigError(profile.source, f'routes.{r.name}.output',
                                  'a topic other than the input (a relay onto its own input '
                                  'loops forever)', r.output)
        return replace(profile, routes=tuple(routes))

    def _open(self, r: _Route, msg_type: str, configured: bool) -> None:
        """Create the raw subscription and the publisher of a route once its type is known.

        Raises :class:`ConfigError` (the node then exits 1) before changing the route when the
        type is not installed or the route's perturbation does not fit it.
        """
        key = f'routes.{r.cfg.name}.type'
        cls = message_class(msg_type, self.profile.source, key)
        check_applicable(r.cfg.perturb, msg_type, self.profile.source, r.cfg.name)
        r.cls, r.msg_type = cls, msg_type
        reliability = ReliabilityPolicy.RELIABLE
        infos = self.get_publishers_info_by_topic(self.resolve_topic_name(r.cfg.input))
        if infos and any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
                         for i in infos):
            reliability = ReliabilityPolicy.BEST_EFFORT  # matches every publisher
        lazy = msg_type in LAZY_TYPES
        profile = QoSProfile(depth=QUEUE_DEPTH if lazy else INPUT_DEPTH,
                             history=HistoryPolicy.KEEP_LAST,
                             reliability=reliability, durability=DurabilityPolicy.VOLATILE)
        if lazy:  # images go out through a participant of their own (see ImageParticipant)
            if self.images is None:
                self.images = ImageParticipant(self)
            r.pub = self.images.create_publisher(r.cls, r.cfg.output, profile)
        else:
            r.pub = self.create_publisher(r.cls, r.cfg.output, profile)
        r.qos = profile
        if not lazy:
            self._subscribe(r)
        elif self._lazy_timer is None:
            self._lazy_timer = self.create_timer(LAZY_CHECK_S, self._watch_lazy,
                                                 clock=Clock(clock_type=ClockType.STEADY_TIME))
        r.lazy = lazy
        self.get_logger().info(f'route {r.cfg.name}: {msg_type}'
                               + ('' if configured else ' (type from the graph)')
                               + (' (relayed while its output has subscribers)' if lazy else ''))

    def _subscribe(self, r: _Route) -> None:
        def on_message(data: bytes, info: Any) -> None:
            self._on_message(r, data, info)

        r.sub = self.create_subscription(r.cls, r.cfg.input, on_message, r.qos, raw=True)

    def _watch_lazy(self) -> None:
        """Subscribe a camera route's input only while its output has subscribers.

        A camera publishes (a sim bridge renders) only while watched, as ROS camera drivers do;
        an injector always subscribed would keep every camera rendering: about 40 ms of CPU a
        640x480 frame in software here, more than a core at 30 Hz, for nobody.
        """
        for r in self.routes:
            if not r.lazy or r.pub is None:
                continue
            watched = r.pub.get_subscription_count() > 0
            if watched and r.sub is None:
                self._subscribe(r)
            elif not watched and r.sub is not None:
                self.destroy_subscription(r.sub)
                r.sub = None

    def _resolve_types(self) -> None:
        for r in self.routes:
            if r.cls is not None:
                continue
            infos = self.get_publishers_info_by_topic(self.resolve_topic_name(r.cfg.input))
            types = sorted({i.topic_type for i in infos})
            if len(types) == 1:
                # a type that does not fit the route is a configuration error as at start-up:
                # the node exits 1 with the reason (never a silently dead route)
                try:
                    self._open(r, types[0], configured=False)
                except ConfigError as exc:
                    self.get_logger().fatal(f'route {r.cfg.name}: the publishers on '
                                            f'{r.cfg.input} carry {types[0]}: {exc}')
                    raise
            elif len(types) > 1:
                self.get_logger().error(f'route {r.cfg.name}: publishers of '
                                        f'{r.cfg.input} disagree on the type {types}; set '
                                        f'type: in the profile', throttle_duration_sec=5.0)
            elif time.monotonic() - r.waiting_since > TYPE_WAIT_WARN_S:
                self.get_logger().warning(f'route {r.cfg.name}: no publisher on {r.cfg.input} '
                                          f'yet to learn the type from (or set type: in the '
                                          f'profile)', throttle_duration_sec=10.0)

    # ---- hot path ----------------------------------------------------------------------------
    def now_ns(self) -> int:
        """Return the ROS clock (system time, or sim time with ``use_sim_time``) in ns."""
        if self.sim_time:
            return int(self._clock.now().nanoseconds)
        return time.time_ns()

    def _perturbed(self, r: _Route, data: bytes) -> bytes:
        if r.cfg.perturb.empty:
            return data
        try:
            msg = deserialize_message(data, r.cls)
            PERTURBERS[r.msg_type](msg, r.cfg.perturb, r.state.rng_values)
            return bytes(serialize_message(msg))
        except Exception as exc:  # noqa: BLE001 - relay unchanged rather than lose data
            r.perturb_errors += 1
            r.last_perturb_error = str(exc)
            return data

    def _arrival_ns(self, info: Any) -> int:
        """Return the receive time of a message in ns (ROS clock).

        The middleware's reception stamp on the system clock (not the later callback), or the
        ROS clock with sim time (0 until the first /clock).
        """
        if self.sim_time:
            return int(self._clock.now().nanoseconds)
        try:
            stamp = int(info['received_timestamp'])
        except (KeyError, TypeError, ValueError):
            stamp = 0
        return stamp if stamp > 0 else time.time_ns()

    def _on_message(self, r: _Route, data: bytes, info: Any = None) -> None:
        now = self._arrival_ns(info)
        self._count_missed(r, info)
        if not self.sim_time:
            self._handle(r, data, now)
            return
        with r.order_lock:       # held messages go first, in order
            if now == 0:         # the sim clock has not started (no /clock yet): hold
                if len(r.unclocked) == r.unclocked.maxlen:
                    r.unclocked_dropped += 1     # the oldest goes: counted, reported
                r.unclocked.append(data)
                with self.cond:
                    self.cond.notify()
                return
            while r.unclocked:
                self._handle(r, r.unclocked.popleft(), now)
            self._handle(r, data, now)

    def _count_missed(self, r: _Route, info: Any) -> None:
        """Count the messages of this one's publisher that never reached the route.

        A keep-last input history overflows when the executor is starved for longer than
        its depth lasts; those messages have no fate in the events. The gap in the publisher's
        sequence numbers counts them (``missed`` in the diagnostics, WARN).
        """
        if info is None:
            return
        single = bool(info.get('publisher_gid')) or r.sub.get_publisher_count() == 1
        if r.gaps.count(info, single):
            self.get_logger().warning(
                f'route {r.cfg.name}: {r.gaps.missed} messages on {r.cfg.input} never reached '
                f'the injector (its input history overflowed: starved of CPU?)',
                throttle_duration_sec=5.0)

    def _release_unclocked(self) -> None:
        """Handle the messages held before the sim clock started, as received now."""
        for r in self.routes:
            if not r.unclocked:
                continue
            with r.order_lock:
                now = self.now_ns()
                while now and r.unclocked:
                    self._handle(r, r.unclocked.popleft(), now)

    def _handle(self, r: _Route, data: bytes, now: int) -> None:
        """Decide the fate of a message received at ``now`` and send or schedule it."""
        if r.cfg.passthrough and r.cfg.perturb.empty:
            r.pub.publish(data)
            sent = self.now_ns()
            with self.lock:
                seq, deliveries = r.state.decide(now)
                self.events.add(r.state.index, seq, now, replace(deliveries[0], deliver_ns=sent))
                r.achieved_ns.append(sent - now)
            return
        data = self._perturbed(r, data)
        with self.cond:
            seq, deliveries = r.state.decide(now)
            notify = False
            for d in deliveries:
                if not d.delivered:
                    self.events.add(r.state.index, seq, now, d)
                    continue
                payload, r.held = d.payload(data, r.held)
                notify |= not self.heap or d.deliver_ns < self.heap[0][0]
                heapq.heappush(self.heap, (d.deliver_ns, next(self._counter), r.state.index,
                                           seq, now, d.target_delay_ns, d.fate, payload))
            if notify:
                self.cond.notify()

    def _wait_until(self, deadline_ns: int) -> None:
        if self.sim_time:
            while self.running and self.now_ns() < deadline_ns:
                time.sleep(SIM_TIME_POLL_S)
            return
        sleep_until_ns(deadline_ns, self.spin_ns, time.time_ns)   # bounded spin

    def _deliver_loop(self) -> None:
        # the receive path has its own priority (receive_rt_priority), set at start
        self.rt_state['delivery'] = start_rt(self, self.rt_delivery, 'delivery', others=False)
        try:
            while self.running:
                self.heartbeat.beat()
                if self.sim_time and any(r.unclocked for r in self.routes):
                    self._release_unclocked()
                with self.cond:
                    while self.running and not self.heap:
                        if self.sim_time and any(r.unclocked for r in self.routes):
                            break
                        self.cond.wait(0.1)
                        self.heartbeat.beat()     # idle is alive: beats every 0.1 s
                    if not self.running:
                        return
                    if not self.heap:           # messages wait for the sim clock to start
                        self.cond.wait(SIM_TIME_POLL_S)
                        continue
                    due = self.heap[0][0]
                    ahead = due - self.now_ns()
                    if ahead > self.spin_ns:
                        # sleep outside of the spin; an earlier message wakes us up
                        # at most 0.1 s at a time: the heartbeat beats through long delays
                        self.cond.wait(min(0.1, (ahead - self.spin_ns) / 1e9)
                                       if not self.sim_time else SIM_TIME_POLL_S)
                        continue
                self._wait_until(due)
                with self.lock:
                    batch = []
                    now = self.now_ns()
                    while self.heap and self.heap[0][0] <= now:
                        batch.append(heapq.heappop(self.heap))
                for due_ns, _c, index, seq, received, target, fate, payload in batch:
                    r = self.routes[index]
                    r.pub.publish(payload)
                    sent = self.now_ns()
                    d = Delivery(fate, target, sent)
                    with self.lock:
                        self.events.add(index, seq, received, d)
                        r.achieved_ns.append(sent - received)
                        r.lateness_ns.append(sent - due_ns)
        except Exception as exc:  # noqa: BLE001 - reported, then the node exits non-zero
            if not self.context.ok():
                return
            self.get_logger().fatal(f'delivery thread failed: {exc!r}')
            self.exit_code = 2
            self.finished = True

    # ---- reporting ---------------------------------------------------------------------------
    def _publish_events(self) -> None:
        with self.lock:
            rows = self.events.take()
        if not rows:
            return
        msg = Int64MultiArray()
        msg.layout.dim = [
            MultiArrayDimension(label=self.events.routes_label, size=len(rows),
                                stride=len(rows) * len(EVENT_COLUMNS)),
            MultiArrayDimension(label=','.join(EVENT_COLUMNS), size=len(EVENT_COLUMNS),
                                stride=len(EVENT_COLUMNS))]
        msg.data = np.asarray(rows, dtype=np.int64).ravel().tolist()
        self.pub_events.publish(msg)

    def _publish_diagnostics(self) -> None:
        self._apply_receive_rt()
        arr = DiagnosticArray()
        arr.header.stamp = messages.stamp_from_ns(self.now_ns())
        fqn = self.get_fully_qualified_name()
        all_late: list[int] = []
        names = [r.cfg.name for r in self.routes]
        for r in self.routes:
            with self.lock:
                achieved, r.achieved_ns = r.achieved_ns, []
                late, r.lateness_ns = r.lateness_ns, []
            all_late += late
            with self.lock:
                s = r.state.stats
                queued = sum(1 for h in self.heap if h[2] == r.state.index)
            a50, a99 = percentiles_ms(achieved)
            l50, l99 = percentiles_ms(late)
            values: dict[str, object] = {
                'input': self.resolve_topic_name(r.cfg.input),
                'output': self.resolve_topic_name(r.cfg.output),
                'type': r.msg_type or '(waiting for a publisher)',
                'received': s.received, 'delivered': s.delivered, 'lost': s.lost,
                'duplicated': s.duplicated, 'rate_dropped': s.rate_dropped,
                'repeated': s.repeated, 'queued': queued,
                'loss_rate': s.lost / s.received if s.received else 0.0,
                'delay_p50_ms': a50, 'delay_p99_ms': a99,
                'lateness_p50_ms': l50, 'lateness_p99_ms': l99,
                'perturb_errors': r.perturb_errors,
            }
            values['held_for_clock'] = len(r.unclocked)
            values['missed'] = r.gaps.missed
            values['dropped_unclocked'] = r.unclocked_dropped
            level, message = 'ok', 'relaying' if s.received else 'no messages yet'
            if r.gaps.missed or r.unclocked_dropped:
                level = 'warn'
                message = (f'{r.gaps.missed} messages never reached the injector, '
                           f'{r.unclocked_dropped} dropped while waiting for the sim clock')
            if r.unclocked:
                level = 'warn'
                message = f'{len(r.unclocked)} messages held until the sim clock starts'
            if r.lazy and r.sub is None:
                message = 'idle: nothing subscribes to the output'
            if r.cls is None:
                level, message = 'warn', f'waiting for a publisher on {r.cfg.input}'
            elif r.perturb_errors:
                level = 'warn'
                message = f'relayed unchanged, could not perturb: {r.last_perturb_error}'
            # a route bound to several topics (a camera's image and info) names each
            name = (f'{fqn}: {r.cfg.name}' if names.count(r.cfg.name) == 1
                    else f'{fqn}: {r.cfg.name} {values["input"]}')
            arr.status.append(messages.diagnostic_status(
                name, self.profile.name, level, message, values))
        arr.status.append(self._timing_status(fqn, all_late))
        self.pub_diag.publish(arr)

    def _timing_status(self, fqn: str, late: list[int]) -> Any:
        """Return the status of the injector's own lateness and its real-time state."""
        l50, l99, lmax = percentiles_ms(late, (50, 99, 100))
        values: dict[str, object] = {
            'lateness_p50_ms': l50, 'lateness_p99_ms': l99, 'lateness_max_ms': lmax,
            'deliveries': len(late), 'spin_us': self.spin_ns // 1000,
            'delivery_heartbeat_age_ms': self.heartbeat.age_ns() / 1e6}
        for st in self.rt_state.values():
            values.update(st.values())
        level, message = 'ok', 'on time'
        stalled = self.heartbeat.stalled_ns()
        if stalled:
            level, message = 'error', f'delivery thread stalled for {stalled / 1e9:.1f} s'
        return messages.diagnostic_status(f'{fqn}: timing', self.profile.name, level, message,
                                          values)

    def close(self) -> None:
        """Stop the delivery thread (pending deliveries are dropped with the process)."""
        self.running = False
        with self.cond:
            self.cond.notify_all()
        self.thread.join(timeout=1.0)

    def destroy_node(self) -> None:
        """Destroy the images' participant, then this node."""
        if self.images is not None:
            self.images.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of ``simreal_injector``."""
    return run_node(Injector, args)


if __name__ == '__main__':
    raise SystemExit(main())
