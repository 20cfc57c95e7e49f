"""The planner's plan without the state publishers, for tests about the other nodes.

Every backend gets a state publisher (``bringup/plan_tf.py``, tested in
``test/bringup/test_plan_tf.py``); the planner tests written before it compare the rest.
"""

from __future__ import annotations

from typing import Mapping

from simreal_ros.bringup.planner import NodeSpec, plan


def plan_without_tf(args: Mapping[str, str]) -> list[NodeSpec]:
    """``plan(args)`` less its ``state_publisher`` nodes."""
    return [n for n in plan(args) if n.kind != 'state_publisher']
