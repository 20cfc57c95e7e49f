"""``simreal_sim_bridge``: the simulation (MuJoCo or PyBullet) as a robot on the topic contract.

Publishes ``joint_states``, ``imu/data`` (when the robot has an IMU: the engine's reading with
the spec's noise and bias, :class:`simreal_ros.core.legged.ImuNoise`), ``/clock`` (sim time),
``NAME/image_raw`` and ``NAME/camera_info`` per camera of the robot spec (``cameras``; rendered
on their own thread, :mod:`simreal_ros.sim.render_thread`) and ``/diagnostics``; subscribes
``joint_commands`` and ``forward_position_controller/commands``; serves ``~/reset``,
``~/set_paused`` and ``~/step``; each free object of ``scene:=`` gets a parameter
``objects.<name>.position`` that places it when set (:mod:`simreal_ros.ros.placement`;
``simreal eval`` moves the visual reach task's ball with it). Physics runs on its own thread,
paced by ``timing_mode`` (see :class:`~simreal_ros.sim.bridge_config.SimBridgeConfig`),
optionally under SCHED_FIFO (``rt_priority``, ``cpu_affinity``); a physics thread that stops
beating its heartbeat for ``STALL_S`` is reported as ERROR on ``/diagnostics``. The diagnostics
name the engine (``engine:=``) and what it approximates (``engine_approximations``: PyBullet's
armature), which the bridge also warns about once at start.

A floating-base robot (``base.type: floating``, docs/legged.md) also gets, with every state:
``odom`` (nav_msgs/Odometry, the base's ground truth: pose in ``odom``, twist in the base
frame), ``foot_contacts`` (sensor_msgs/JointState: ``name`` the spec's feet in order,
``effort`` each foot's contact normal force in N, 0 in the air; no positions) and, at most
50 Hz by stamp, ``/tf`` ``odom`` -> base link (:mod:`simreal_ros.ros.base_topics`; both with
``frame_prefix``, a second robot's ``twin/`` or ``sim_b/``); it subscribes ``cmd_vel``
(geometry_msgs/Twist) and keeps the latest as ``cmd_vel`` (:class:`VelocityCommand`) for the
policies to come, and ``push`` (geometry_msgs/Wrench: ``force`` in N in the world frame at the
base's centre of mass for ``push_duration_s`` of sim time, :mod:`simreal_ros.sim.push`; a
non-zero ``torque`` or a non-finite force is rejected with a warning; a new push replaces a
running one). ``~/reset`` puts it back on its feet at the home pose, ``base.height_m`` up, and
ends a push; with a randomization that has ``pushes:`` (and ``randomize_on_reset``) it also
draws random pushes from then on (:mod:`simreal_ros.core.pushes`, seeded by ``seed``), each at
its exact physics step, and its answer and log give the first one's time and force.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist, Wrench
import numpy as np
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

from simreal_ros.core.commands import CommandIntake, JointTarget, map_names
from simreal_ros.core.dynamics import load_overlay, load_randomization
from simreal_ros.core.legged import ImuNoise, VelocityCommand, velocity_command
from simreal_ros.core.realtime import Heartbeat, ThreadRt
from simreal_ros.core.robot import load_robot
from simreal_ros.core.timing import PeriodStats, PreciseRate
from simreal_ros.ros import messages, qos
from simreal_ros.ros.base_topics import BaseTopics
from simreal_ros.ros.image_publisher import SimCameras
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.placement import PlacementParameters
from simreal_ros.ros.runtime import fast_thread_switching, run_node, start_rt
from simreal_ros.sim.backend import Observation
from simreal_ros.sim.bridge_config import SimBridgeConfig
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.push import PushSchedule, check_push
from simreal_ros.sim.scene import load_scene

LOCKSTEP_RESEND_S = 0.5
#: the physics thread beats at least every LOCKSTEP_RESEND_S (lockstep) or 0.05 s (paused)
STALL_S = 1.0
RCLError = rclpy_implementation.RCLError
#: the random pushes' generator is ``default_rng([seed, PUSH_STREAM])``, apart from the dynamics'
PUSH_STREAM = 1


class SimBridge(Node):
    """A simulated robot exposed over the topic contract."""

    def __init__(self) -> None:
        super().__init__('sim_bridge')
        self.cfg = SimBridgeConfig.from_mapping(declare_dataclass(self, SimBridgeConfig),
                                                f'{self.get_fully_qualified_name()} params')
        cfg = self.cfg
        self.robot = load_robot(cfg.robot)
        scene = load_scene(cfg.scene) if cfg.scene else None
        self.sim = make_sim(
            self.robot, scene=scene,
            overlay=load_overlay(cfg.overlay) if cfg.overlay else None,
            randomization=load_randomization(cfg.randomization) if cfg.randomization else None,
            seed=cfg.seed, engine=cfg.engine)
        for note in self.sim.approximations():
            self.get_logger().warning(f'{cfg.engine} approximates {note}')
        self.intake = CommandIntake(self.robot, self._log_rejection)
        self.names = self.robot.joint_names
        self.steps_per_publish = cfg.steps_per_publish(self.robot.timestep_s)
        self.period_ns = self.steps_per_publish * self.sim.dt_ns

        self.lock = threading.Lock()
        self.last_command = JointTarget.hold(self.robot.home)
        self.command_event = threading.Event()
        self.wake = threading.Event()
        self.paused = cfg.start_paused
        self.step_requests = 0
        self.running = True
        self.stats: dict[str, Any] = {'missed_ticks': 0, 'published': 0, 'physics_error': '',
                                      'publish_failures': 0, 'publish_error': '',
                                      'repeated_answers': 0}
        #: lockstep: the stamp of the last command that released a tick (0: none or unstamped)
        self.answer_stamp_ns = 0
        self.publish_stats = PeriodStats(self.period_ns)
        self._rtf_mark = (time.monotonic_ns(), self.sim.time_ns, self.sim.step_count)
        self.rate = PreciseRate(self.period_ns, cfg.spin_wait_us * 1000)
        self.heartbeat = Heartbeat(max(int(STALL_S * 1e9), 5 * self.period_ns))
        self.rt_state: ThreadRt | None = None
        self.rt_others: ThreadRt | None = None  # set by start_rt

        self.pub_state = self.create_publisher(JointState, 'joint_states', qos.STATE)
        self.pub_imu = (self.create_publisher(Imu, 'imu/data', qos.STATE)
                        if self.robot.imu is not None else None)
        self.pub_clock = (self.create_publisher(Clock, '/clock', qos.CLOCK)
                          if cfg.uses_sim_time and cfg.publish_clock else None)
        # messages are built once and refilled: the publish path runs at up to kHz rates
        self._state_msg = messages.joint_state(self.names, 0, self.robot.home)
        self._clock_msg = Clock()
        self._imu_msg = Imu()
        self.imu_noise: ImuNoise | None = None
        if self.robot.imu is not None:
            self._imu_msg.header.frame_id = self.robot.imu.frame_id
            self.imu_noise = ImuNoise(self.robot.imu, cfg.seed)
            (self._imu_msg.orientation_covariance, self._imu_msg.angular_velocity_covariance,
             self._imu_msg.linear_acceleration_covariance) = self.imu_noise.covariances()
        self.cmd_vel = VelocityCommand.zero()
        self.cmd_vel_stats = {'received': 0, 'rejected': 0}
        self.pushes = PushSchedule()
        self.push_rng = np.random.default_rng([cfg.seed, PUSH_STREAM])
        self.push_stats = {'pushes_rejected': 0}
        self._init_floating_base()
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.create_subscription(JointState, 'joint_commands', self._on_command, qos.COMMAND)
        self.create_subscription(Float64MultiArray, 'forward_position_controller/commands',
                                 self._on_forward_command, qos.COMMAND)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_service(SetBool, '~/set_paused', self._on_set_paused)
        self.create_service(Trigger, '~/step', self._on_step)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self.placement = PlacementParameters(self, self.sim, self.lock, scene)
        self.resync_source: tuple[int, Any, Any] | None = None  # (receive ns, q, qd)
        self.resync_stats: dict[str, Any] = {'count': 0, 'skipped': 0, 'error_before': 0.0,
                                             'source_age_ms': 0.0, 'rejected_sources': 0}
        if cfg.resync_period_s > 0:
            self.pub_resync = self.create_publisher(JointState, '~/resync', qos.STATE)
            self.create_subscription(JointState, cfg.resync_topic, self._on_resync_source,
                                     qos.STATE)
            self.create_timer(cfg.resync_period_s, self._resync)

        self.cameras = (SimCameras(self, self.sim, self.robot.cameras)
                        if cfg.cameras and self.robot.cameras else None)
        self.thread = threading.Thread(target=self._physics_thread, name='physics',
                                       daemon=True)
        self.thread.start()
        self.get_logger().info(
            f'{self.robot.name} in {self.sim.engine}: {self.robot.n} joints, '
            f'dt={self.robot.timestep_s * 1e3:g} ms, '
            f'{cfg.timing_mode} mode, joint_states every {self.steps_per_publish} steps '
            f'({1e9 / self.period_ns:g} Hz), command delay {self.sim.delay_steps} steps'
            + (', paused' if self.paused else ''))

    def _init_floating_base(self) -> None:
        """Create the publishers of odom, foot_contacts and /tf; subscribe cmd_vel and push."""
        base = self.robot.base
        if base is None:
            return
        self.base_topics = BaseTopics(self, base.feet, self.robot.base_frame,
                                      self.cfg.frame_prefix)
        self.create_subscription(Twist, 'cmd_vel', self._on_cmd_vel, qos.COMMAND)
        self.create_subscription(Wrench, 'push', self._on_push, qos.COMMAND)

    def _on_push(self, msg: Wrench) -> None:
        f, tq = msg.force, msg.torque
        try:
            if (tq.x, tq.y, tq.z) != (0.0, 0.0, 0.0):
                raise ValueError(f'a push is a force at the centre of mass: torque must be 0, '
                                 f'got {[tq.x, tq.y, tq.z]}')
            push = check_push((f.x, f.y, f.z), self.cfg.push_duration_s)
        except ValueError as exc:
            self.push_stats['pushes_rejected'] += 1
            self.get_logger().warning(f'rejected push: {exc}', throttle_duration_sec=1.0)
            return
        with self.lock:
            self.pushes.request(push)
        self.get_logger().info(f'push {push.force_n.tolist()} N for {push.duration_s:g} s')

    def _on_cmd_vel(self, msg: Twist) -> None:
        lin, ang = msg.linear, msg.angular
        try:
            cmd = velocity_command((lin.x, lin.y, lin.z), (ang.x, ang.y, ang.z),
                                   self.get_clock().now().nanoseconds)
        except ValueError as exc:
            self.cmd_vel_stats['rejected'] += 1
            self.get_logger().warning(f'rejected cmd_vel, keeping the last one: {exc}',
                                      throttle_duration_sec=1.0)
            return
        with self.lock:
            self.cmd_vel = cmd
        self.cmd_vel_stats['received'] += 1

    # ---- commands ------------------------------------------------------------------------
    def _accept(self, names: list[str], position: Any, velocity: Any, effort: Any,
                stamp_ns: int) -> None:
        with self.lock:
            target = self.intake.merge(self.last_command, names, position, velocity, effort,
                                       stamp_ns)
            if target is None:
                return
            self.last_command = self.intake.accept(target)
            self.sim.set_target(target)
            if self.cfg.timing_mode == 'lockstep' and stamp_ns:
                # a controller answers a re-sent state again (its first answer may have been
                # lost before this subscription matched it); when that first answer was only
                # late, the second one, or an injected duplicate, must not release a second tick
                if stamp_ns == self.answer_stamp_ns:
                    self.stats['repeated_answers'] += 1
                    return
                self.answer_stamp_ns = stamp_ns
            self.command_event.set()  # under the lock: a repeat is told apart before it counts

    def _log_rejection(self, exc: Exception) -> None:
        self.get_logger().warning(f'rejected joint command, holding last target: {exc}',
                                  throttle_duration_sec=1.0)

    def _on_command(self, msg: JointState) -> None:
        self._accept(list(msg.name), msg.position, msg.velocity, msg.effort,
                     messages.stamp_to_ns(msg.header.stamp))

    def _on_forward_command(self, msg: Float64MultiArray) -> None:
        self._accept([], msg.data, (), (), 0)

    # ---- twin re-sync ----------------------------------------------------------------------
    def _on_resync_source(self, msg: JointState) -> None:
        try:  # every joint named, lengths matching, finite
            if not msg.name:
                raise ValueError('no joint names')
            pos = map_names(msg.name, msg.position, self.names, 'resync joint_states')
            vel = (map_names(msg.name, msg.velocity, self.names, 'resync joint_states')
                   if len(msg.velocity) else np.zeros(self.robot.n))
        except ValueError:
            self.resync_stats['rejected_sources'] += 1
            return
        self.resync_source = (time.monotonic_ns(), pos, vel)

    def _resync(self) -> None:
        src = self.resync_source
        now = time.monotonic_ns()
        # a state older than one re-sync period (or 0.5 s) is not "the real robot now"
        if src is None or now - src[0] > max(self.cfg.resync_period_s, 0.5) * 1e9:
            self.resync_stats['skipped'] += 1
            return
        received, pos, vel = src
        with self.lock:
            before = self.sim.observe().position
            self.sim.set_joint_state(pos, vel)
            stamp = (self.sim.time_ns if self.cfg.uses_sim_time
                     else self.get_clock().now().nanoseconds)
        st = self.resync_stats
        st['count'] += 1
        st['error_before'] = float(np.max(np.abs(before - pos)))
        st['source_age_ms'] = (now - received) / 1e6
        self.pub_resync.publish(messages.joint_state(list(self.names), stamp, pos, vel))

    # ---- services ------------------------------------------------------------------------
    def _on_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self.lock:
            randomize = self.cfg.randomize_on_reset and self.sim.randomization is not None
            params = self.sim.reset(randomize=randomize)
            self.pushes.clear()
            rand = self.sim.randomization
            ranges = rand.pushes if randomize and rand is not None else None
            pushes = self.pushes.draw(ranges, self.push_rng, self.sim) if ranges else ''
            self.last_command = JointTarget.hold(self.robot.home)
        self.rate.reset()
        summary = ', '.join(f'{k}={v:.4g}' for k, v in params.flat().items())
        self.get_logger().info(f'reset to home{" with randomized dynamics" if randomize else ""}'
                               + (f': {summary}' if randomize else '')
                               + (f'; {pushes}' if pushes else ''))
        res.success = True
        res.message = 'reset to home' + (f' (randomized: {summary})' if randomize else '') \
            + (f'; {pushes}' if pushes else '')
        self.command_event.set()
        return res

    def _on_set_paused(self, req: SetBool.Request, res: SetBool.Response) -> SetBool.Response:
        with self.lock:
            self.paused = bool(req.data)
        self.wake.set()
        res.success = True
        res.message = 'paused' if req.data else 'running'
        return res

    def _on_step(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self.lock:
            allowed = self.paused or self.cfg.timing_mode == 'lockstep'
            if allowed:
                self.step_requests += 1
        if not allowed:
            res.success = False
            res.message = 'single-stepping needs the bridge paused or in lockstep mode'
            return res
        self.wake.set()
        self.command_event.set()
        res.success = True
        res.message = f'advancing {self.steps_per_publish} steps'
        return res

    # ---- physics thread --------------------------------------------------------------------
    def _physics_thread(self) -> None:
        self.rt_state = start_rt(self, self.cfg.rt, 'physics')
        try:
            {'realtime': self._run_realtime, 'lockstep': self._run_lockstep,
             'free': self._run_free}[self.cfg.timing_mode]()
        except Exception as exc:  # noqa: BLE001 - reported, then the node exits non-zero
            if not self.context.ok():  # shutting down (Ctrl-C / SIGTERM): not a failure
                return
            self.stats['physics_error'] = repr(exc)
            self.get_logger().fatal(f'physics thread failed: {exc!r}')
            self.exit_code = 2
            self.finished = True

    def _take_step_request(self) -> bool:
        with self.lock:
            if self.step_requests:
                self.step_requests -= 1
                return True
            return False

    def _wait_while_paused(self) -> bool:
        """Block while paused; return True when one single step was requested."""
        while self.running and self.paused:
            self.heartbeat.beat()
            if self._take_step_request():
                return True
            self.wake.wait(0.05)
            self.wake.clear()
        return False

    def _advance_and_publish(self, steps: int) -> Observation:
        self.heartbeat.beat()
        with self.lock:
            self.pushes.step(self.sim, steps)
            obs = self.sim.observe()
        self._publish(obs)
        return obs

    def _run_realtime(self) -> None:
        anchor_wall = time.monotonic_ns()
        anchor_steps = self.sim.step_count
        max_lag = 10 * self.steps_per_publish
        while self.running:
            if self.paused:
                stepped = self._wait_while_paused()
                if stepped:
                    self._advance_and_publish(self.steps_per_publish)
                anchor_wall, anchor_steps = time.monotonic_ns(), self.sim.step_count
                self.rate.reset()
                continue
            wake = self.rate.sleep()
            self.heartbeat.beat()
            due = (wake - anchor_wall) // self.sim.dt_ns - (self.sim.step_count - anchor_steps)
            if due > max_lag:  # physics cannot keep up: run slower than real time, counted
                self.rate.overruns += 1
                anchor_wall = wake - self.steps_per_publish * self.sim.dt_ns
                anchor_steps = self.sim.step_count
                due = self.steps_per_publish
            if due > 0:
                self._advance_and_publish(int(due))

    def _run_free(self) -> None:
        while self.running:
            if self.paused and not self._wait_while_paused():
                continue
            self._advance_and_publish(self.steps_per_publish)

    def _run_lockstep(self) -> None:
        timeout = self.cfg.lockstep_timeout_s or None
        with self.lock:
            obs = self.sim.observe()
        self.command_event.clear()
        self._publish(obs)
        while self.running:
            if self.paused:
                if not self._wait_while_paused():
                    continue
            else:
                if not self._wait_for_command(obs, timeout):
                    continue
                self._take_step_request()
            self.command_event.clear()
            obs = self._advance_and_publish(self.steps_per_publish)

    def _wait_for_command(self, obs: Observation, timeout: float | None) -> bool:
        """Wait for the command that releases the next lockstep tick.

        While waiting, the last state is re-sent (same stamp) every ``LOCKSTEP_RESEND_S`` so a
        controller that joined late (and missed it), or whose answer was lost, can answer; a
        controller answers a re-sent state again, with the same stamp, and a command stamped
        like the one that released the previous tick releases none. Returns False when paused
        or stopping instead.
        """
        waited = 0.0
        while self.running and not self.paused:
            self.heartbeat.beat()
            step = LOCKSTEP_RESEND_S if not timeout else min(LOCKSTEP_RESEND_S,
                                                              timeout - waited)
            if self.command_event.wait(step):
                return True
            waited += step
            if timeout and waited >= timeout:
                self.stats['missed_ticks'] += 1
                return True
            self._publish(obs, resend=True)
        return False

    def _publish(self, obs: Observation, resend: bool = False) -> None:
        stamp = obs.stamp_ns if self.cfg.uses_sim_time else self.get_clock().now().nanoseconds
        sec, nanosec = divmod(stamp, 1_000_000_000)
        if self.pub_clock is not None:
            clock = self._clock_msg.clock
            clock.sec, clock.nanosec = divmod(obs.stamp_ns, 1_000_000_000)
            self.pub_clock.publish(self._clock_msg)
        js = self._state_msg
        js.header.stamp.sec, js.header.stamp.nanosec = sec, nanosec
        js.position = obs.position.tolist()
        js.velocity = obs.velocity.tolist()
        js.effort = obs.effort.tolist()
        try:
            self._publish_state(js, obs, sec, nanosec)
        except RCLError as exc:
            # A write the middleware refuses (``cannot publish data``: seen once with a camera
            # relayed next to the states at load average 6) loses that one state, counted; it
            # ended the whole simulation before.
            if not self.context.ok():
                raise
            self.stats['publish_failures'] += 1
            self.stats['publish_error'] = str(exc)
            self.get_logger().warning(f'publishing a state failed: {exc}',
                                      throttle_duration_sec=5.0)
        if not resend:
            if self.cameras is not None:  # a qpos copy when a frame is due; never blocks
                self.cameras.offer(stamp, self.sim.render_state())
            self.publish_stats.tick(time.monotonic_ns())
            self.stats['published'] += 1

    def _publish_state(self, js: JointState, obs: Observation, sec: int, nanosec: int) -> None:
        self.pub_state.publish(js)
        if self.pub_imu is not None and obs.imu_quat_wxyz is not None:
            assert obs.imu_gyro is not None and obs.imu_acc is not None
            imu = self._imu_msg
            imu.header.stamp.sec, imu.header.stamp.nanosec = sec, nanosec
            assert self.imu_noise is not None
            q, g, a = self.imu_noise.apply(obs.imu_quat_wxyz, obs.imu_gyro, obs.imu_acc)
            o = imu.orientation
            o.w, o.x, o.y, o.z = float(q[0]), float(q[1]), float(q[2]), float(q[3])
            w = imu.angular_velocity
            w.x, w.y, w.z = float(g[0]), float(g[1]), float(g[2])
            acc = imu.linear_acceleration
            acc.x, acc.y, acc.z = float(a[0]), float(a[1]), float(a[2])
            self.pub_imu.publish(imu)
        if obs.base is not None:
            self.base_topics.publish(obs, sec, nanosec)

    # ---- diagnostics -----------------------------------------------------------------------
    def _residual_values(self) -> dict[str, object]:
        """Return the residual's figures since the last report (call under the lock)."""
        r = self.sim.residual
        if r is None:
            return {'residual': 'none'}
        s = r.stats
        values: dict[str, object] = {'residual': r.source, 'residual_kind': r.kind,
                                     **s.values()}
        s.calls = s.ood_calls = s.compute_ns = 0  # per report window
        s.max_abs_output = 0.0
        return values

    def _publish_diagnostics(self) -> None:
        now = time.monotonic_ns()
        with self.lock:
            sim_ns, steps = self.sim.time_ns, self.sim.step_count
            params = self.sim.params.flat()
            warnings = self.sim.divergences()
            rejected_window = self.intake.take_rejected_window()
            intake = self.intake.values()
            residual = self._residual_values()
        wall0, sim0, steps0 = self._rtf_mark
        self._rtf_mark = (now, sim_ns, steps)
        dt_wall = max(1, now - wall0)
        level, message = 'ok', 'running'
        if self.paused:
            message = 'paused'
        if rejected_window:
            level, message = 'warn', f'{rejected_window} commands rejected: ' \
                                     f'{intake["last_rejection"]}'
        if warnings:
            level, message = 'warn', f'simulation unstable ({warnings} divergence resets)'
        stalled = self.heartbeat.stalled_ns()
        if stalled:
            level, message = 'error', (f'physics thread stalled: no progress for '
                                       f'{stalled / 1e9:.1f} s')
        if self.stats['physics_error']:
            level, message = 'error', f'physics thread failed: {self.stats["physics_error"]}'
        values: dict[str, object] = {
            'engine': self.sim.engine,
            'engine_approximations': '; '.join(self.sim.approximations()) or 'none',
            'timing_mode': self.cfg.timing_mode, 'robot': self.robot.name,
            'sim_time_s': sim_ns / 1e9, 'real_time_factor': (sim_ns - sim0) / dt_wall,
            'step_rate_hz': (steps - steps0) * 1e9 / dt_wall, 'paused': self.paused,
            'overruns': self.rate.overruns, 'command_delay_steps': self.sim.delay_steps,
            **intake,
            'lockstep_missed_ticks': self.stats['missed_ticks'],
            'lockstep_repeated_answers': self.stats['repeated_answers'],
            'states_published': self.stats['published'],
            **self.placement.values(),
            'publish_failures': self.stats['publish_failures'],
            **({'publish_error': self.stats['publish_error']}
               if self.stats['publish_failures'] else {}),
            **({'resyncs': self.resync_stats['count'],
                'resyncs_skipped_stale_source': self.resync_stats['skipped'],
                'resync_sources_rejected': self.resync_stats['rejected_sources'],
                'resync_error_before_max_rad': self.resync_stats['error_before'],
                'resync_source_age_ms': self.resync_stats['source_age_ms']}
               if self.cfg.resync_period_s > 0 else {}),
            **{f'publish_{k}': v for k, v in self.publish_stats.summary().items()},
            'physics_heartbeat_age_ms': self.heartbeat.age_ns() / 1e6,
            **(self.rt_state.values() if self.rt_state is not None else {}),
            **(self.cameras.values() if self.cameras is not None else {}),
            **(self.rt_others.values() if self.rt_others is not None else {}),
            **{f'dynamics.{k}': v for k, v in params.items()},
            **residual,
            **({'cmd_vel_received': self.cmd_vel_stats['received'],
                'cmd_vel_rejected': self.cmd_vel_stats['rejected'],
                'cmd_vel_linear_x': self.cmd_vel.linear_m_s[0],
                'cmd_vel_linear_y': self.cmd_vel.linear_m_s[1],
                'cmd_vel_angular_z': self.cmd_vel.angular_rad_s[2],
                'pushes': self.pushes.count, 'pushes_drawn': self.pushes.drawn_count,
                **self.push_stats}
               if self.robot.floating else {}),
        }
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: sim bridge', self.robot.name, level, message,
            values)]
        self.pub_diag.publish(arr)

    def close(self) -> None:
        """Stop the physics thread."""
        self.running = False
        self.wake.set()
        self.command_event.set()
        self.thread.join(timeout=2.0)

    def destroy_node(self) -> None:
        """Stop rendering and destroy the cameras' participant, then this node.

        Also on a node whose ``__init__`` failed part way (a bad file named by a parameter):
        the attributes set so far are torn down, none is assumed.
        """
        cameras = getattr(self, 'cameras', None)
        if cameras is not None:
            cameras.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the sim bridge node."""
    # The physics thread must get the GIL back within ~0.2 ms of its deadline, not the default
    # 5 ms switch interval, or the executor thread's work shows up as publish jitter.
    fast_thread_switching()
    return run_node(SimBridge, args)


if __name__ == '__main__':
    raise SystemExit(main())
