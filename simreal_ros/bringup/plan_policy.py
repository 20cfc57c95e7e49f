"""The policy node's part of the plan (``policy:=``)."""

from __future__ import annotations

from typing import Mapping

from simreal_ros.bringup.arguments import ns, uses_sim_time
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PlanError
from simreal_ros.policy.node_config import PolicyNodeConfig
from simreal_ros.policy.spec import load_policy_spec


def policy_node(a: Mapping[str, str], backend: str, root: str) -> NodeSpec:
    """Return the policy node (at the root; in sim2sim it observes the primary sim_a)."""
    if a['excite']:
        raise PlanError(f'policy:={a["policy"]} and excite:={a["excite"]} both publish '
                        f'joint_commands; use one of them')
    try:
        spec = load_policy_spec(a['policy'])
    except ConfigError as exc:
        raise PlanError(f'policy:={a["policy"]}: {exc}') from None
    if not spec.model.is_file():
        raise PlanError(f'policy:={a["policy"]}: model file {spec.model} not found (train one '
                        f'with simreal train, or fix model: in {spec.source})')
    try:
        robot = load_robot(a['robot']).name
    except ConfigError as exc:
        raise PlanError(f'robot:={a["robot"]}: {exc}') from None
    if spec.robot != robot:
        raise PlanError(f'policy:={a["policy"]} is for robot {spec.robot!r}, but robot:='
                        f'{a["robot"]} is {robot!r}')
    params = {
        'policy': str(spec.source), 'robot': a['robot'],
        'use_sim_time': uses_sim_time(a),
        'sync_to_states': a['timing'] == 'lockstep',
        'enable_on_start': a['policy_autostart'] == 'true',
    }
    prevalidate(PolicyNodeConfig, params, 'policy')
    remaps: tuple[tuple[str, str], ...] = ()
    if backend == 'sim2sim':
        primary = ns(root, 'sim_a')
        remaps = ((spec.topics.joint_states, f'{primary}/joint_states'),
                  (spec.topics.imu, f'{primary}/imu/data'))
    return NodeSpec('policy', 'policy', root, params, remaps)
