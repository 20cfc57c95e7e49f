"""Observation terms: what each value of a policy's observation vector is computed from.

:data:`TERMS` maps a term's name (the ``term:`` of a policy spec's observation entry) to its
:class:`TermDef`: its size for ``n`` joints, the inputs it needs (:data:`SOURCES`: each is a
subscription of the policy node) and how it is computed from :class:`ObsInputs`, the one
struct the node's controller and the training environments fill alike. :func:`register_term`
adds a term in one place; the policy spec (:mod:`simreal_ros.policy.spec`) validates a spec's
terms against this table and the codec (:mod:`simreal_ros.policy.codec`) evaluates them.
Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: the observation term that feeds camera frames (not in :data:`TERMS`: not in the vector)
IMAGE_TERM = 'image'
#: The inputs a term may need (``TermDef.needs``) and what feeds each. The node subscribes
#: ``imu/data`` only when a term needs ``imu`` and then also requires it to be fresh; a new
#: source (a new topic) needs code in the node and the controller, see docs/policy.md.
SOURCES: dict[str, str] = {
    'joint_states': 'joint_states (position, velocity): ObsInputs.position/velocity',
    'imu': 'imu/data (orientation, angular velocity): ObsInputs.imu_quat_wxyz/imu_gyro',
    'goal': 'goal (JointState position): ObsInputs.goal',
    'clock': 'the node clock: ObsInputs.time_s (time since the policy took over)',
    'cmd_vel': 'cmd_vel (Twist: linear.x, linear.y, angular.z): ObsInputs.cmd_vel/_age_s',
}
#: ``velocity_command``'s default ``timeout_s``: a command older than this (or none) is zero
CMD_VEL_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class ObsInputs:
    """What observation terms are computed from, in the policy's joint order.

    ``goal`` is the absolute goal joint positions; ``imu_quat_wxyz`` the IMU orientation in the
    world frame; ``time_s`` the controller time since the policy took over (phase clocks);
    ``cmd_vel`` the latest velocity command ``(vx, vy, wz)`` (m/s, m/s, rad/s, base frame)
    and ``cmd_vel_age_s`` how long ago it was received (None for either: none received).
    """

    position: FloatArray
    velocity: FloatArray
    default: FloatArray
    last_action: FloatArray
    goal: FloatArray
    time_s: float = 0.0
    imu_gyro: FloatArray | None = None
    imu_quat_wxyz: FloatArray | None = None
    cmd_vel: FloatArray | None = None
    cmd_vel_age_s: float | None = None


@dataclass(frozen=True)
class TermDef:
    """One observation term: its size, the inputs it needs, how it is computed.

    ``size(n_joints)`` gives the number of values; ``compute(inputs, options)`` returns them;
    ``options`` lists the extra keys the term accepts in the YAML (with their defaults).
    """

    name: str
    size: Callable[[int], int]
    needs: tuple[str, ...]
    compute: Callable[[ObsInputs, dict[str, float]], FloatArray]
    options: dict[str, float] = field(default_factory=dict)
    description: str = ''


def _imu_quat(inputs: ObsInputs) -> FloatArray:
    if inputs.imu_quat_wxyz is None:
        raise ValueError('no imu/data received')
    q = np.asarray(inputs.imu_quat_wxyz, dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if not norm > 0.0:
        raise ValueError('imu orientation quaternion has zero norm')
    return q / norm


def projected_gravity(quat_wxyz: FloatArray) -> FloatArray:
    """Return the unit gravity direction (world -z) expressed in the body frame."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    # R^T @ [0, 0, -1] for R the rotation of the body in the world
    return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x),
                      1.0 - 2.0 * (x * x + y * y)], dtype=np.float64)


def _phase(inputs: ObsInputs, opts: dict[str, float]) -> FloatArray:
    angle = 2.0 * math.pi * inputs.time_s / opts['period_s']
    return np.array([math.sin(angle), math.cos(angle)], dtype=np.float64)


def _base_ang_vel(inputs: ObsInputs, _opts: dict[str, float]) -> FloatArray:
    if inputs.imu_gyro is None:
        raise ValueError('no imu/data received')
    return np.asarray(inputs.imu_gyro, dtype=np.float64)


def _velocity_command(inputs: ObsInputs, opts: dict[str, float]) -> FloatArray:
    # a robot that lost its teleop link stops: no command, or one older than timeout_s, is
    # the zero command (stand), never the last one held
    c, age = inputs.cmd_vel, inputs.cmd_vel_age_s
    if c is None or age is None or not age <= opts['timeout_s']:
        return np.zeros(3)
    v = np.asarray(c, dtype=np.float64).reshape(-1)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f'cmd_vel must be 3 finite numbers (vx, vy, wz), got {v.tolist()}')
    return v


TERMS: dict[str, TermDef] = {}


def register_term(term: TermDef) -> TermDef:
    """Add an observation term to :data:`TERMS`; raise ValueError on a bad definition.

    The name must be new and an identifier; every entry of ``needs`` must be one of
    :data:`SOURCES` (a typo there would silently mean no subscription, so it fails here);
    ``options`` must map identifiers to finite positive defaults.
    """
    if not isinstance(term.name, str) or not term.name.isidentifier():
        raise ValueError(f'observation term name {term.name!r} must be an identifier')
    if term.name in TERMS or term.name == IMAGE_TERM:
        raise ValueError(f'observation term {term.name!r} is already registered')
    if isinstance(term.needs, str) or not isinstance(term.needs, tuple):
        raise ValueError(f'observation term {term.name!r}: needs must be a tuple of sources '
                         f'from {sorted(SOURCES)}, got {term.needs!r}')
    unknown = [n for n in term.needs if n not in SOURCES]
    if unknown:
        raise ValueError(f'observation term {term.name!r} needs unknown sources {unknown}: '
                         f'known sources are {sorted(SOURCES)} (a new topic needs code in the '
                         'node and the controller, see docs/policy.md)')
    for key, default in term.options.items():
        if not (isinstance(key, str) and key.isidentifier()) or isinstance(default, bool) \
                or not isinstance(default, (int, float)) or not math.isfinite(default) \
                or default <= 0:
            raise ValueError(f'observation term {term.name!r}: option {key!r} needs an '
                             f'identifier name and a finite default > 0, got {default!r}')
    if not callable(term.size) or not callable(term.compute):
        raise ValueError(f'observation term {term.name!r}: size and compute must be callables')
    TERMS[term.name] = term
    return term


register_term(TermDef(
    'joint_pos_rel', lambda n: n, ('joint_states',),
    lambda i, _o: i.position - i.default, description='joint position - default pose (rad)'))
register_term(TermDef(
    'joint_vel', lambda n: n, ('joint_states',), lambda i, _o: i.velocity.copy(),
    description='joint velocity (rad/s)'))
register_term(TermDef(
    'last_action', lambda n: n, (), lambda i, _o: i.last_action.copy(),
    description='the previous raw network output after the action clip'))
register_term(TermDef(
    'goal', lambda n: n, ('goal',), lambda i, _o: i.goal - i.default,
    description='goal joint positions - default pose (rad), from the goal topic'))
register_term(TermDef(
    'goal_error', lambda n: n, ('goal', 'joint_states'), lambda i, _o: i.goal - i.position,
    description='goal - measured joint position (rad)'))
register_term(TermDef(
    'base_ang_vel', lambda _n: 3, ('imu',), _base_ang_vel,
    description='IMU angular velocity in the IMU frame (rad/s)'))
register_term(TermDef(
    'projected_gravity', lambda _n: 3, ('imu',),
    lambda i, _o: projected_gravity(_imu_quat(i)),
    description='unit gravity vector in the IMU frame, from the IMU orientation'))
register_term(TermDef(
    'phase', lambda _n: 2, ('clock',), _phase, {'period_s': 1.0},
    description='[sin, cos] of 2*pi*t/period_s, t = time since the policy took over'))
register_term(TermDef(
    'velocity_command', lambda _n: 3, ('cmd_vel',), _velocity_command,
    {'timeout_s': CMD_VEL_TIMEOUT_S},
    description='cmd_vel (vx, vy m/s, wz rad/s); zeros if none or older than timeout_s'))
