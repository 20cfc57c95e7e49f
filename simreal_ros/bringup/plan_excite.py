"""The excitation source's part of the plan (``excite:=PATTERN``)."""

from __future__ import annotations

from simreal_ros.bringup.arguments import LaunchArgs, ns
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.errors import PlanError


def command_consumers(a: LaunchArgs) -> int:
    """How many nodes of the plan subscribe the root ``joint_commands``."""
    direct = {'sim': 1, 'sim2sim': 2, 'real': 1, 'twin': 2}[a.backend]
    n = 1 if a.latency is not None else direct
    return n + (1 if a.record and a.records('joint_commands') else 0)


def excite(a: LaunchArgs) -> NodeSpec:
    """Return the excitation node; it waits for every command consumer, then ends the launch."""
    require('excite', f'excite:={a.excite}')
    params = {
        'robot': a.text['robot'], 'pattern': a.excite,
        'duration_s': a.duration_s,
        'amplitude': a.amplitude_rad,
        'rate_hz': a.excite_rate_hz,
        'seed': a.seed,
        'use_sim_time': a.use_sim_time,
        'sync_to_states': a.timing == 'lockstep',
        'wait_for_states': True,
        'wait_for_subscribers': command_consumers(a),
    }
    if a.duration_s <= 0 or a.excite_rate_hz <= 0:
        raise PlanError('duration:= and excite_rate:= must be > 0')
    prevalidate('excite', params, 'excite')
    remaps = ((('joint_states', f'{ns(a.root, "sim_a")}/joint_states'),)
              if a.backend == 'sim2sim' else ())
    return NodeSpec('excite', 'excite', a.root, params, remaps, exit_ends_launch=True)
