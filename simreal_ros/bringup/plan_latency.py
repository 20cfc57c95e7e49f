"""The latency injector's part of the plan (``latency:=``).

The backend's topics move under ``backend/`` and the injector relays them onto the
contract's names.
"""

from __future__ import annotations

from typing import Sequence

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.latency.injection import Profile


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


def injector(a: LaunchArgs, state_ns: str, with_imu: bool,
             cameras: Sequence[str] = ()) -> NodeSpec:
    """Return the injector between the command producers and the backend, and back.

    Each camera's ``image_raw`` and ``camera_info`` are relayed on the ``camera`` route; both
    keep their header stamps, so a consumer pairs them by stamp as before. The profile was
    loaded and checked with the arguments (``latency:=``).
    """
    obs = f'{state_ns.strip("/")}/' if state_ns.strip('/') else ''
    bindings = ['command:joint_commands>backend/joint_commands',
                f'observation:{obs}backend/joint_states>{obs}joint_states']
    if with_imu:
        bindings.append(f'imu:{obs}backend/imu/data>{obs}imu/data')
    bindings += [f'camera:{obs}backend/{t}>{obs}{t}' for t in camera_topics(cameras)]
    params = {'profile': a.text['latency'], 'bindings': bindings, 'seed': a.seed,
              'use_sim_time': a.use_sim_time}
    prevalidate('injector', params, 'injector')
    return NodeSpec('injector', 'injector', a.root, params)
