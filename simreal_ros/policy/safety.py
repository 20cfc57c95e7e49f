"""Fall detection and the damping hand-over of a legged policy (numpy only, no ROS, no torch).

A policy spec's optional ``fall:`` section (keys with units)::

    fall:
      enabled: true        # default: true for a floating-base robot, false for a fixed base
      tilt_rad: 1.0        # fallen when the base tilts beyond this (1.0 rad = 57 deg) ...
      after_s: 0.2         # ... continuously for this long, by the IMU's own stamps

The detector (:class:`FallDetector`) reads only what a real robot measures: the IMU
orientation on ``imu/data``. Its tilt is the angle between the IMU's z axis and the vertical,
``acos(-g_z)`` for ``g`` the projected gravity (the ``projected_gravity`` observation term),
so the same number on MuJoCo, PyBullet, the virtual legged robot and hardware. A tilt beyond
``tilt_rad`` starts a timer at that sample's stamp; a sample back within ``tilt_rad`` stops it;
the robot has fallen once a tilted sample is ``after_s`` or more after the timer started. The
``after_s`` filter keeps a hard push or a stumble (the gap metrics' trot sees up to 0.3 rad)
from ending the run; 0.2 s at 1.0 rad means a body already past 57 deg and still going, which
no gait of ``simreal_quad`` recovers from.

On a fall, :class:`simreal_ros.policy.control.PolicyController` stops the network and goes to
``damping`` until re-enabled. **Damping on position servos.** An STS3215 or a Dynamixel X in
position mode takes a goal position, not a torque; neither this stack's drivers nor the
Feetech protocol offer "zero stiffness, some damping" (the STS3215's P gain is an EEPROM
register, written at set-up, not per period). What every position servo does offer: the goal
follows the measured position. The servo then pushes with ``kp * (q_goal - q)`` where
``q_goal`` is the position measured one command latency ``delay`` ago, i.e. about
``-kp * delay * qdot``: a viscous damper of ``kp * delay`` with no stiffness and no stored
error, so the joints give way under the robot's weight slowly instead of driving the legs
against the ground (the network's last targets) or dropping the body (torque off). The
controller therefore commands, every period, the last measured joint positions (clamped into
the limits). Re-enabling (``~/enable`` true, ``simreal policy enable``) ramps from the measured
pose to the default one as at start, and is refused while the base is still tilted beyond
``tilt_rad`` (set the robot on its feet first).
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
import numpy.typing as npt

from simreal_ros.core.legged import tilt_rad
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import Section
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

#: defaults of the ``fall:`` keys (see the module docstring for the reasons)
DEFAULT_TILT_RAD = 1.0
DEFAULT_AFTER_S = 0.2


@dataclass(frozen=True)
class FallSpec:
    """A validated ``fall:`` section: tilted beyond ``tilt_rad`` for ``after_s`` is a fall."""

    tilt_rad: float = DEFAULT_TILT_RAD
    after_s: float = DEFAULT_AFTER_S

    @property
    def after_ns(self) -> int:
        """``after_s`` in integer nanoseconds."""
        return int(round(self.after_s * 1e9))


def parse_fall(top: Section, robot: RobotSpec) -> FallSpec | None:
    """Read the optional ``fall:`` section of a policy spec (None: no fall detection).

    Enabled by default for a floating-base robot; enabling it needs an IMU in the robot spec.
    """
    sec = top.section('fall', {})
    enabled = sec.boolean('enabled', robot.floating)
    tilt = sec.number('tilt_rad', DEFAULT_TILT_RAD, positive=True, maximum=math.pi)
    after = sec.number('after_s', DEFAULT_AFTER_S, minimum=0.0, maximum=10.0)
    sec.reject_unknown()
    if not enabled:
        return None
    if robot.imu is None:
        raise ConfigError(sec.source, sec.path('enabled'), f'false: fall detection reads '
                          f'imu/data and {robot.name} has no imu in its robot spec', enabled)
    return FallSpec(tilt, after)


def tilt_from_quat(quat_wxyz: FloatArray) -> float:
    """Angle (rad) between the z axis of the orientation ``quat_wxyz`` and the vertical."""
    q = np.asarray(quat_wxyz, dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if not norm > 0.0:
        raise ValueError('imu orientation quaternion has zero norm')
    # -g_z of the projected gravity = R[2, 2]
    return float(tilt_rad(q / norm))


class FallDetector:
    """Tilt beyond ``spec.tilt_rad`` for ``spec.after_s`` (IMU stamps) is a fall."""

    def __init__(self, spec: FallSpec) -> None:
        self.spec = spec
        self.tilt_rad: float | None = None
        self.tilted_since_ns: int | None = None
        self.last_stamp_ns: int | None = None

    def reset(self) -> None:
        """Forget the timer (the last tilt is kept: it is still what the IMU said)."""
        self.tilted_since_ns = None

    def update(self, quat_wxyz: FloatArray, stamp_ns: int) -> None:
        """Feed one IMU orientation measured at ``stamp_ns``."""
        tilt = tilt_from_quat(quat_wxyz)
        self.tilt_rad, self.last_stamp_ns = tilt, int(stamp_ns)
        if tilt <= self.spec.tilt_rad:
            self.tilted_since_ns = None
        elif self.tilted_since_ns is None:
            self.tilted_since_ns = int(stamp_ns)

    @property
    def tilted(self) -> bool:
        """Whether the last sample is beyond ``tilt_rad``."""
        return self.tilt_rad is not None and self.tilt_rad > self.spec.tilt_rad

    @property
    def fallen(self) -> bool:
        """Whether the base has been tilted beyond ``tilt_rad`` for ``after_s``."""
        return (self.tilted_since_ns is not None and self.last_stamp_ns is not None
                and self.last_stamp_ns - self.tilted_since_ns >= self.spec.after_ns)

    def reason(self) -> str:
        """Return the fall, in words."""
        held = ((self.last_stamp_ns or 0) - (self.tilted_since_ns or 0)) / 1e9
        return (f'base tilt {self.tilt_rad or 0.0:.2f} rad > {self.spec.tilt_rad:g} rad for '
                f'{held:.2f} s (imu/data)')
