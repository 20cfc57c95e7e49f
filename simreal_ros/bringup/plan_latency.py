"""The latency injector's part of the plan (``latency:=``).

The backend's topics move under ``backend/`` and the injector relays them onto the
contract's names.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from simreal_ros.bringup.arguments import typed, uses_sim_time
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PlanError
from simreal_ros.latency.injection import Profile, load_profile
from simreal_ros.latency.injector_config import InjectorConfig


def latency_profile(a: Mapping[str, str]) -> Profile | None:
    """Return the ``latency:=`` profile (None without one), checked against the plan."""
    if not a['latency']:
        return None
    try:
        profile = load_profile(a['latency'])
    except ConfigError as exc:
        raise PlanError(f'latency:={a["latency"]}: {exc}') from None
    for route in ('command', 'observation'):
        if route not in {r.name for r in profile.routes}:
            raise PlanError(f'latency:={a["latency"]}: the profile needs routes named command '
                            f'and observation (it has {[r.name for r in profile.routes]})')
    if a['timing'] == 'lockstep' and typed(a, 'lockstep_timeout', float, 'seconds') <= 0:
        raise PlanError('latency:= with timing:=lockstep needs lockstep_timeout:=<s> > 0: the '
                        'injector holds messages until sim time reaches their delivery time, '
                        'and a lockstep sim advances only on a command or after that timeout '
                        '(or use timing:=realtime sim_time:=true)')
    return profile


def camera_topics(cameras: Sequence[str]) -> list[str]:
    """Return the topics of ``cameras`` that the ``camera`` route delays (image, info)."""
    return [f'{c}/{kind}' for c in cameras for kind in ('image_raw', 'camera_info')]


def delays_cameras(profile: Profile | None) -> bool:
    """Whether the profile has a ``camera`` route (without one, camera topics go direct)."""
    return profile is not None and 'camera' in {r.name for r in profile.routes}


def backend_remaps(profile: Profile | None, with_imu: bool, cameras: Sequence[str] = ()
                   ) -> tuple[tuple[str, str], ...]:
    """With latency on, the backend's own topics move under ``backend/``.

    ``cameras`` (names) move too; pass them only when :func:`delays_cameras`.
    """
    if profile is None:
        return ()
    out = [('joint_states', 'backend/joint_states'),
           ('joint_commands', 'backend/joint_commands')]
    if with_imu:
        out.append(('imu/data', 'backend/imu/data'))
    out += [(t, f'backend/{t}') for t in camera_topics(cameras)]
    return tuple(out)


def injector(a: Mapping[str, str], root: str, state_ns: str, with_imu: bool,
             cameras: Sequence[str] = ()) -> NodeSpec:
    """Return the injector between the command producers and the backend, and back.

    Each camera's ``image_raw`` and ``camera_info`` are relayed on the ``camera`` route; both
    keep their header stamps, so a consumer pairs them by stamp as before.
    """
    obs = f'{state_ns.strip("/")}/' if state_ns.strip('/') else ''
    bindings = ['command:joint_commands>backend/joint_commands',
                f'observation:{obs}backend/joint_states>{obs}joint_states']
    if with_imu:
        bindings.append(f'imu:{obs}backend/imu/data>{obs}imu/data')
    bindings += [f'camera:{obs}backend/{t}>{obs}{t}' for t in camera_topics(cameras)]
    params = {'profile': a['latency'], 'bindings': bindings,
              'seed': typed(a, 'seed', int, 'an integer'),
              'use_sim_time': uses_sim_time(a)}
    prevalidate(InjectorConfig, params, 'injector')
    return NodeSpec('injector', 'injector', root, params)


def robot_has_imu(robot: str) -> bool:
    """Whether the robot spec has an IMU (PlanError naming ``robot:=`` if it is invalid)."""
    try:
        return load_robot(robot).imu is not None
    except ConfigError as exc:
        raise PlanError(f'robot:={robot}: {exc}') from None
