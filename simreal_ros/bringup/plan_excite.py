"""The excitation source's part of the plan (``excite:=PATTERN``)."""

from __future__ import annotations

from typing import Mapping

from simreal_ros.bringup.arguments import ns, records, typed, uses_sim_time
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.core.excite_config import ExciteConfig
from simreal_ros.errors import PlanError


def command_consumers(a: Mapping[str, str], backend: str) -> int:
    """How many nodes of the plan subscribe the root ``joint_commands``."""
    direct = {'sim': 1, 'sim2sim': 2, 'real': 1, 'twin': 2}[backend]
    n = 1 if a['latency'] else direct
    return n + (1 if a['record'] == 'true' and records(a, 'joint_commands') else 0)


def excite(a: Mapping[str, str], backend: str, root: str) -> NodeSpec:
    """Return the excitation node; it waits for every command consumer, then ends the launch."""
    require('excite', f'excite:={a["excite"]}')
    params = {
        'robot': a['robot'], 'pattern': a['excite'],
        'duration_s': typed(a, 'duration', float, 'a number of seconds'),
        'amplitude': typed(a, 'amplitude', float, 'a number (rad)'),
        'rate_hz': typed(a, 'excite_rate', float, 'a number (Hz)'),
        'seed': typed(a, 'seed', int, 'an integer'),
        'use_sim_time': uses_sim_time(a),
        'sync_to_states': a['timing'] == 'lockstep',
        'wait_for_states': True,
        'wait_for_subscribers': command_consumers(a, backend),
    }
    if params['duration_s'] <= 0 or params['rate_hz'] <= 0:
        raise PlanError('duration:= and excite_rate:= must be > 0')
    prevalidate(ExciteConfig, params, 'excite')
    remaps = ((('joint_states', f'{ns(root, "sim_a")}/joint_states'),)
              if backend == 'sim2sim' else ())
    return NodeSpec('excite', 'excite', root, params, remaps, exit_ends_launch=True)
