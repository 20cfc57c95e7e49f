"""The policy node's part of the plan (``policy:=``).

The policy spec, its robot and the existence of its weights file are checked with the
arguments (:func:`~simreal_ros.bringup.arguments.parse_launch_args`).
"""

from __future__ import annotations

from simreal_ros.bringup.arguments import LaunchArgs, ns
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.errors import PlanError


def policy_node(a: LaunchArgs) -> NodeSpec:
    """Return the policy node (at the root; in sim2sim it observes the primary sim_a)."""
    spec = a.policy
    assert spec is not None, 'policy_node needs policy:='
    if a.excite:
        raise PlanError(f'policy:={a.text["policy"]} and excite:={a.excite} both publish '
                        f'joint_commands; use one of them')
    params = {
        'policy': str(spec.source), 'robot': a.text['robot'],
        'use_sim_time': a.use_sim_time,
        'sync_to_states': a.timing == 'lockstep',
        'enable_on_start': a.policy_autostart,
    }
    if spec.images and a.cameras == 'false':
        raise PlanError(f'policy:={a.text["policy"]} sees cameras '
                        f'{[t.camera for t in spec.images]} (image terms), but cameras:=false '
                        'publishes no frames; drop cameras:=false')
    prevalidate('policy', params, 'policy')
    remaps: tuple[tuple[str, str], ...] = ()
    if a.backend == 'sim2sim':
        primary = ns(a.root, 'sim_a')
        remaps = ((spec.topics.joint_states, f'{primary}/joint_states'),
                  (spec.topics.imu, f'{primary}/imu/data'),
                  *((t.topic, f'{primary}/{t.topic}') for t in spec.images))
    return NodeSpec('policy', 'policy', a.root, params, remaps)
