"""``simreal_leader``: a leader arm on its own servo bus drives the robot over ``joint_commands``.

Reads the leader's servos (torque off: the operator's hand moves them) on ``port`` at
``rate_hz`` with one group sync read per cycle, over the bus of the leader spec's servo family
(:func:`~simreal_ros.hardware.family.bus_class`, as the driver: a Dynamixel leader, or an STS
one such as LeRobot's SO-101 leader, which is only read: it has no current mode for
``compensation``), publishes what it read as
``leader/joint_states`` (stamped when the read completed), maps it onto the follower's joints
(:class:`simreal_ros.teleop.control.LeaderMapping`: calibration offsets, signs, scales, limit
clamping) and publishes ``joint_commands`` (stamped with the same time) whenever
:class:`simreal_ros.teleop.control.TeleopControl` allows: after the safe-start check against the
follower's ``joint_states``, while the deadman is pressed and the leader is read. Because the
commands go through the contract, teleop is the same on ``backend:=sim``, ``real`` and
``twin``.

Services: ``~/deadman`` (std_srvs/SetBool: true = pressed, streaming allowed; false = stop
streaming at once). With ``button_id`` the leader's button register is read right after the
sync read of every cycle, a second deadman: streaming needs both pressed, and a cycle that reads
the button released sends nothing (the log names the reading's stamp). A trigger
(``gripper_joint``) drives one follower joint linearly
(:class:`~simreal_ros.teleop.control.GripperMap`). With ``compensation`` the leader's servos run in
current mode and every cycle, after the reads, get the light gravity/friction current of
:func:`~simreal_ros.teleop.control.compensation_current` at the pose just read (the holding torque
from the leader's MuJoCo model, ``qfrc_bias``: 12 us a call); torque goes off again when the
node stops. A leader port that vanishes (unplugged) stops
streaming (the follower's driver holds its goal) and is reopened every ``reconnect_period_s``;
after it returns the start check runs again. ``/diagnostics``: state, distance to the follower,
button, reads, read failures, leader losses, clamps; published at once on every state change.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool

from simreal_ros.core.commands import map_names
from simreal_ros.core.robot import load_robot
from simreal_ros.core.timing import PreciseRate
from simreal_ros.errors import BusError, PortLostError
from simreal_ros.hardware.family import ServoBus, bus_class, require_current_control
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import fast_thread_switching, run_node
from simreal_ros.teleop.control import (
    LeaderConfig,
    TeleopControl,
    button_pressed,
    compensation_current,
    leader_mapping,
)


class LeaderNode(Node):
    """Leader arm -> ``leader/joint_states`` and ``joint_commands``."""

    def __init__(self) -> None:
        super().__init__('leader')
        self.cfg = cfg = LeaderConfig.from_mapping(declare_dataclass(self, LeaderConfig),
                                                   f'{self.get_fully_qualified_name()} params')
        self.robot = load_robot(cfg.robot)
        self.leader_robot = load_robot(cfg.leader_robot) if cfg.leader_robot else self.robot
        if self.leader_robot.n != self.robot.n:
            raise BusError(f'leader robot {self.leader_robot.name} has {self.leader_robot.n} '
                           f'joints, the follower {self.robot.name} {self.robot.n}: a leader '
                           f'arm maps joint by joint')
        self.mapping = leader_mapping(cfg, self.robot, self.leader_robot)
        self.control = TeleopControl(
            self.mapping, start_mode=cfg.start_mode, start_tolerance_rad=cfg.start_tolerance_rad,
            blend_speed_rad_s=cfg.blend_speed_rad_s, leader_timeout_s=cfg.leader_timeout_s,
            deadman=cfg.deadman_on_start,
            # a configured button counts as released until it is read pressed
            button=False if cfg.button_id else None)
        self.lock = threading.Lock()  # guards control and stats (bus thread vs callbacks)
        self.baud = cfg.baud or self.leader_robot.bus_baud
        self.bus: ServoBus = bus_class(self.leader_robot)(
            self.leader_robot, cfg.port, self.baud, latency_timer_ms=cfg.latency_timer_ms)
        self.leader_robot = self.bus.robot  # torque_per_amp etc. filled from the servo models
        if cfg.compensation:  # before the port opens: an XL430 leader has no current control
            require_current_control(self.leader_robot, 'compensation:=true')
        self.bus.open()
        self.bus.check_servos(2.0)
        self.bus.set_torque(False)  # the operator moves the leader; its servos only measure
        self.gravity: Any = None
        if cfg.compensation:  # ... and, with compensation, push lightly in current mode
            from simreal_ros.sim.engines import make_sim
            self.gravity = make_sim(self.leader_robot)
            self.kt = np.array([j.servo.torque_per_amp for j in self.leader_robot.joints])
            self.bus.set_current_mode()
        self.stats: dict[str, Any] = {'reads': 0, 'read_failures': 0, 'commands': 0,
                                      'reconnects': 0, 'last_error': '', 'max_current_a': 0.0}
        self.connected = True
        self.pub_leader = self.create_publisher(JointState, 'leader/joint_states', qos.STATE)
        self.pub_cmd = self.create_publisher(JointState, 'joint_commands', qos.COMMAND)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.create_subscription(JointState, 'joint_states', self._on_follower, qos.STATE)
        self.create_service(SetBool, '~/deadman', self._on_deadman)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self._leader_msg = messages.joint_state(self.leader_robot.joint_names, 0,
                                                [0.0] * self.robot.n)
        self._cmd_msg = messages.joint_state(self.robot.joint_names, 0, [0.0] * self.robot.n)
        self.running = True
        self.thread = threading.Thread(target=self._run, name='leader', daemon=True)
        self.thread.start()
        self.get_logger().info(
            f'leader {self.leader_robot.name} on {cfg.port} at {self.baud} baud -> '
            f'{self.robot.name}, {cfg.rate_hz:g} Hz, start {cfg.start_mode} within '
            f'{cfg.start_tolerance_rad:g} rad, calibration '
            f'{cfg.calibration or "none (1:1)"}, deadman '
            f'{"pressed" if cfg.deadman_on_start else "released"}'
            + (f', button at servo {cfg.button_id} address {cfg.button_address}'
               if cfg.button_id else '')
            + (f', gripper {cfg.gripper_joint} from the trigger' if cfg.gripper_joint else ''))

    # ---- callbacks -----------------------------------------------------------------------------
    def _on_follower(self, msg: JointState) -> None:
        try:
            q = map_names(list(msg.name), msg.position, self.robot.joint_names,
                          'joint_states')
        except ValueError:
            return
        with self.lock:
            self.control.follower_state(q)

    def _on_deadman(self, req: SetBool.Request, res: SetBool.Response) -> SetBool.Response:
        with self.lock:
            res.message = self.control.set_deadman(bool(req.data))
        res.success = True
        self.get_logger().info(res.message)
        self._publish_diagnostics()
        return res

    # ---- the leader thread -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - fatal unless shutting down
            if not self.running or not self.context.ok():
                return  # Ctrl-C/SIGTERM invalidated the context under a publish
            self.get_logger().fatal(f'leader thread failed: {exc!r}; no more commands')
            self.exit_code = 2
            self.finished = True

    def _loop(self) -> None:
        rate = PreciseRate(int(1e9 / self.cfg.rate_hz), 100_000)
        next_reconnect = 0.0
        while self.running and self.context.ok():
            rate.sleep()
            now = time.monotonic_ns()
            if not self.connected and time.monotonic() >= next_reconnect:
                next_reconnect = time.monotonic() + self.cfg.reconnect_period_s
                self._reconnect()
            fresh = self._read(now) if self.connected else False
            with self.lock:
                before = self.control.state
                decision = self.control.step(time.monotonic_ns())
            # a command only for a fresh reading: after a failed read it would repeat the last
            # one under the same stamp (a duplicate stamp, measured in an episode check), and
            # the driver holds the last target anyway
            if decision.command is not None and fresh:
                stamp = self._leader_msg.header.stamp
                msg = self._cmd_msg
                msg.header.stamp = stamp
                msg.position = decision.command.tolist()
                self.pub_cmd.publish(msg)
                self.stats['commands'] += 1
            for event in decision.events:
                self.get_logger().info(event)
            if decision.state != before:
                self._publish_diagnostics()

    def _read(self, now_ns: int) -> bool:
        """Read the leader, publish it and feed the control; return whether it was read."""
        cfg = self.cfg
        try:
            state = self.bus.read_state()
            # right after the joints, every cycle: one more request/answer, 5.15 -> 6.23 ms
            # (median of 3 x 300) for the cycle's reads on the virtual bus, inside the 10 ms
            # of 100 Hz; a release must stop the very cycle that reads it, which a slower
            # button rate could not give (docs/teleop.md)
            button = button_pressed(self.bus.read_address(
                cfg.button_id, cfg.button_address, cfg.button_size), cfg) \
                if cfg.button_id else None
            if self.gravity is not None:
                current = compensation_current(self.gravity.probe(state.position).gravity,
                                               state.velocity, self.kt, cfg)
                self.bus.write_current(current)
                self.stats['max_current_a'] = float(np.max(np.abs(current)))
        except PortLostError as exc:
            self.bus.close()
            self.connected = False
            self.stats['last_error'] = str(exc)
            self.get_logger().error(f'leader port lost: {exc}; follower holds, reconnecting')
            return False
        except BusError as exc:
            self.stats['read_failures'] += 1
            self.stats['last_error'] = str(exc)
            return False
        stamp = self.get_clock().now().nanoseconds
        msg = self._leader_msg
        msg.header.stamp = messages.stamp_from_ns(stamp)
        msg.position = state.position.tolist()
        msg.velocity = state.velocity.tolist()
        msg.effort = state.effort.tolist()
        self.pub_leader.publish(msg)
        self.stats['reads'] += 1
        event = None
        with self.lock:
            self.control.leader_read(state.position, now_ns)
            if button is not None:
                event = self.control.set_button(button)
        if event is not None:
            self.get_logger().info(f'{event} (leader reading stamped {stamp} ns)')
            self._publish_diagnostics()
        return True

    def _reconnect(self) -> None:
        try:
            self.bus.open()
            self.bus.check_servos(0.2)
            self.bus.set_torque(False)
            if self.gravity is not None:
                self.bus.set_current_mode()
        except BusError as exc:
            self.bus.close()
            self.stats['last_error'] = str(exc)
            return
        self.connected = True
        self.stats['reconnects'] += 1
        self.get_logger().info(f'leader reconnected on {self.cfg.port}')

    # ---- diagnostics ---------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self.lock:
            ctl = self.control
            state, distance, deadman = ctl.state, ctl.distance_rad, ctl.deadman
            button = {None: 'none', True: 'pressed', False: 'released'}[ctl.button]
            engagements, losses = ctl.engagements, ctl.leader_losses
            clamped = self.mapping.clamped
        st = dict(self.stats)
        level, message = 'ok', state
        if state == 'far':
            level, message = 'warn', (f'far: follower {distance:.3f} rad from the leader '
                                      f'(start_tolerance_rad {self.cfg.start_tolerance_rad:g})')
        elif state == 'leader_lost':
            level, message = 'error', f'leader_lost: {st["last_error"] or "no reading"}'
        elif state == 'waiting' and not deadman:
            message = 'waiting: deadman released'
        elif state == 'waiting' and button == 'released':
            message = 'waiting: deadman button released'
        values: dict[str, object] = {
            'state': state, 'port': self.cfg.port, 'connected': self.connected,
            'deadman': deadman, 'button': button, 'distance_rad': distance,
            'engagements': engagements,
            'leader_losses': losses, 'commands_clamped': clamped, **st}
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: teleop leader', self.cfg.port, level, message,
            values)]
        try:
            self.pub_diag.publish(arr)
        except Exception:  # noqa: BLE001 - the context is shutting down
            pass

    def close(self) -> None:
        """Stop the leader thread, switch a compensating leader's torque off, close the port."""
        self.running = False
        self.thread.join(timeout=2.0)
        if self.gravity is not None and self.connected:
            try:
                self.bus.set_torque(False)
            except BusError as exc:  # PortLostError too: unplugged, nothing to switch off
                self.get_logger().warning(f'leader torque off at stop failed: {exc}')
        self.bus.close()


def main(args: list[str] | None = None) -> int:
    """Run the teleop leader node."""
    fast_thread_switching()
    return run_node(LeaderNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
