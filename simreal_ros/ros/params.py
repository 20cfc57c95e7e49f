"""Declare a dataclass's fields as ROS parameters and read them back."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node


def declare_dataclass(node: Node, cls: type, descriptions: dict[str, str] | None = None
                      ) -> dict[str, Any]:
    """Declare one read-only parameter per field of ``cls`` and return their values."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is MISSING:
            continue
        desc = ParameterDescriptor(description=(descriptions or {}).get(f.name, ''),
                                   read_only=True)
        out[f.name] = node.declare_parameter(f.name, f.default, desc).value
    return out
