"""Declare a dataclass's fields as ROS parameters and read them back."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.parameter import Parameter


def declare_dataclass(node: Node, cls: type, descriptions: dict[str, str] | None = None
                      ) -> dict[str, Any]:
    """Declare one read-only parameter per field of ``cls`` and return their values.

    A field with a tuple default is a string array (returned as a tuple).
    """
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is MISSING:
            continue
        desc = ParameterDescriptor(description=(descriptions or {}).get(f.name, ''),
                                   read_only=True)
        if isinstance(f.default, tuple):  # rclpy cannot infer the type of an empty list
            value = node.declare_parameter(f.name, list(f.default) or
                                           Parameter.Type.STRING_ARRAY, desc).value
            out[f.name] = tuple(value or ())
        else:
            out[f.name] = node.declare_parameter(f.name, f.default, desc).value
    return out
