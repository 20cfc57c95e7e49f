"""The sim bridge's part of the plan (``backend:=sim``, ``sim2sim``, the twin)."""

from __future__ import annotations

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.plan_camera import sim_renders_cameras
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.core.model_files import pybullet_mjcf_refusal
from simreal_ros.errors import PlanError
from simreal_ros.sim.bridge_config import RENDERING_ENGINES, check_floating_base


def engine_of(a: LaunchArgs, role: str) -> str:
    """Return the engine of sim2sim's ``sim_a``/``sim_b`` (``engine_a:=``, else ``engine:=``)."""
    return a.engine_a if role == 'a' else a.engine_b


def bridge(a: LaunchArgs, name: str, namespace: str, overlay_arg: str,
           commands_from: str | None, publish_clock: bool,
           remaps: tuple[tuple[str, str], ...] = (), engine: str = '',
           frame_prefix: str = '') -> NodeSpec:
    """Return a sim bridge (its settings pre-validated with the node's own config class).

    ``overlay_arg`` names the argument of its overlay (``overlay`` or ``overlay_b``);
    ``frame_prefix`` that of a second robot's frames (``twin/``), which a floating base's
    ``odom`` and ``/tf`` use as its state publisher does.
    """
    engine = engine or a.engine
    if engine == 'pybullet' and a.robot.model_format == 'mjcf':
        raise PlanError(pybullet_mjcf_refusal(a.robot.source, a.robot.urdf))
    check_floating_base(a.robot, engine)
    params = {
        'robot': a.text['robot'], 'engine': engine, 'scene': a.text['scene'],
        'overlay': a.text[overlay_arg],
        'randomization': a.text['randomization'], 'seed': a.seed,
        'timing_mode': a.timing,
        'publish_rate_hz': a.rate_hz,
        'sim_time': a.sim_time, 'publish_clock': publish_clock,
        'start_paused': a.paused,
        'lockstep_timeout_s': a.lockstep_timeout_s,
        # cameras:=auto renders where the engine can; cameras:=true insists (checked below)
        'cameras': sim_renders_cameras(a) and (engine in RENDERING_ENGINES
                                               or a.cameras == 'true'),
    }
    if a.robot.floating:
        params['frame_prefix'] = frame_prefix
    prevalidate('sim_bridge', params, 'sim bridge')
    if commands_from is not None:
        remaps = tuple(r for r in remaps if r[0] != 'joint_commands') + (
            ('joint_commands', f'{commands_from}/joint_commands'),
            ('forward_position_controller/commands',  # not delayed: no injector route
             f'{a.root}/forward_position_controller/commands'))
        if a.robot.floating:  # the velocity command too: both robots are told the same
            remaps += (('cmd_vel', f'{a.root}/cmd_vel'),)
    return NodeSpec('sim_bridge', name, namespace, params, remaps)
