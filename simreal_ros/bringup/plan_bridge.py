"""The sim bridge's part of the plan (``backend:=sim``, ``sim2sim``, the twin)."""

from __future__ import annotations

from typing import Mapping

from simreal_ros.bringup.arguments import ns, typed
from simreal_ros.bringup.plan_camera import sim_renders_cameras
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.sim.bridge_config import RENDERING_ENGINES, SimBridgeConfig


def engine_of(a: Mapping[str, str], role: str) -> str:
    """Return the engine of sim2sim's ``sim_a``/``sim_b`` (``engine_a:=``, else ``engine:=``)."""
    return a.get(f'engine_{role}', '') or a['engine']


def bridge(a: Mapping[str, str], name: str, namespace: str, overlay: str,
           commands_from: str | None, publish_clock: bool,
           remaps: tuple[tuple[str, str], ...] = (), engine: str = '') -> NodeSpec:
    """Return a sim bridge (its settings pre-validated with the node's own config class)."""
    engine = engine or a['engine']
    params = {
        'robot': a['robot'], 'engine': engine, 'scene': a['scene'],
        'overlay': overlay,
        'randomization': a['randomization'], 'seed': typed(a, 'seed', int, 'an integer'),
        'timing_mode': a['timing'],
        'publish_rate_hz': typed(a, 'rate', float, 'a number (Hz)'),
        'sim_time': a['sim_time'] == 'true', 'publish_clock': publish_clock,
        'start_paused': a['paused'] == 'true',
        'lockstep_timeout_s': typed(a, 'lockstep_timeout', float, 'a number of seconds'),
        # cameras:=auto renders where the engine can; cameras:=true insists (checked below)
        'cameras': sim_renders_cameras(a) and (engine in RENDERING_ENGINES
                                               or a['cameras'] == 'true'),
    }
    prevalidate(SimBridgeConfig, params, 'sim bridge')
    if commands_from is not None:
        remaps = tuple(r for r in remaps if r[0] != 'joint_commands') + (
            ('joint_commands', f'{commands_from}/joint_commands'),
            ('forward_position_controller/commands',  # not delayed: no injector route
             f'{ns(a["namespace"])}/forward_position_controller/commands'))
    return NodeSpec('sim_bridge', name, namespace, params, remaps)
