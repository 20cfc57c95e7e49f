"""A second DDS participant of a node's process, for its image publishers.

Why: rmw_fastrtps sends everything a participant publishes to another process on the same host
through Fast DDS's shared-memory transport, one segment per participant, 512 KiB by default
(and with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` rmw_fastrtps sets that transport up
itself, so an XML profile cannot enlarge it). A 640x480 rgb8 frame is 921,600 bytes: while its
fragments fill the segment, the participant's other samples find no room, are lost, and the
reliable protocol repairs them after its next heartbeat. Measured here (``simreal bench
recorder``, four 1 kHz JointState topics and a 30 Hz 640x480 image, a plain rclpy subscriber):
with all five publishers on one participant, JointState samples reached the subscriber up to
0.4-2.0 s after their stamp in every 8 s run, and a reliable reader hands over nothing behind a
missing sample, so every subscriber of that participant (a policy on ``joint_states``, the
recorder) stalls for as long. With the image publisher on a participant of its own, the
subscriber took every sample within 12 ms of its stamp in the same comparison; in the
benchmark's rounds since, the recorder's largest delay was 6-46 ms, the bare subscriber's
22-317 ms.

:class:`ImageParticipant` makes that participant: its own rclpy context (one participant each)
and a node named ``<node>_images`` in the node's namespace. Topic names are resolved by the
owning node first (namespace, ``~``, and its remapping rules), so a remapped camera topic lands
where the launch put it. Its publishers need no executor.
"""

from __future__ import annotations

from typing import Any


class ImageParticipant:
    """Publishers for large messages, on a participant separate from ``node``'s."""

    def __init__(self, node: Any, suffix: str = '_images') -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.node import Node

        self.owner = node
        self.context = Context()
        rclpy.init(args=[], context=self.context)
        try:
            self.node: Any = Node(node.get_name() + suffix, namespace=node.get_namespace(),
                                  context=self.context, start_parameter_services=False,
                                  enable_rosout=False)
        except Exception:
            self.context.try_shutdown()
            raise

    def create_publisher(self, msg_type: Any, topic: str, qos: Any) -> Any:
        """Create a publisher of ``topic`` as the owning node resolves it (remaps included)."""
        return self.node.create_publisher(msg_type, self.owner.resolve_topic_name(topic), qos)

    def ok(self) -> bool:
        """Whether both this participant and the owning node's context are up."""
        return bool(self.context.ok() and self.owner.context.ok())

    def close(self) -> None:
        """Destroy the node, then shut the context down (idempotent).

        The node is destroyed even when its context is already down: rclpy's SIGINT handler
        shuts down every context of the process, this one too, and a node left alive would be
        torn down at interpreter exit in no particular order against Fast DDS's own state.
        """
        if self.node is not None:
            node, self.node = self.node, None
            node.destroy_node()
        self.context.try_shutdown()
