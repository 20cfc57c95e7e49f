"""``simreal_dynamixel_driver``: a servo bus (Dynamixel by default) as a robot on the contract.

The bus is the one of the robot spec's ``bus.family``, built through the servo family registry
(:mod:`simreal_ros.hardware.family`), so the node drives any family that registers a bus with
the :class:`~simreal_ros.hardware.family.ServoBus` API; each joint's servo model comes from the
spec (``model``), and a spec naming an unknown family or model fails before the port opens.

Publishes ``joint_states`` (stamped when the bus read completed) and ``/diagnostics``;
subscribes ``joint_commands`` and ``forward_position_controller/commands``; serves ``~/reset``
(move to home at ``reset_speed``). The bus cycle (sync read, publish, sync write) runs on its
own thread at ``rate_hz``; see :class:`simreal_ros.hardware.driver_config.DriverConfig` for every
parameter and docs/hardware.md for the behaviour on faults.

Start-up fails (exit 1, one line naming the IDs) when a servo is missing, answers another
model number than its model's (the line names joint, ID, expected model and the number got)
or is in a hardware-error state (unless ``reboot_on_error``). With ``calibration`` (a file of
``simreal calibrate``) the robot spec is the calibrated one and, before configuring, every
servo's Homing Offset is checked against the file and the ones that differ are written
(:func:`simreal_ros.hardware.homing.sync_homing_offsets`); a servo that does not keep it fails
start-up in one line. A failed read publishes nothing (no
stale state is ever published as fresh); a vanished port is reported as ERROR on
``/diagnostics`` and reopened with back-off, keeping torque off if the watchdog had switched it
off; torque is disabled on Ctrl-C, SIGTERM and fatal errors.

The watchdog / torque / reset / reconnect decisions are
:class:`simreal_ros.hardware.dynamixel.driver_control.DriverControl` (ROS-free, unit-tested);
command intake is :class:`simreal_ros.core.commands.CommandIntake`, as in every backend. This
node owns the bus, runs the transactions those decide, and publishes.

The bus thread may run under SCHED_FIFO (``rt_priority``, ``cpu_affinity``) and beats a
heartbeat that ``/diagnostics`` turns into ERROR when it stops. At start the driver reads the
USB adapter's latency timer from sysfs
(:mod:`simreal_ros.hardware.dynamixel.usb_latency_timer`), warns above 1 ms with the command
that sets it, and reports the achieved cycle rate against what the timer and the bytes on the
wire allow.

What differs per family goes through the family (``bus.family``): the names of the hardware
error bits in ``/diagnostics`` (Dynamixel Hardware Error Status, Feetech Status), the byte-time
bound on the cycle rate (each family's packet sizes:
:func:`simreal_ros.hardware.dynamixel.wire.byte_time_limit_hz`,
:func:`simreal_ros.hardware.feetech.wire.byte_time_limit_hz`) and the Bus Watchdog: a bus
without one (Feetech STS, ``has_watchdog`` False) is never armed, ``bus_watchdog_ms`` reads 0 in
``/diagnostics`` and the servos keep their last goal when the driver dies (docs/feetech.md).
With ``gravity_ff`` > 0 every goal written is offset by that fraction of the sag the P/D
position loop would leave under gravity at the goal (:mod:`simreal_ros.hardware.gravity_ff`);
``joint_commands`` and the driver's decisions stay in joint angles, only the bus sees it.
The SO-101's USB boards (CH340-type, driver ``ch341``) have no latency-timer knob in sysfs:
the driver says so in one INFO line and does not check it.
"""

from __future__ import annotations

from pathlib import Path
import sys
import threading
import time
import traceback
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from simreal_ros.core.calibration import Calibration, apply_calibration, load_calibration
from simreal_ros.core.commands import CommandIntake
from simreal_ros.core.realtime import Heartbeat, ThreadRt
from simreal_ros.core.robot import load_robot
from simreal_ros.core.timing import PeriodStats, PreciseRate
from simreal_ros.errors import BusError, PortLostError
from simreal_ros.hardware.driver_config import DriverConfig
from simreal_ros.hardware.dynamixel import usb_latency_timer as latency_timer
from simreal_ros.hardware.dynamixel.driver_control import (
    Cycle,
    DriverControl,
)
from simreal_ros.hardware.dynamixel.driver_status import (
    FAILED_READS_ERROR,
    DriverSnapshot,
    driver_status,
)
from simreal_ros.hardware.family import (
    WATCHDOG_EXPIRED,
    BusState,
    ServoBus,
    bus_class,
    byte_time_limit_hz,
    error_names,
)
from simreal_ros.hardware.gravity_ff import GravityFeedForward
from simreal_ros.hardware.homing import sync_homing_offsets
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import fast_thread_switching, run_node, start_rt

#: the bus thread beats every cycle; reconnect back-off is at most reconnect_max_s (0.4 s)
STALL_S = 1.0


class DynamixelDriver(Node):
    """The servo bus of a robot spec exposed over the topic contract."""

    def __init__(self) -> None:
        super().__init__('dynamixel_driver')
        self.cfg = DriverConfig.from_mapping(declare_dataclass(self, DriverConfig),
                                             f'{self.get_fully_qualified_name()} params')
        cfg = self.cfg
        self.robot = load_robot(cfg.robot)
        self.calibration: Calibration | None = None
        if cfg.calibration:
            self.calibration = load_calibration(cfg.calibration, self.robot)
            self.robot = apply_calibration(self.robot, self.calibration)
        self.names = self.robot.joint_names
        self.baud = cfg.baud or self.robot.bus_baud
        self.dt = 1.0 / cfg.rate_hz
        self.intake = CommandIntake(self.robot, self._log_rejection)
        # the goal written = the goal decided + the modelled sag of the P/D loop (gravity_ff)
        self.gravity_ff: GravityFeedForward | None = (
            GravityFeedForward(self.robot, cfg.gravity_ff) if cfg.gravity_ff > 0 else None)
        self.bus: ServoBus = bus_class(self.robot)(
            self.robot, cfg.port, self.baud, return_delay_us=cfg.return_delay_us,
            latency_timer_ms=cfg.latency_timer_ms, servo_velocity_limit=not cfg.goal_rate_limit)
        self.robot = self.bus.robot  # with what the spec left to the servo models filled in
        self.family = self.robot.bus_family
        self.error_names = error_names(self.robot)
        # a bus without a watchdog (STS) is never armed: 0 units everywhere below
        self.watchdog_units = (cfg.bus_watchdog_units
                               if getattr(self.bus, 'has_watchdog', True) else 0)
        self.latency_timer_ms = latency_timer.read_latency_timer_ms(cfg.port, cfg.sysfs_root)
        warn = latency_timer.warning(cfg.port, self.latency_timer_ms, cfg.rate_hz, cfg.sysfs_root)
        if warn:
            self.get_logger().warning(warn)
        elif self.latency_timer_ms is None and self.family == 'feetech':
            self.get_logger().info(
                f'{cfg.port}: no latency_timer in sysfs (CH340-type adapters of the SO-101 '
                f'boards have none, nor does a pty): not checked')
        self.cycle_limit_hz = min(latency_timer.cycle_limit_hz(self.latency_timer_ms),
                                  byte_time_limit_hz(self.robot, self.baud,
                                                     cfg.return_delay_us * 1e-6))
        self.heartbeat = Heartbeat(max(int(STALL_S * 1e9), int(5e9 / cfg.rate_hz)))
        self.rt_state: ThreadRt | None = None
        self.rt_others: ThreadRt | None = None  # set by start_rt
        self._cycle_mark = (time.monotonic_ns(), 0)
        self._reads_mark = (0, 0)  # (reads, read failures) at the last diagnostics
        self.torque_left_on = ''  # why close() could not disable torque ('' = it could)
        state = self._start_bus()
        self.lock = threading.Lock()  # guards control's command side, intake, health, stats
        self.control = DriverControl(
            self.robot, state.position, dt_s=self.dt, command_timeout_s=cfg.command_timeout_s,
            watchdog=cfg.watchdog, goal_rate_limit=cfg.goal_rate_limit,
            reset_speed=cfg.reset_speed, reconnect_min_s=cfg.reconnect_min_s,
            reconnect_max_s=cfg.reconnect_max_s, give_up_after_s=cfg.give_up_after_s,
            now_ns=time.monotonic_ns())
        self.running = True
        self.health: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self.torque_read: tuple[int, ...] | None = None  # torque enable as read back
        self.reset_request = threading.Event()  # ~/reset asks, the bus thread answers
        self.reset_done = threading.Event()
        self.reset_result = (False, '')
        self.stats: dict[str, Any] = {
            'cycles': 0, 'published': 0, 'reads': 0, 'read_failures': 0, 'write_failures': 0,
            'bus_watchdog_expired': 0,
            'consecutive_failures': 0, 'port_lost': 0, 'reconnects': 0, 'last_error': '',
            'fatal': ''}
        self.publish_stats = PeriodStats(int(self.dt * 1e9))

        self.pub_state = self.create_publisher(JointState, 'joint_states', qos.STATE)
        self._state_msg = messages.joint_state(self.names, 0, state.position)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.create_subscription(JointState, 'joint_commands', self._on_command, qos.COMMAND)
        self.create_subscription(Float64MultiArray, 'forward_position_controller/commands',
                                 self._on_forward_command, qos.COMMAND)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self.thread = threading.Thread(target=self._run, name='bus', daemon=True)
        self.thread.start()
        self.get_logger().info(
            f'{self.robot.name}: {self.robot.n} servos on {cfg.port} at {self.baud} baud, '
            f'{cfg.rate_hz:g} Hz cycle, watchdog {cfg.command_timeout_s:g} s -> '
            f'{cfg.watchdog}')

    # ---- start-up ----------------------------------------------------------------------------
    def _start_bus(self) -> BusState:
        bus = self.bus
        try:
            bus.open()
            bus.check_servos(self.cfg.startup_timeout_s)
            if self.calibration is not None:  # before configure: it holds the present position
                sync_homing_offsets(bus, self.calibration, self.cfg.calibration,
                                    self.get_logger().info)
            bus.configure(reboot_on_error=self.cfg.reboot_on_error)
            for attempt in range(5):
                try:
                    return bus.read_state()
                except BusError:
                    if attempt == 4:
                        raise
            raise AssertionError('unreachable')
        except BusError:
            self._torque_off_best_effort()
            bus.close()
            raise

    def _torque_off_best_effort(self) -> bool:
        for _ in range(3):
            try:
                if not self.bus.is_open:
                    return False
                self.bus.set_torque(False)
                return True
            except BusError:
                continue
        return False

    # ---- commands ----------------------------------------------------------------------------
    def _accept(self, names: list[str], position: Any, velocity: Any, effort: Any,
                stamp_ns: int) -> None:
        with self.lock:
            target = self.intake.merge(self.control.merge_base, names, position, velocity,
                                       effort, stamp_ns)
            # during ~/reset the move to home runs to its end: the command is dropped
            if target is not None and self.control.take_command(target, time.monotonic_ns()):
                self.intake.accept(target)

    def _log_rejection(self, exc: Exception) -> None:
        self.get_logger().warning(f'rejected joint command, holding last target: {exc}',
                                  throttle_duration_sec=1.0)

    def _on_command(self, msg: JointState) -> None:
        self._accept(list(msg.name), msg.position, msg.velocity, msg.effort,
                     messages.stamp_to_ns(msg.header.stamp))

    def _on_forward_command(self, msg: Float64MultiArray) -> None:
        self._accept([], msg.data, (), (), 0)

    def _on_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self.lock:
            if not self.control.connected:
                res.success = False
                res.message = f'the bus is not connected ({self.stats["last_error"]})'
                return res
        # The bus belongs to the bus thread: it checks the servos, reboots those in error
        # (reboot_on_error) and starts the move home; this callback waits for its answer.
        self.reset_done.clear()
        self.reset_request.set()
        if not self.reset_done.wait(5.0):
            self.reset_request.clear()
            res.success = False
            res.message = 'the bus thread did not answer within 5 s; try again'
        else:
            res.success, res.message = self.reset_result
        # one call site per severity: rclpy refuses a call site whose severity changes
        # ("Logger severity cannot be changed between calls")
        if res.success:
            self.get_logger().info(f'reset: {res.message}')
        else:
            self.get_logger().error(f'reset: {res.message}')
        return res

    def _do_reset(self) -> None:
        """Serve a ~/reset on the bus thread: hardware errors first, then the move home."""
        self.reset_request.clear()
        try:
            # servos in error: BusError naming them and the fix, or REBOOT (reboot_on_error)
            rebooted = self.bus.clear_hardware_errors(self.cfg.reboot_on_error)
            if rebooted:
                names = [j.name for j in self.robot.joints if j.servo.servo_id in rebooted]
                self.get_logger().warning(f'reset: rebooted servo IDs {rebooted} ({names})')
            torque = [self.bus.read_register(sid, 'torque_enable') for sid in self.bus.ids]
            if not all(torque):
                # REBOOT (or a servo's power loss) resets its RAM: gains, goal current and
                # goal are gone, so configure afresh; torque comes on where the arm is
                self.bus.configure()
                self._arm_watchdog()
                position = self.bus.read_state().position
                with self.lock:
                    self.control.reconfigured(position)
                    self.torque_read = (1,) * self.robot.n
                    self.health = None
            with self.lock:
                self.control.start_reset()
            result = (True, f'moving to home at {self.cfg.reset_speed:g} rad/s'
                            + (' (after REBOOT of the servos in error)' if rebooted else ''))
        except PortLostError as exc:
            self._port_lost(exc)
            result = (False, f'bus lost: {exc}')
        except BusError as exc:
            result = (False, str(exc))
        self.reset_result = result
        self.reset_done.set()
        self._publish_diagnostics()

    # ---- the bus thread ----------------------------------------------------------------------
    def _arm_watchdog(self, ids: list[int] | None = None) -> None:
        """Arm the servos' Bus Watchdog (bus_watchdog_ms) where the cycle starts at once."""
        self.bus.arm_watchdog(self.watchdog_units, ids)

    def _run(self) -> None:
        self.rt_state = start_rt(self, self.cfg.rt, 'bus')
        rate = PreciseRate(int(self.dt * 1e9), 100_000)
        try:
            try:  # armed here, not at configure: node set-up between the two may take long
                self._arm_watchdog()
            except PortLostError as exc:
                self._port_lost(exc)  # the reconnect arms it
            while self.running:
                rate.sleep()
                self.heartbeat.beat()
                if self.control.dead(time.monotonic_ns()):
                    raise BusError(f'no state read from {self.cfg.port} for '
                                   f'{self.cfg.give_up_after_s:g} s (give_up_after_s), '
                                   f'giving up: {self.stats["last_error"]}')
                if not self.control.connected:
                    self._try_reconnect()
                    if self.reset_request.is_set():
                        self.reset_request.clear()
                        self.reset_result = (False, 'the bus is not connected')
                        self.reset_done.set()
                    continue
                if self.reset_request.is_set():
                    self._do_reset()
                    continue
                self._cycle()
        except Exception as exc:  # noqa: BLE001 - fatal: torque off, report, exit non-zero
            if not self.running or not self.context.ok():
                return
            self._fatal(exc)

    def _fatal(self, exc: Exception) -> None:
        """Attempt torque off, log one FATAL line (traceback at DEBUG), make the node exit 2."""
        if isinstance(exc, BusError):
            what = str(exc)
        else:  # a bug: where it happened is what the reader needs
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            what = f'{exc!r} at {Path(frame.filename).name}:{frame.lineno}'
        self.stats['fatal'] = what
        off = self._torque_off_best_effort()
        self.get_logger().debug(traceback.format_exc())
        if not off:
            self.torque_left_on = 'bus not answering'  # said here: close() says it no more
        self.get_logger().fatal(f'bus thread failed: {what}; ' + (
            'torque disabled' if off else 'torque could not be disabled (bus not answering)'))
        self.exit_code = 2
        self.finished = True

    def _cycle(self) -> None:
        st = self.stats
        st['reads'] += 1
        try:
            state = self.bus.read_state()
        except PortLostError as exc:
            self._port_lost(exc)
            return
        except BusError as exc:
            with self.lock:
                st['read_failures'] += 1
                st['consecutive_failures'] += 1
                st['last_error'] = str(exc)
            if st['consecutive_failures'] == FAILED_READS_ERROR:
                self._publish_diagnostics()
            return
        stamp = self.get_clock().now().nanoseconds
        self.control.state_read(time.monotonic_ns())
        recovered = st['consecutive_failures'] >= FAILED_READS_ERROR
        st['consecutive_failures'] = 0
        self._publish(state, stamp)
        if recovered:
            self._publish_diagnostics()
        try:
            with self.lock:
                cycle = self.control.step(state.position, time.monotonic_ns())
            self._perform(cycle, state)
            if st['cycles'] % self.cfg.health_every == 0:
                h = self.bus.read_health()
                with self.lock:
                    changed = self.health is None or self.health[0] != h.error_bits
                    self.health = (h.error_bits, h.temperature_c)
                    self.torque_read = h.torque_enable
                if changed and any(h.error_bits):
                    self._publish_diagnostics()
                if WATCHDOG_EXPIRED in h.bus_watchdog:
                    self._watchdog_expired(h.bus_watchdog)
        except PortLostError as exc:
            self._port_lost(exc)
            return
        except BusError as exc:
            with self.lock:
                st['write_failures'] += 1
                st['last_error'] = str(exc)
        st['cycles'] += 1

    def _watchdog_expired(self, watchdogs: tuple[int, ...]) -> None:
        """Servos whose Bus Watchdog expired (the bus thread stalled): resume where they are.

        They stopped and refuse goals; cleared, they take the present position as their goal
        (never the goals written while they refused them) and are armed again.
        """
        ids = [sid for sid, w in zip(self.bus.ids, watchdogs, strict=True)
               if w == WATCHDOG_EXPIRED]
        self.bus.arm_watchdog(0, ids)  # cleared: goal writes are accepted again
        state = self.bus.hold_present()
        self._arm_watchdog(ids)
        with self.lock:
            self.control.servos_stopped(state.position)
            self.stats['bus_watchdog_expired'] += 1
        self.get_logger().warning(
            f'bus watchdog expired on servo IDs {ids} (no packet for more than '
            f'{self.watchdog_units * 20} ms: a stall of the driver?); they had stopped '
            f'where they were; re-armed, tracking resumes from there')

    def _perform(self, cycle: Cycle, state: BusState) -> None:
        """Run one cycle's decision on the bus; each confirmed step is reported back."""
        log = self.get_logger()
        for level, message in cycle.events:
            # one call site per severity: rclpy refuses a site whose severity changes
            if level == 'warning':
                log.warning(message)
            else:
                log.info(message)
        if cycle.torque is not None:
            if cycle.torque:
                self.bus.hold_present()
            self.bus.set_torque(cycle.torque)  # verifies every servo
            with self.lock:
                self.control.torque_switched(cycle.torque, state.position)
                self.torque_read = (int(cycle.torque),) * self.robot.n
        if cycle.goal is not None:
            self.bus.write_goal(cycle.goal if self.gravity_ff is None
                                else self.gravity_ff.goal(cycle.goal))
            with self.lock:
                events = self.control.goal_written(cycle.goal)
            for _, message in events:
                log.info(message)

    def _publish(self, state: BusState, stamp: int) -> None:
        js = self._state_msg
        js.header.stamp.sec, js.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        js.position = state.position.tolist()
        js.velocity = state.velocity.tolist()
        js.effort = state.effort.tolist()
        self.pub_state.publish(js)
        self.publish_stats.tick(time.monotonic_ns())
        self.stats['published'] += 1

    # ---- reconnect ---------------------------------------------------------------------------
    def _port_lost(self, exc: Exception) -> None:
        self.bus.close()
        with self.lock:
            self.control.port_lost(time.monotonic_ns())
            self.stats['port_lost'] += 1
            self.stats['last_error'] = str(exc)
        self.get_logger().error(f'bus lost: {exc}; reconnecting')
        self._publish_diagnostics()

    def _try_reconnect(self) -> None:
        wait_ns = self.control.wait_ns(time.monotonic_ns())
        if wait_ns:
            time.sleep(min(0.01, wait_ns / 1e9))
            return
        with self.lock:
            keep_off = self.control.keep_torque_off(time.monotonic_ns())
            seq = self.control.command_seq
        try:
            self.bus.open()
            self.bus.check_servos(timeout_s=0.2)
            self.bus.configure(torque=not keep_off, reboot_on_error=self.cfg.reboot_on_error)
            self._arm_watchdog()
            state = self.bus.read_state()
        except BusError as exc:
            self.bus.close()
            with self.lock:
                self.stats['last_error'] = str(exc)
            self.control.reconnect_failed(time.monotonic_ns())
            return
        with self.lock:
            self.control.reconnected(state.position, keep_off, seq)
            self.torque_read = (int(not keep_off),) * self.robot.n
            self.stats['reconnects'] += 1
            self.stats['consecutive_failures'] = 0
        self.get_logger().info(f'bus reconnected on {self.cfg.port}'
                               + (', torque kept off until a new command' if keep_off else ''))
        self._publish_diagnostics()

    # ---- diagnostics ---------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self.lock:
            st = dict(self.stats)
            ctl = self.control
            connected, health, torque_read = ctl.connected, self.health, self.torque_read
            torque_commanded, watchdog_active = ctl.torque_on, ctl.watchdog_active
            watchdog_trips = ctl.watchdog_trips
            rejected_window = self.intake.take_rejected_window()
            intake = self.intake.values()
        reads0, failures0 = self._reads_mark
        self._reads_mark = (st['reads'], st['read_failures'])
        reads_period = st['reads'] - reads0
        failures_period = st['read_failures'] - failures0
        level, message = driver_status(DriverSnapshot(
            [(j.name, j.servo.servo_id) for j in self.robot.joints], rejected_window,
            str(intake['last_rejection']), watchdog_active, self.cfg.watchdog, health,
            torque_commanded, torque_read, reads_period, failures_period,
            st['consecutive_failures'], st['last_error'], connected,
            self.heartbeat.stalled_ns(), st['fatal']), self.error_names)
        hw: dict[str, object] = {}
        if health is not None:
            for j, bits, temp in zip(self.robot.joints, health[0], health[1], strict=True):
                hw[f'hardware_error.{j.name}'] = self.error_names(bits)
                hw[f'temperature_c.{j.name}'] = temp
        now = time.monotonic_ns()
        (t0, c0), self._cycle_mark = self._cycle_mark, (now, st['cycles'])
        cycle_hz = (st['cycles'] - c0) * 1e9 / max(1, now - t0)
        # torque_on: what the servos' Torque Enable registers said at the last health read
        # (or the last confirmed switch); torque_commanded: what the driver wants
        # while the port is gone nothing is known: the servos may have lost power, or still
        # hold (their own Bus Watchdog stopped them where they were, torque on)
        torque_on: object = torque_commanded if connected else 'unknown'
        if torque_read and connected:
            off = [j.name for j, t in zip(self.robot.joints, torque_read, strict=True) if not t]
            torque_on = (not off if len(off) in (0, self.robot.n)
                         else f'partial (off: {", ".join(off)})')
        values: dict[str, object] = {
            'port': self.cfg.port, 'baud': self.baud, 'connected': connected,
            'torque_on': torque_on, 'torque_commanded': torque_commanded,
            'watchdog_active': watchdog_active,
            'cycles': st['cycles'], 'states_published': st['published'],
            'read_failures': st['read_failures'], 'write_failures': st['write_failures'],
            'port_lost': st['port_lost'], 'reconnects': st['reconnects'],
            'last_error': st['last_error'], 'watchdog_trips': watchdog_trips,
            'state_reads_period': reads_period, 'read_failures_period': failures_period,
            'bus_watchdog_ms': self.watchdog_units * 20,
            'bus_watchdog_expired': st['bus_watchdog_expired'],
            **intake, 'commands_rejected_period': rejected_window,
            'reboot_on_error': self.cfg.reboot_on_error, 'gravity_ff': self.cfg.gravity_ff,
            # the adapter's latency timer (-1: the port has none, e.g. a pty) and what the bus
            # can do: min(1000 / timer, the byte-time limit of one sync read + write)
            'usb_latency_timer_ms': (self.latency_timer_ms if self.latency_timer_ms is not None
                                     else -1),
            'cycle_rate_hz': cycle_hz, 'cycle_rate_asked_hz': self.cfg.rate_hz,
            'cycle_rate_limit_hz': self.cycle_limit_hz,
            'bus_heartbeat_age_ms': self.heartbeat.age_ns() / 1e6,
            **(self.rt_state.values() if self.rt_state is not None else {}),
            **(self.rt_others.values() if self.rt_others is not None else {}),
            **{f'comm.{k}': v for k, v in self.bus.comm_errors.items()},
            **{f'publish_{k}': v for k, v in self.publish_stats.summary().items()},
            **hw,
        }
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: {self.family} bus', f'{self.cfg.port}', level,
            message, values)]
        try:
            self.pub_diag.publish(arr)
        except Exception:  # noqa: BLE001 - the context is shutting down
            pass

    def close(self) -> None:
        """Stop the bus thread, disable torque, close the port.

        When torque could not be disabled (the port is gone or the servos do not answer) it
        says so in one ``error:`` line and the node exits 3 (unless it already failed).
        """
        self.running = False
        self.thread.join(timeout=2.0)
        if self.bus.is_open and self._torque_off_best_effort():
            print('[dynamixel_driver] torque disabled', file=sys.stderr, flush=True)
        elif not self.torque_left_on:
            why = ('the bus is not answering' if self.bus.is_open
                   else f'the port is lost ({self.stats["last_error"]})')
            hold = (f'their Bus Watchdog stops them within {self.watchdog_units * 20} '
                    f'ms of the last packet, holding with torque on'
                    if self.watchdog_units else 'they keep their last goal')
            self.torque_left_on = why
            print(f'error: could not disable torque of the servos on {self.cfg.port}: {why}; '
                  f'{hold}: switch off their power', file=sys.stderr, flush=True)
            if not getattr(self, 'exit_code', 0):
                self.exit_code = 3
        self.bus.close()


def main(args: list[str] | None = None) -> int:
    """Run the Dynamixel driver node."""
    fast_thread_switching()
    return run_node(DynamixelDriver, args)


if __name__ == '__main__':
    raise SystemExit(main())
