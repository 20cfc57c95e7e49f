"""``tf2_msgs/msg/TFMessage`` <-> :class:`simreal_ros.core.tf_tree.Transform`."""

from __future__ import annotations

from typing import Iterable

from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from simreal_ros.core.tf_tree import Transform
from simreal_ros.ros.messages import stamp_from_ns


def tf_message(transforms: Iterable[Transform], stamp_ns: int) -> TFMessage:
    """One TFMessage with every transform stamped ``stamp_ns``."""
    stamp = stamp_from_ns(stamp_ns)
    out = []
    for t in transforms:
        m = TransformStamped()
        m.header.stamp = stamp
        m.header.frame_id = t.parent
        m.child_frame_id = t.child
        m.transform.translation.x, m.transform.translation.y, m.transform.translation.z = (
            t.translation)
        r = m.transform.rotation
        r.w, r.x, r.y, r.z = t.rotation
        out.append(m)
    return TFMessage(transforms=out)
