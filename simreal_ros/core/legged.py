"""What a floating-base (legged) robot measures and is told, without ROS or an engine.

* :class:`ImuNoise` turns an engine's perfect IMU reading into what a real IMU gives, from the
  robot spec's :class:`~simreal_ros.core.robot.ImuSpec`: ``gyro = w + b_g + n_g`` and
  ``acc = f + b_a + n_a``, where ``w`` is the angular velocity and ``f`` the specific force
  (acceleration minus gravity: at rest it reads +9.81 m/s^2 along the frame's up axis), both in
  the IMU frame, ``b`` the constant biases and ``n`` white noise, independent per sample and
  axis, of the spec's standard deviations; the orientation is turned by a small rotation whose
  rotation vector is white noise of ``orientation_noise_std_rad`` per axis. A generator seeded
  once makes runs repeatable. :meth:`ImuNoise.covariances` are the diagonals
  sensor_msgs/Imu carries (the variances; all zero, "unknown", for a perfect IMU).
* :class:`VelocityCommand` is the latest body-velocity command (``cmd_vel``, geometry_msgs/Twist:
  linear m/s and angular rad/s in the base frame), kept for the policies that will follow it;
  :func:`velocity_command` checks one (finite, or ValueError).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import ImuSpec

FloatArray = npt.NDArray[np.float64]


def quat_mul(a: FloatArray, b: FloatArray) -> FloatArray:
    """Hamilton product of two quaternions ``(w, x, y, z)``."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw])


def quat_from_rotvec(v: FloatArray) -> FloatArray:
    """Return the unit quaternion ``(w, x, y, z)`` of the rotation vector ``v`` (axis*angle)."""
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    s = math.sin(angle / 2.0) / angle
    return np.array([math.cos(angle / 2.0), v[0] * s, v[1] * s, v[2] * s])


def tilt_rad(orientation_wxyz: FloatArray) -> FloatArray:
    """Angle (rad) between the z axis of each unit quaternion (rows, or one) and the vertical.

    ``acos(R[2, 2])``: the robot's fall test in training and evaluation, the fall detector of
    the policy node (on the IMU's orientation) and the legged gap metrics share it.
    """
    _w, x, y, _z = np.asarray(orientation_wxyz, dtype=np.float64).T
    zz = 1.0 - 2.0 * (x * x + y * y)  # R[2, 2]
    out: FloatArray = np.arccos(np.clip(zz, -1.0, 1.0))
    return out


class ImuNoise:
    """Noise and bias of one IMU (see the module docstring); a perfect IMU returns its input."""

    def __init__(self, spec: ImuSpec, seed: int = 0) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(seed)
        self.gyro_bias = np.asarray(spec.gyro_bias_rad_s, dtype=np.float64)
        self.accel_bias = np.asarray(spec.accel_bias_m_s2, dtype=np.float64)
        self.perfect = (spec.gyro_noise_std_rad_s == 0 and spec.accel_noise_std_m_s2 == 0
                        and spec.orientation_noise_std_rad == 0
                        and not self.gyro_bias.any() and not self.accel_bias.any())

    def apply(self, quat_wxyz: FloatArray, gyro: FloatArray, acc: FloatArray
              ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return (orientation, angular velocity, specific force) as the real IMU reads them."""
        if self.perfect:
            return quat_wxyz, gyro, acc
        s, rng = self.spec, self.rng
        g = gyro + self.gyro_bias + rng.normal(0.0, s.gyro_noise_std_rad_s, 3)
        a = acc + self.accel_bias + rng.normal(0.0, s.accel_noise_std_m_s2, 3)
        q = quat_wxyz
        if s.orientation_noise_std_rad > 0:
            q = quat_mul(quat_wxyz, quat_from_rotvec(rng.normal(0.0,
                                                                s.orientation_noise_std_rad, 3)))
        return q, g, a

    def covariances(self) -> tuple[list[float], list[float], list[float]]:
        """Row-major 3x3 covariances (orientation, angular velocity, linear acceleration)."""
        s = self.spec

        def diag(std: float) -> list[float]:
            v = std * std
            return [v, 0.0, 0.0, 0.0, v, 0.0, 0.0, 0.0, v]
        return (diag(s.orientation_noise_std_rad), diag(s.gyro_noise_std_rad_s),
                diag(s.accel_noise_std_m_s2))


@dataclass(frozen=True)
class VelocityCommand:
    """A body-velocity command in the base frame, received at ``stamp_ns``."""

    linear_m_s: tuple[float, float, float]
    angular_rad_s: tuple[float, float, float]
    stamp_ns: int

    @classmethod
    def zero(cls) -> VelocityCommand:
        """Stand still (what a robot does before its first command)."""
        return cls((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 0)


def velocity_command(linear: Sequence[float], angular: Sequence[float],
                     stamp_ns: int) -> VelocityCommand:
    """Check a command's six numbers; ValueError naming a non-finite one."""
    lin = tuple(float(v) for v in linear)
    ang = tuple(float(v) for v in angular)
    if len(lin) != 3 or len(ang) != 3:
        raise ValueError(f'cmd_vel needs 3 linear and 3 angular values, got {lin}, {ang}')
    if not all(math.isfinite(v) for v in lin + ang):
        raise ValueError(f'cmd_vel contains NaN or inf: linear {lin}, angular {ang}')
    return VelocityCommand((lin[0], lin[1], lin[2]), (ang[0], ang[1], ang[2]), stamp_ns)
