"""``simreal_excite``: a seeded excitation source on ``joint_commands`` (sysid data, demos).

Publishes position targets (with the analytic velocity as feed-forward) that respect every
joint's position and velocity limits, for ``duration_s``, then commands home and exits 0.
With ``sync_to_states`` it answers each ``joint_states`` message instead of running a timer,
which is how a controller drives a lockstep simulation; with ``wait_for_states`` (set by the
planner) the timer starts only once the backend published its first ``joint_states``, and with
``wait_for_subscribers`` once that many subscribers (backend or injector, recorder) listen on
``joint_commands`` (both give up after ``wait_timeout_s`` with a warning).
"""

from __future__ import annotations

from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import JointState

from simreal_ros.core.excitation import PATTERNS, Excitation, ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.ros import messages, qos
from simreal_ros.ros.runtime import run_node

PARAMETERS = {
    'robot': 'simreal_arm', 'pattern': 'chirp', 'duration_s': 10.0, 'amplitude': 0.3,
    'rate_hz': 100.0, 'seed': 0, 'f_min_hz': 0.1, 'f_max_hz': 2.0, 'step_hold_s': 1.0,
    'ramp_s': 1.0, 'sync_to_states': False, 'wait_for_states': False,
    'wait_for_subscribers': 0, 'wait_timeout_s': 15.0,
}


class Excite(Node):
    """Publish an excitation trajectory on ``joint_commands``."""

    def __init__(self) -> None:
        super().__init__('excite')
        p = {k: self.declare_parameter(k, v).value for k, v in PARAMETERS.items()}
        if p['pattern'] not in PATTERNS:
            raise ConfigError('excite', 'pattern', f'one of {PATTERNS}', p['pattern'])
        if not p['rate_hz'] > 0:
            raise ConfigError('excite', 'rate_hz', 'a rate > 0', p['rate_hz'])
        self.robot = load_robot(p['robot'])
        self.excitation = Excitation(self.robot, ExcitationConfig(
            pattern=p['pattern'], duration_s=float(p['duration_s']),
            amplitude=float(p['amplitude']), f_min_hz=float(p['f_min_hz']),
            f_max_hz=float(p['f_max_hz']), step_hold_s=float(p['step_hold_s']),
            ramp_s=float(p['ramp_s']), seed=int(p['seed'])))
        self.names = self.robot.joint_names
        self.start_ns: int | None = None
        self.finished = False
        self.sent = 0
        self.pub = self.create_publisher(JointState, 'joint_commands', qos.COMMAND)
        self.waiting = bool(p['wait_for_states']) and not p['sync_to_states']
        # every planned consumer of joint_commands (backend or injector, recorder) connected
        self.wait_subscribers = int(p['wait_for_subscribers'])
        self.wait_deadline_ns = self.get_clock().now().nanoseconds + int(
            float(p['wait_timeout_s']) * 1e9)
        if p['sync_to_states']:
            self.create_subscription(JointState, 'joint_states', self._on_state, qos.STATE)
        else:
            if self.waiting:  # start when the robot is there, not while it is still booting
                self._wait_sub = self.create_subscription(JointState, 'joint_states',
                                                          self._on_first_state, qos.STATE)
                self.get_logger().info('waiting for joint_states before starting')
            self.create_timer(1.0 / float(p['rate_hz']), self._on_timer)
        self.get_logger().info(f'{p["pattern"]} on {self.robot.name} for {p["duration_s"]} s'
                               + (' (one command per joint_states)' if p['sync_to_states']
                                  else f' at {p["rate_hz"]} Hz'))

    def _send(self, now_ns: int) -> None:
        if now_ns <= 0:  # sim time not started yet (no /clock received)
            return
        if self.start_ns is None:
            self.start_ns = now_ns
        t = (now_ns - self.start_ns) / 1e9
        q, qd = self.excitation.sample(t)
        self.pub.publish(messages.joint_state(self.names, now_ns, q, qd))
        self.sent += 1
        if t >= self.excitation.duration_s and not self.finished:
            self.get_logger().info(f'done: {self.sent} commands over {t:.2f} s, back at home')
            self.finished = True

    def _on_first_state(self, _msg: JointState) -> None:
        if self.waiting:
            self.waiting = False
            self.destroy_subscription(self._wait_sub)

    def _ready(self) -> bool:
        if self.start_ns is not None:
            return True
        connected = self.pub.get_subscription_count() >= self.wait_subscribers
        if not self.waiting and connected:
            return True
        if self.get_clock().now().nanoseconds > self.wait_deadline_ns:
            self.get_logger().warning(
                f'starting without {"joint_states" if self.waiting else "every consumer"}: '
                f'{self.pub.get_subscription_count()} of {self.wait_subscribers} joint_commands '
                f'subscribers after the wait timeout')
            self.waiting, self.wait_subscribers = False, 0
            return True
        return False

    def _on_timer(self) -> None:
        if self._ready():
            self._send(self.get_clock().now().nanoseconds)

    def _on_state(self, msg: JointState) -> None:
        self._send(messages.stamp_to_ns(msg.header.stamp))

    def close(self) -> None:
        """Before the process ends: let every subscriber acknowledge the last (home) command."""
        # returns as soon as every reliable subscriber has it; 1 s ran out once in CI with a
        # core kept busy, and the home command never reached the test's subscriber
        if self.sent and not self.pub.wait_for_all_acked(Duration(seconds=5.0)):
            self.get_logger().warning('not every subscriber acknowledged the last command')


def main(args: list[str] | None = None) -> int:
    """Run the excitation node."""
    return run_node(Excite, args)


if __name__ == '__main__':
    raise SystemExit(main())
