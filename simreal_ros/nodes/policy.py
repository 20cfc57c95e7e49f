"""``simreal_policy``: a policy spec's network driving the robot over the topic contract.

Subscribes ``joint_states`` (+ ``imu/data`` when a term or fall detection needs it,
``cmd_vel`` when the ``velocity_command`` term does: none or older than its ``timeout_s`` is
the zero command; ``<camera>/image_raw`` for each image term, and ``goal``: a JointState whose
position is the goal joint positions),
publishes ``joint_commands`` (stamped when the command is created) and ``/diagnostics``; serves
``~/enable`` (std_srvs/SetBool).

The control loop runs on its own thread against the node's ROS clock, so it follows sim time
(``use_sim_time``) as well as the wall clock: it waits for each deadline (sleeping, then
polling the clock for the last ``spin_wait_us``, at most a tenth of the period, holding the
lock the input callbacks take, so none of them holds the GIL across the deadline), runs one
step and counts a deadline miss
when a step ends after the next deadline (the schedule then skips ahead instead of bursting).
With ``sync_to_states`` (lockstep sims) it instead answers every new joint_states stamp:
a new action when a control period has passed in the stamps' time, the last command
otherwise, so the lockstep bridge always gets its command.
Safety (enable, ramp, stale hold, output rejection, limits) is
:class:`simreal_ros.policy.control.PolicyController`. The log says what the node waits for: the
enable call or the first joint_states at start, the first joint_states once it arrives, and at
enable whether a goal has arrived (until one does, the goal is the spec's default pose);
``/diagnostics`` carries the current goal (``goal_rad``) and ``goals_received``. The loop
thread may run under SCHED_FIFO (``rt_priority``, ``cpu_affinity``, ``lock_memory``; see
docs/realtime.md) and beats a heartbeat; ``/diagnostics`` reports ERROR when it stops beating.

Image terms: each camera's ``sensor_msgs/Image`` (rgb8, bgr8, mono8) is read into numpy in the
callback without cv_bridge (:func:`simreal_ros.policy.images.frame_from_buffer`, no copy) and
handed to the controller, which preprocesses it in the next step. A stale hold (of any input)
is logged when it starts, then at most every ``HOLD_WARN_EVERY_S``; ``/diagnostics`` adds
``image_age_ms`` (the oldest camera's newest frame), ``inference_p50/p99_ms`` (preprocessing +
network), ``preprocess_p50/p99_ms``, ``images_received`` and ``rejected_images``.
"""

from __future__ import annotations

from collections import deque
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
import numpy as np
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import Image, Imu, JointState
from std_srvs.srv import SetBool

from simreal_ros.core.realtime import Heartbeat, ThreadRt
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.policy.control import DAMPING, DISABLED, PolicyController
from simreal_ros.policy.images import frame_from_buffer
from simreal_ros.policy.node_config import PolicyNodeConfig
from simreal_ros.policy.spec import MAX_RATE_HZ, load_policy_spec
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import fast_thread_switching, run_node, start_rt

#: Counters whose increase since the last diagnostics report makes the status WARN.
WARN_COUNTS = ('observation_faults', 'rejected_states', 'rejected_goals', 'rejected_imu',
               'rejected_images')
#: a stale hold is logged when it starts, then at most this often while it lasts
HOLD_WARN_EVERY_S = 5.0
WINDOW = 2000
#: the loop beats every period, and every 0.05 s while it waits for /clock
STALL_MIN_S = 1.0


def _pct(values: deque[int], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) / 1e6 if values \
        else 0.0


class PolicyNode(Node):
    """Run a declared policy at its control rate with the safety rules of its spec."""

    def __init__(self) -> None:
        super().__init__('policy')
        cfg = PolicyNodeConfig.from_mapping(declare_dataclass(self, PolicyNodeConfig))
        self.rt = cfg.rt
        # the spec is checked against the robot the node drives (its cameras for image terms)
        if cfg.robot:
            self.robot = load_robot(cfg.robot)
            self.spec = load_policy_spec(cfg.policy, self.robot)
        else:
            self.spec = load_policy_spec(cfg.policy)
            self.robot = load_robot(self.spec.robot)
        rate = cfg.rate_hz or self.spec.control_rate_hz
        try:  # rate limit, low-pass and staleness rebuilt for the node's period
            self.spec = self.spec.at_rate(rate)
        except ValueError:
            raise ConfigError('policy', 'rate_hz', f"a rate in (0, {MAX_RATE_HZ:g}] Hz (0: the "
                              "spec's)", cfg.rate_hz) from None
        self.period_ns = self.spec.period_ns
        from simreal_ros.policy.model import load_model
        self.model = load_model(self.spec.model, self.spec.obs_dim, self.spec.act_dim,
                                threads=cfg.threads, image_shape=self.spec.image_shape)
        self.controller = PolicyController(self.spec, self.robot, self.model)
        self._diag_counts: dict[str, int] = {}
        self.sync = cfg.sync_to_states
        self.enable_on_start = cfg.enable_on_start
        self.spin_ns = cfg.spin_ns(self.period_ns)
        self.names = self.robot.joint_names
        self.lock = threading.Lock()
        self.running = True
        self.new_stamp = -1
        self.answered_stamp = -1
        self.received_mono = 0
        self.next_deadline: int | None = None
        self.stats: dict[str, Any] = {'published': 0, 'deadline_misses': 0, 'skipped_periods': 0,
                                      'window_rejected': 0, 'window_stale': 0, 'goals': 0,
                                      'repeated_answers': 0}
        self.states_seen = False
        self.compute: deque[int] = deque(maxlen=WINDOW)
        self.model_ns: deque[int] = deque(maxlen=WINDOW)
        self.obs_to_cmd: deque[int] = deque(maxlen=WINDOW)
        self.overhead: deque[int] = deque(maxlen=WINDOW)
        self.wakes: deque[int] = deque(maxlen=WINDOW)
        self.late: deque[int] = deque(maxlen=WINDOW)
        self.inference: deque[int] = deque(maxlen=WINDOW)
        self.preprocess: deque[int] = deque(maxlen=WINDOW)
        self.holding = False
        self.hold_warned_mono = 0
        self.frames_seen = [False] * len(self.spec.images)
        self._msg = messages.joint_state(self.names, 0, self.robot.home)

        t = self.spec.topics
        self.pub = self.create_publisher(JointState, t.joint_commands, qos.COMMAND)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.state_topic = self.create_subscription(JointState, t.joint_states, self._on_state,
                                                    qos.STATE).topic_name
        self.goal_topic = self.create_subscription(JointState, t.goal, self._on_goal,
                                                   qos.COMMAND).topic_name
        if self.controller.needs_imu:  # a term, or fall detection (policy/safety.py)
            self.create_subscription(Imu, t.imu, self._on_imu, qos.STATE)
        if 'cmd_vel' in self.spec.needs:  # none or a stale one: the zero command (spec.py)
            self.create_subscription(Twist, t.cmd_vel, self._on_cmd_vel, qos.COMMAND)
        self.image_topics = [
            self.create_subscription(Image, term.topic,
                                     lambda msg, k=k: self._on_image(k, msg),
                                     qos.IMAGE_INPUT).topic_name
            for k, term in enumerate(self.spec.images)]
        self.enable_service = self.create_service(SetBool, '~/enable',
                                                  self._on_enable).service_name
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self.clock_moved = threading.Event()  # set on every /clock update (sim time)
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=Duration(nanoseconds=1), min_backward=None,
                          on_clock_change=True),
            post_callback=lambda _jump: self.clock_moved.set())
        self.heartbeat = Heartbeat(max(int(STALL_MIN_S * 1e9), 5 * self.period_ns))
        self.rt_state: ThreadRt | None = None
        self.rt_others: ThreadRt | None = None  # set by start_rt
        self.thread: threading.Thread | None = None
        if not self.sync:  # lockstep: answered in the joint_states callback, no thread hop
            self.thread = threading.Thread(target=self._loop, name='policy_loop', daemon=True)
            self.thread.start()
        self.get_logger().info(
            f'{self.spec.name} ({self.model.format}, obs {self.spec.obs_dim}, act '
            f'{self.spec.act_dim}) on {self.robot.name} at {1e9 / self.period_ns:g} Hz'
            + (', answering every joint_states (lockstep)' if self.sync else '')
            + (f', images {self.spec.image_shape} from {", ".join(self.image_topics)}'
               if self.image_topics else '')
            + (f'; waiting for the first joint_states on {self.state_topic}, then enabling'
               if self.enable_on_start else
               f'; disabled, waiting for {self.enable_service} (simreal policy enable)'))
        if self.spec.control_rate_hz != self.spec.declared_rate_hz:
            a = self.spec.action
            self.get_logger().warning(
                f"rate_hz {self.spec.control_rate_hz:g} overrides the spec's "
                f'{self.spec.declared_rate_hz:g} Hz (the rate the network was trained at): rate '
                f'limit {a.rate_limit_rad * self.spec.control_rate_hz:g} rad/s '
                f'({a.rate_limit_rad:.4g} rad per step), low-pass {a.low_pass_hz:g} Hz, stale '
                f'after {self.controller.stale_after_ns / 1e6:g} ms')

    # ---- inputs --------------------------------------------------------------------------
    def _on_state(self, msg: JointState) -> None:
        mono = time.monotonic_ns()
        stamp = messages.stamp_to_ns(msg.header.stamp)
        with self.lock:
            try:
                self.controller.set_state(msg.name, msg.position, msg.velocity, stamp)
            except ValueError as exc:
                self.get_logger().warning(f'rejected joint_states: {exc}',
                                          throttle_duration_sec=1.0)
                return
            self.new_stamp = stamp
            self.received_mono = mono
        if not self.states_seen:
            self.states_seen = True
            self.get_logger().info(f'first joint_states on {self.state_topic}')
        if self.sync:
            self._sync_step()

    def _on_goal(self, msg: JointState) -> None:
        with self.lock:
            try:
                clamped = self.controller.set_goal(msg.name, msg.position)
            except ValueError as exc:
                self.get_logger().warning(f'rejected goal, keeping the previous one: {exc}')
                return
            self.stats['goals'] += 1
            goal = self.controller.goal.tolist()
        self.get_logger().info(f'goal on {self.goal_topic}: ' + ', '.join(
            f'{n} {x:.4g}' for n, x in zip(self.spec.joints, goal, strict=True)))
        if clamped:
            self.get_logger().warning('goal outside the joint limits: clamped into them')

    def _on_imu(self, msg: Imu) -> None:
        o, w = msg.orientation, msg.angular_velocity
        with self.lock:
            try:
                self.controller.set_imu((o.w, o.x, o.y, o.z), (w.x, w.y, w.z),
                                        messages.stamp_to_ns(msg.header.stamp))
            except ValueError as exc:
                self.get_logger().warning(f'rejected imu/data: {exc}', throttle_duration_sec=1.0)

    def _on_cmd_vel(self, msg: Twist) -> None:
        now = self.get_clock().now().nanoseconds
        with self.lock:
            try:
                self.controller.set_cmd_vel(msg.linear.x, msg.linear.y, msg.angular.z, now)
            except ValueError as exc:
                self.get_logger().warning(f'rejected cmd_vel: {exc}', throttle_duration_sec=1.0)

    def _on_image(self, index: int, msg: Image) -> None:
        stamp = messages.stamp_to_ns(msg.header.stamp)
        reason = ''
        try:
            frame = frame_from_buffer(msg.data, msg.height, msg.width, msg.step, msg.encoding)
        except ValueError as exc:
            reason = str(exc)
        with self.lock:  # a rejected frame is counted (rejected_images) and said (last_fault)
            try:
                if reason:
                    self.controller.reject_image(index, reason)
                else:
                    self.controller.set_image(index, frame, msg.encoding, stamp)
            except ValueError as exc:
                reason = str(exc)
        if reason:
            self.get_logger().warning(f'rejected frame on {reason}',
                                      throttle_duration_sec=HOLD_WARN_EVERY_S)
            return
        if not self.frames_seen[index]:
            self.frames_seen[index] = True
            self.get_logger().info(f'first frame on {self.image_topics[index]} '
                                   f'({msg.width}x{msg.height} {msg.encoding})')

    def _on_enable(self, req: SetBool.Request, res: SetBool.Response) -> SetBool.Response:
        with self.lock:
            if req.data:
                res.success, res.message = self.controller.enable(self._now())
            else:
                res.success, res.message = True, self.controller.disable()
            self.answered_stamp = -1
            if req.data and not self.states_seen:
                res.message += f' (waiting for joint_states on {self.state_topic})'
        # one call site per severity: rclpy's logger refuses a second severity at one call
        # site (ValueError), which crashed the node when an enable that had been refused
        # (no joint_states yet) was accepted later
        if res.success:
            self.get_logger().info(f'~/enable {bool(req.data)}: {res.message}')
        else:
            self.get_logger().warning(f'~/enable {bool(req.data)}: {res.message}')
        if req.data and res.success:
            self._log_goal_wait()
        if self.sync:
            self._sync_step()  # a lockstep bridge is waiting for this state's answer
        return res

    # ---- the loop ------------------------------------------------------------------------
    def _now(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    def _wait_until(self, deadline: int) -> int | None:
        """Wait for ``deadline``; return the clock reading at the wake-up (None: stopping)."""
        if getattr(self.get_clock(), 'ros_time_is_active', False):  # sim time: /clock
            while self.running and self._now() < deadline:
                self.heartbeat.beat()
                self.clock_moved.wait(0.05)
                self.clock_moved.clear()
            return self._now() if self.running else None
        coarse = deadline - self._now() - self.spin_ns
        if coarse > 0:
            time.sleep(coarse / 1e9)
        # The input callbacks wait on the lock (GIL released) while the loop polls its
        # deadline: an imu/data or joint_states callback that ran across the deadline held
        # the GIL, and the loop woke late by its length (docs/realtime.md, the legged policy).
        with self.lock:
            while self.running:
                now = self._now()
                if now >= deadline:
                    return now
        return None

    def _loop(self) -> None:
        self.rt_state = start_rt(self, self.rt, 'policy_loop')  # also 1 ns timer slack
        try:
            self._run_clock()
        except Exception as exc:  # noqa: BLE001 - reported, then the node exits non-zero
            if not self.context.ok():
                return
            self.get_logger().fatal(f'policy loop failed: {exc!r}')
            self.exit_code = 2
            self.finished = True

    def _maybe_auto_enable(self, now: int) -> None:
        if self.enable_on_start and self.controller.mode == DISABLED \
                and self.controller.is_fresh(now):
            ok, why = self.controller.enable(now)
            if ok:
                self.enable_on_start = False
                self.get_logger().info(f'enabled at start: {why}')
                self._log_goal_wait()

    def _log_goal_wait(self) -> None:
        """Say at take-over whether the policy has a goal or waits for one."""
        if 'goal' not in self.spec.needs:
            return
        if self.stats['goals'] == 0:
            self.get_logger().info(
                f'waiting for a goal on {self.goal_topic} (simreal goal J1 J2 ...); until one '
                "arrives the goal is the spec's default pose")
        else:
            self.get_logger().info(f'driving to the last goal received on {self.goal_topic}')

    def _run_clock(self) -> None:
        while self.running:
            self.heartbeat.beat()
            now = self._now()
            if now <= 0:  # sim time, no /clock yet
                time.sleep(0.01)
                continue
            if self.next_deadline is None or self.next_deadline < now - 10 * self.period_ns:
                self.next_deadline = now + self.period_ns  # (re)start, e.g. after a time jump
            deadline = self.next_deadline
            wake = self._wait_until(deadline)
            if wake is None:
                continue
            self._cycle(wake, mono_start=time.monotonic_ns())
            self.wakes.append(wake)
            self.late.append(max(0, wake - deadline))
            self.next_deadline = deadline + self.period_ns
            done = self._now()
            if done > self.next_deadline:  # this step ran into the next period: a miss
                self.stats['deadline_misses'] += 1
                # deadlines passed by more than half a period are skipped, not made up in a
                # burst; a slightly late one runs at once and the schedule stays on the grid
                late = done - self.next_deadline
                if late > self.period_ns // 2:
                    skip = (late - self.period_ns // 2) // self.period_ns + 1
                    self.stats['skipped_periods'] += int(skip)
                    self.next_deadline += int(skip) * self.period_ns

    def _sync_step(self) -> None:
        """Answer the newest joint_states stamp (lockstep), stamped with it.

        A state that arrives again (a lockstep bridge re-sends its state while no answer
        reaches it: the first may have been lost before the bridge's subscription matched this
        publisher) is answered again with the same command and stamp; the bridge lets a
        repeated stamp release no second tick.
        """
        with self.lock:
            stamp, received = self.new_stamp, self.received_mono
            if stamp < 0:
                return
            repeat = stamp == self.answered_stamp
            self.stats['repeated_answers'] += repeat
            if not repeat:
                self._maybe_auto_enable(stamp)
                if self.controller.mode == DISABLED:
                    return
        if repeat:
            self._publish_last(stamp)
            return
        due = self.next_deadline is None or stamp >= self.next_deadline \
            or stamp < self.next_deadline - 2 * self.period_ns
        if due:
            self.next_deadline = stamp + self.period_ns
            self._cycle(stamp, mono_start=received, obs_latency=True)
        else:
            self._publish_last(stamp)
        self.answered_stamp = stamp

    def _cycle(self, now: int, mono_start: int, obs_latency: bool = False) -> None:
        t0 = time.monotonic_ns()
        with self.lock:
            self._maybe_auto_enable(now)
            res = self.controller.step(now)
        if res.command is not None:
            self._publish(res.command, now)
        if res.mode == DISABLED:
            return
        done = time.monotonic_ns()
        if res.mode != 'hold':
            self.holding = False
        self.compute.append(done - t0)
        if res.model_ns:
            self.model_ns.append(res.model_ns)
            if self.spec.images:
                self.inference.append(res.preprocess_ns + res.model_ns)
                self.preprocess.append(res.preprocess_ns)
        if obs_latency:
            self.obs_to_cmd.append(done - mono_start)
            self.overhead.append(done - mono_start - res.model_ns)
        if res.event:
            if res.event.startswith('rejected'):
                self.stats['window_rejected'] += 1
                self.get_logger().error(res.event, throttle_duration_sec=1.0)
            elif res.mode == 'hold':
                self.stats['window_stale'] += 1
                self._warn_hold(res.event, done)
            else:
                self.get_logger().warning(res.event, throttle_duration_sec=1.0)

    def _warn_hold(self, event: str, mono_ns: int) -> None:
        """Log a stale hold when it starts, then at most every ``HOLD_WARN_EVERY_S``."""
        if self.holding and mono_ns - self.hold_warned_mono < HOLD_WARN_EVERY_S * 1e9:
            return
        first = not self.holding
        self.holding = True
        self.hold_warned_mono = mono_ns
        self.get_logger().warning(f'{event} until fresh data return' if first
                                  else f'still holding: {event}')

    def _publish(self, command: Any, stamp_ns: int | None = None) -> None:
        """Publish ``command`` stamped ``stamp_ns``: the time the controller decided it at.

        The ramp and the network's time inputs advance with that time; a stamp taken later,
        at publish, would add the step's own run time and its preemption (seen: a 0.39 rad/s
        ramp read as 0.58 rad/s from publish stamps on a loaded machine).
        """
        msg = self._msg
        stamp = self._now() if stamp_ns is None else stamp_ns
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        msg.position = [float(x) for x in command]
        self.pub.publish(msg)
        self.stats['published'] += 1

    def _publish_last(self, stamp_ns: int) -> None:
        with self.lock:
            cmd = self.controller.last_command
        if cmd is not None:
            self._publish(cmd, stamp_ns)

    # ---- diagnostics ---------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self.lock:
            c = self.controller
            counts = dict(c.counts)
            mode, fault = c.mode, c.last_fault
            goal = ' '.join(f'{x:.6g}' for x in c.goal)
            now = self._now()
            age = (now - c.state_stamp_ns) / 1e6 if c.position is not None else -1.0
            image_ages = c.image_ages_ns(now)
        rejected, self.stats['window_rejected'] = self.stats['window_rejected'], 0
        stale, self.stats['window_stale'] = self.stats['window_stale'], 0
        # inputs rejected or observations not built since the last report: WARN (not latched)
        new = {k: counts.get(k, 0) - self._diag_counts.get(k, 0) for k in WARN_COUNTS}
        self._diag_counts = {k: counts.get(k, 0) for k in WARN_COUNTS}
        warnings = ', '.join(f'{n} {k.replace("_", " ")}' for k, n in new.items() if n > 0)
        level, message = 'ok', mode
        if stale or warnings:
            level, message = 'warn', f'{mode}: ' + (f'{warnings} since the last report; '
                                                     if warnings else '') + fault
        if rejected:
            level, message = 'error', f'{rejected} network outputs rejected: {fault}'
        if mode == DAMPING:  # latched until re-enabled: the robot is down
            level, message = 'error', (f'fallen, damping until re-enabled: '
                                       f'{self.controller.fall_reason}')
        stalled = self.heartbeat.stalled_ns() if self.thread is not None else 0
        if stalled:
            level, message = 'error', f'control loop stalled: no cycle for {stalled / 1e9:.1f} s'
        wakes = np.diff(np.asarray(self.wakes, dtype=np.int64))
        err = np.abs(wakes - self.period_ns) / 1e6 if not self.sync else np.zeros(0)
        values: dict[str, object] = {
            'policy': self.spec.name, 'model': str(self.model.path),
            'model_format': self.model.format, 'mode': mode,
            'control_rate_hz': 1e9 / self.period_ns, 'sync_to_states': self.sync,
            'compute_p50_ms': _pct(self.compute, 50), 'compute_p99_ms': _pct(self.compute, 99),
            'compute_max_ms': _pct(self.compute, 100),
            'model_p50_ms': _pct(self.model_ns, 50), 'model_p99_ms': _pct(self.model_ns, 99),
            'obs_to_cmd_p50_ms': _pct(self.obs_to_cmd, 50),
            'obs_to_cmd_p99_ms': _pct(self.obs_to_cmd, 99),
            'overhead_p50_ms': _pct(self.overhead, 50), 'overhead_p99_ms': _pct(self.overhead, 99),
            'period_err_p50_ms': float(np.percentile(err, 50)) if err.size else 0.0,
            'period_err_p99_ms': float(np.percentile(err, 99)) if err.size else 0.0,
            'wake_late_p99_ms': _pct(self.late, 99),
            'deadline_misses': self.stats['deadline_misses'],
            'skipped_periods': self.stats['skipped_periods'],
            'commands_published': self.stats['published'],
            'repeated_answers': self.stats['repeated_answers'],
            'goals_received': self.stats['goals'], 'goal_rad': goal,
            'observation_age_ms': age, 'stale_after_ms': c.stale_after_ns / 1e6,
            'declared_rate_hz': self.spec.declared_rate_hz,
            'rate_limit_rad_per_step': self.spec.action.rate_limit_rad, 'last_fault': fault,
            'loop_heartbeat_age_ms': self.heartbeat.age_ns() / 1e6,
            **({'fall_tilt_rad': c.fall.tilt_rad if c.fall.tilt_rad is not None else -1.0,
                'fall_limit_rad': c.fall.spec.tilt_rad, 'fall_after_s': c.fall.spec.after_s}
               if c.fall is not None else {}),
            **(self._image_values(image_ages) if self.spec.images else {}),
            **(self.rt_state.values() if self.rt_state is not None else {}),
            **(self.rt_others.values() if self.rt_others is not None else {}),
            **counts,
        }
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(f'{self.get_fully_qualified_name()}: policy',
                                                 self.robot.name, level, message, values)]
        self.pub_diag.publish(arr)

    def _image_values(self, ages: list[int | None]) -> dict[str, object]:
        """Image diagnostics: the oldest camera's frame age (-1: a camera has sent none)."""
        oldest = -1.0 if any(a is None for a in ages) else max(
            (a for a in ages if a is not None), default=0) / 1e6
        return {'image_age_ms': oldest, 'image_topics': ' '.join(self.image_topics),
                'image_shape': ' '.join(str(d) for d in self.spec.image_shape or ()),
                'inference_p50_ms': _pct(self.inference, 50),
                'inference_p99_ms': _pct(self.inference, 99),
                'preprocess_p50_ms': _pct(self.preprocess, 50),
                'preprocess_p99_ms': _pct(self.preprocess, 99)}

    def close(self) -> None:
        """Stop the loop thread."""
        self.running = False
        self.clock_moved.set()
        if self.thread is not None:
            self.thread.join(timeout=2.0)
        self._jump_handle.unregister()


def main(args: list[str] | None = None) -> int:
    """Run the policy node."""
    fast_thread_switching()
    return run_node(PolicyNode, args, executor_factory=_executor)


def _executor() -> object:
    """Return the C++ events executor where rclpy has it (far less GIL time per callback)."""
    try:
        from rclpy.experimental import EventsExecutor  # type: ignore[attr-defined]
        return EventsExecutor()
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor
        return SingleThreadedExecutor()


if __name__ == '__main__':
    raise SystemExit(main())
