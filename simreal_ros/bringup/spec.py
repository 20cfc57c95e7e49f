"""What the planner produces: one :class:`NodeSpec` per node; the shipped nodes (registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simreal_ros.bringup.registry import REGISTRY, config_class
from simreal_ros.errors import ConfigError, PlanError

PACKAGE = 'simreal_ros'


#: Nodes this version ships: kind -> (console script, module), from the registry.
NODES: dict[str, tuple[str, str]] = {k.kind: (k.script, k.module) for k in REGISTRY}


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


def prevalidate(kind: str, params: dict[str, Any], what: str) -> None:
    """Build the node's own config class (the registry's) from the parameters it will get.

    ``use_sim_time`` is rclpy's own parameter and not part of it. A bad value is a
    :class:`PlanError` before any process starts.
    """
    try:
        config_class(kind).from_mapping({k: v for k, v in params.items() if k != 'use_sim_time'})
    except ConfigError as exc:
        raise PlanError(f'{what} settings: {exc}') from None
