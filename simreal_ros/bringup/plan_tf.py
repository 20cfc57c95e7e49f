"""State publishers in the plan: one next to every node that publishes ``joint_states``.

The first backend of the plan is the primary robot (``sim``'s bridge, ``sim2sim``'s ``sim_a``,
the real driver of ``real`` and ``twin``): its state publisher runs in the graph's root
namespace with unprefixed frames, so ``/robot_description`` and the frames the contract names
(``<camera>_optical_frame``) are the same in every mode. Each further backend (``twin/``,
``sim_b/``) gets one in its own namespace with its frames prefixed by that namespace
(``twin/base_link``), so both arms hang under the shared ``world`` frame of one tree.

A robot whose model is MJCF gets none: ``/robot_description`` and TF are built from a URDF
(docs/robots.md says so).
"""

from __future__ import annotations

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate

#: Node kinds that publish ``joint_states``.
BACKEND_KINDS = ('sim_bridge', 'dynamixel_driver', 'external_adapter')


def state_publishers(a: LaunchArgs, nodes: list[NodeSpec]) -> list[NodeSpec]:
    """Return a state publisher for each backend in ``nodes`` (the first one is primary)."""
    root = a.root
    out: list[NodeSpec] = []
    if a.robot.model_format != 'urdf':
        return out
    for spec in (n for n in nodes if n.kind in BACKEND_KINDS):
        rel = spec.namespace[len(root):].strip('/')
        if not out:
            params = {'robot': a.text['robot'], 'frame_prefix': ''}
            remaps = (('joint_states', f'{spec.namespace}/joint_states'),) if rel else ()
            namespace = root
        else:
            params = {'robot': a.text['robot'], 'frame_prefix': f'{rel}/'}
            remaps, namespace = (), spec.namespace
        prevalidate('state_publisher', params, 'state publisher')
        out.append(NodeSpec('state_publisher', 'state_publisher', namespace, params, remaps))
    return out
