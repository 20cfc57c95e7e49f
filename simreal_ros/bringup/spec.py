"""What the planner produces: one :class:`NodeSpec` per node, and the nodes this version ships."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simreal_ros.errors import ConfigError, PlanError

PACKAGE = 'simreal_ros'


#: Nodes this version ships: kind -> (console script, module).
NODES: dict[str, tuple[str, str]] = {
    'sim_bridge': ('simreal_sim_bridge', 'simreal_ros.nodes.sim_bridge'),
    'excite': ('simreal_excite', 'simreal_ros.nodes.excite'),
    'injector': ('simreal_injector', 'simreal_ros.nodes.injector'),
    'policy': ('simreal_policy', 'simreal_ros.nodes.policy'),
    'recorder': ('simreal_recorder', 'simreal_ros.nodes.recorder'),
    'dynamixel_driver': ('simreal_dynamixel_driver', 'simreal_ros.nodes.dynamixel_driver'),
    'external_adapter': ('simreal_external_adapter', 'simreal_ros.nodes.external_adapter'),
    'camera_driver': ('simreal_camera_driver', 'simreal_ros.nodes.camera_driver'),
    'state_publisher': ('simreal_state_publisher', 'simreal_ros.nodes.state_publisher'),
    'leader': ('simreal_leader', 'simreal_ros.nodes.leader'),
    'episodes': ('simreal_episodes', 'simreal_ros.nodes.episodes'),
}


#: Nodes that modes need but that this version does not ship yet.
NOT_YET_SHIPPED: dict[str, str] = {}


@dataclass(frozen=True)
class NodeSpec:
    """Everything needed to start one node, with ``ros2 launch`` or ``simreal launch``."""

    kind: str
    name: str
    namespace: str = ''
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    required: bool = True
    exit_ends_launch: bool = False

    @property
    def executable(self) -> str:
        """Console script name (``ros2 run simreal_ros <executable>``)."""
        return NODES[self.kind][0]

    @property
    def module(self) -> str:
        """Python module with ``main()``."""
        return NODES[self.kind][1]

    @property
    def fqn(self) -> str:
        """Fully qualified node name."""
        return f'{self.namespace.rstrip("/")}/{self.name}' if self.namespace else f'/{self.name}'


def require(kind: str, why: str) -> None:
    """Raise PlanError if this version does not ship the node ``kind`` that ``why`` needs."""
    if kind not in NODES:
        what = NOT_YET_SHIPPED.get(kind, kind)
        raise PlanError(f'{why} needs {what} (node {kind!r}), which this version of '
                        f'simreal_ros does not ship; it ships the nodes {", ".join(NODES)}')


def prevalidate(config: Any, params: dict[str, Any], what: str) -> None:
    """Build the node's own config class from the parameters about to be passed to it.

    ``config`` has ``from_mapping``; ``use_sim_time`` is rclpy's own parameter and not part of
    it. A bad value is a :class:`PlanError` before any process starts.
    """
    try:
        config.from_mapping({k: v for k, v in params.items() if k != 'use_sim_time'})
    except ConfigError as exc:
        raise PlanError(f'{what} settings: {exc}') from None
