"""The node kinds this version ships: the one declaration of each node.

Every node kind is one :class:`NodeKind` in :data:`REGISTRY`: its console script, the module
with ``main()``, its config class (``'module:Class'``, the class the node builds from its ROS
parameters and the planner pre-validates them with) and a one-line summary. Everything else
reads this table: ``setup.py`` generates the console scripts from it (it loads this file by
path, so it must import nothing but the standard library), the planner's
:mod:`~simreal_ros.bringup.spec` maps kinds to executables and modules, and the node table of
``docs/architecture.md`` is :func:`markdown_table` (``test/bringup/test_registry.py`` checks
that all of them agree).

Adding a node is one entry here, the node module, its config class and its ``plan_*``
builder. Config classes are imported only when a plan uses the kind (:func:`config_class`), so
reading the registry costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
import importlib
from typing import Any


@dataclass(frozen=True)
class NodeKind:
    """One node kind: ``ros2 run simreal_ros <script>`` runs ``<module>.main``."""

    kind: str
    script: str
    module: str
    config: str  # 'module:Class' with from_mapping (core/validate.py FromMapping)
    summary: str


REGISTRY: tuple[NodeKind, ...] = (
    NodeKind('sim_bridge', 'simreal_sim_bridge', 'simreal_ros.nodes.sim_bridge',
             'simreal_ros.sim.bridge_config:SimBridgeConfig',
             'a physics engine behind the robot topics (backend:=sim, sim2sim, the twin)'),
    NodeKind('excite', 'simreal_excite', 'simreal_ros.nodes.excite',
             'simreal_ros.core.excite_config:ExciteConfig',
             'an excitation trajectory on joint_commands (excite:=PATTERN)'),
    NodeKind('injector', 'simreal_injector', 'simreal_ros.nodes.injector',
             'simreal_ros.latency.injector_config:InjectorConfig',
             'delays, drops and reorders the command and observation paths (latency:=)'),
    NodeKind('policy', 'simreal_policy', 'simreal_ros.nodes.policy',
             'simreal_ros.policy.node_config:PolicyNodeConfig',
             'runs a trained policy on joint_states, publishes joint_commands (policy:=)'),
    NodeKind('recorder', 'simreal_recorder', 'simreal_ros.nodes.recorder',
             'simreal_ros.bag.recorder_config:RecorderConfig',
             'writes a rosbag2 bag and the live gap (record:=true)'),
    NodeKind('dynamixel_driver', 'simreal_dynamixel_driver',
             'simreal_ros.nodes.dynamixel_driver',
             'simreal_ros.hardware.driver_config:DriverConfig',
             'the Dynamixel servo bus of the real arm (backend:=real, twin)'),
    NodeKind('imu_driver', 'simreal_imu_driver', 'simreal_ros.nodes.imu_driver',
             'simreal_ros.hardware.imu.reader:ImuDriverConfig',
             'the serial IMU of a floating-base robot as imu/data (backend:=real, imu_port:=)'),
    NodeKind('external_adapter', 'simreal_external_adapter',
             'simreal_ros.nodes.external_adapter',
             'simreal_ros.hardware.driver_config:ExternalAdapterConfig',
             'the robot topics over an existing ROS 2 driver (real_driver:=external)'),
    NodeKind('camera_driver', 'simreal_camera_driver', 'simreal_ros.nodes.camera_driver',
             'simreal_ros.core.camera_info:CameraDriverConfig',
             'one real camera (V4L2 or stream URL) as image_raw and camera_info'),
    NodeKind('state_publisher', 'simreal_state_publisher', 'simreal_ros.nodes.state_publisher',
             'simreal_ros.core.tf_config:StatePublisherConfig',
             'robot_description and the TF tree of one backend'),
    NodeKind('leader', 'simreal_leader', 'simreal_ros.nodes.leader',
             'simreal_ros.teleop.control:LeaderConfig',
             'a leader arm as the source of joint_commands (teleop:=leader)'),
    NodeKind('episodes', 'simreal_episodes', 'simreal_ros.nodes.episodes',
             'simreal_ros.teleop.quality:EpisodesConfig',
             'records teleop demonstrations as checked episodes (episodes:=true)'),
)

#: kind -> its declaration
KINDS: dict[str, NodeKind] = {k.kind: k for k in REGISTRY}


def console_scripts() -> list[str]:
    """``setup.py``'s console_scripts entries: ``simreal`` and one per node kind."""
    return ['simreal = simreal_ros.cli:main',
            *(f'{k.script} = {k.module}:main' for k in REGISTRY)]


def config_class(kind: str) -> Any:
    """Import and return the config class of ``kind`` (only when a plan uses the kind)."""
    module, _, name = KINDS[kind].config.partition(':')
    return getattr(importlib.import_module(module), name)


TABLE_BEGIN = '<!-- node table: generated from simreal_ros/bringup/registry.py -->'
TABLE_END = '<!-- end of node table -->'


def markdown_table() -> str:
    """Return the node table of ``docs/architecture.md`` (between TABLE_BEGIN and TABLE_END)."""
    rows = ['| kind | console script | config class | what it does |',
            '|---|---|---|---|']
    rows += [f'| `{k.kind}` | `{k.script}` | `{k.config.partition(":")[2]}` | {k.summary} |'
             for k in REGISTRY]
    return '\n'.join(rows)


if __name__ == '__main__':
    print(markdown_table())
