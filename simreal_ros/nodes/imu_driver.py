"""``simreal_imu_driver``: a serial IMU (WitMotion WT901 protocol) as ``imu/data``.

Publishes ``imu/data`` (sensor_msgs/Imu) with the sim bridge's conventions, so a policy reads
the same message on both backends: ``header.frame_id`` the robot spec's ``base.imu.frame_id``,
``orientation`` the sensor's attitude in the level start frame, ``angular_velocity`` in the
sensor axes (rad/s), ``linear_acceleration`` the specific force in the sensor axes (m/s^2;
+9.8 on z lying level), covariances the spec's noise figures (as the sim's). One message per
device sample, stamped with the ``time.time_ns()`` at which its last byte was read. Reading,
parsing and reopening are ROS-free (:mod:`simreal_ros.hardware.imu.reader`,
:mod:`simreal_ros.hardware.imu.witmotion`); this node runs them on a thread and publishes.

``/diagnostics`` (every ``diagnostics_period_s``): the measured sample rate, the parser's
counts (bad checksums, garbage bytes, incomplete samples) and reconnects; WARN under 80 % of
``expected_rate_hz``, ERROR while the port is gone. A vanished port is reopened every
``reconnect_s``; after ``give_up_after_s`` without a sample the node stops with exit 2.
"""

from __future__ import annotations

import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import Imu

from simreal_ros.core.legged import ImuNoise
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PortLostError
from simreal_ros.hardware.imu.reader import ImuDriverConfig, SerialImu
from simreal_ros.hardware.imu.witmotion import Sample
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node


class ImuDriver(Node):
    """A serial IMU exposed as ``imu/data``."""

    def __init__(self) -> None:
        super().__init__('imu_driver')
        src = f'{self.get_fully_qualified_name()} params'
        self.cfg = ImuDriverConfig.from_mapping(declare_dataclass(self, ImuDriverConfig), src)
        robot = load_robot(self.cfg.robot)
        if robot.imu is None:
            raise ConfigError(src, 'robot', 'a robot spec with an imu (base.imu)',
                              self.cfg.robot)
        self.pub = self.create_publisher(Imu, 'imu/data', qos.STATE)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.msg = Imu()
        self.msg.header.frame_id = robot.imu.frame_id
        (self.msg.orientation_covariance, self.msg.angular_velocity_covariance,
         self.msg.linear_acceleration_covariance) = ImuNoise(robot.imu).covariances()
        self.imu = SerialImu(self.cfg.port, self.cfg.baud)
        self.state = 'connecting'
        self.samples = 0
        self.reconnects = 0
        self.last_sample = time.monotonic()
        self._diag_samples = 0
        self._diag_t = time.monotonic()
        self.exit_code = 0
        self.finished = False
        self.running = True
        self.create_timer(self.cfg.diagnostics_period_s, self._publish_diagnostics)
        self.thread = threading.Thread(target=self._read_thread, name='imu', daemon=True)
        self.thread.start()
        self.get_logger().info(f'IMU ({self.cfg.protocol}) on {self.cfg.port} at '
                               f'{self.cfg.baud} baud, frame {robot.imu.frame_id}')

    def _read_thread(self) -> None:
        try:
            self._read_loop()
        except Exception:  # noqa: BLE001 - a publish after shutdown, or a bug
            if not self.running or not self.context.ok():
                return
            raise

    def _read_loop(self) -> None:
        cfg = self.cfg
        while self.running:
            if self.imu.fd is None:
                try:
                    self.imu.open()
                    self.state = 'ok'
                except PortLostError as exc:
                    self.state = f'port unavailable: {exc}'
                    if self._gave_up():
                        return
                    time.sleep(cfg.reconnect_s)
                    continue
            try:
                got = self.imu.read(0.1)
            except PortLostError as exc:
                self.imu.close()
                self.reconnects += 1
                self.state = f'port lost: {exc}'
                self.get_logger().error(f'IMU port lost ({exc}); reopening')
                continue
            for stamp_ns, s in got:
                self._publish(stamp_ns, s)
            if not got and self._gave_up():
                return

    def _gave_up(self) -> bool:
        limit = self.cfg.give_up_after_s
        if limit and time.monotonic() - self.last_sample > limit:
            self.get_logger().fatal(f'no IMU sample for {limit:g} s on {self.cfg.port}: '
                                    f'giving up')
            self.exit_code = 2
            self.finished = True
            return True
        return False

    def _publish(self, stamp_ns: int, s: Sample) -> None:
        m = self.msg
        m.header.stamp = messages.stamp_from_ns(stamp_ns)
        w, x, y, z = s.quat_wxyz
        o = m.orientation
        o.w, o.x, o.y, o.z = w, x, y, z
        g = m.angular_velocity
        g.x, g.y, g.z = s.gyro_rad_s
        a = m.linear_acceleration
        a.x, a.y, a.z = s.acc_m_s2
        self.pub.publish(m)
        self.samples += 1
        self.last_sample = time.monotonic()

    def _publish_diagnostics(self) -> None:
        now = time.monotonic()
        rate = (self.samples - self._diag_samples) / max(1e-9, now - self._diag_t)
        self._diag_samples, self._diag_t = self.samples, now
        if self.state != 'ok':
            level, text = 'error', self.state
        elif rate < 0.8 * self.cfg.expected_rate_hz:
            level, text = 'warn', (f'{rate:.1f} Hz, expected {self.cfg.expected_rate_hz:g} Hz')
        else:
            level, text = 'ok', f'{rate:.1f} Hz'
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_name()}: imu', self.cfg.port, level, text,
            {'rate_hz': rate, 'samples': self.samples, 'reconnects': self.reconnects,
             **self.imu.parser.stats})]
        self.pub_diag.publish(arr)

    def close(self) -> None:
        """Stop the reader thread and close the port."""
        self.running = False
        self.thread.join(timeout=1.0)
        self.imu.close()


def main(args: list[str] | None = None) -> int:
    """Run the IMU driver node."""
    return run_node(ImuDriver, args)


if __name__ == '__main__':
    raise SystemExit(main())
