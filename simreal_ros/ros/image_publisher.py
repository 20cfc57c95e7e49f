"""Publishing camera frames on the contract: ``NAME/image_raw`` and ``NAME/camera_info``.

Every backend publishes a camera through :class:`CameraPublisher`: the image and its
camera_info carry the same stamp and frame ``NAME_optical_frame``; camera_info is scaled to the
image's size when a device delivers another resolution than its calibration's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from simreal_ros.core.camera_info import CameraInfoData
from simreal_ros.core.robot import CameraSpec

#: images: reliable (any subscriber, best-effort or reliable, matches), 2 deep: a subscriber
#: that falls behind gets the newest frames, never a queue of old ones
IMAGE = QoSProfile(depth=2, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

_CHANNELS = {'rgb8': 3, 'bgr8': 3, 'mono8': 1}


def image_msg(img: npt.NDArray[np.uint8], encoding: str, stamp_ns: int, frame_id: str) -> Any:
    """Return a sensor_msgs/Image of an (h, w[, c]) uint8 array."""
    msg = Image()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(img.shape[0]), int(img.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = msg.width * _CHANNELS[encoding]
    msg.data = np.ascontiguousarray(img).tobytes()
    return msg


def camera_info_msg(info: CameraInfoData, stamp_ns: int, frame_id: str) -> Any:
    """Return a sensor_msgs/CameraInfo of ``info``."""
    msg = CameraInfo()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    msg.header.frame_id = frame_id
    msg.width, msg.height = info.width, info.height
    msg.distortion_model = info.distortion_model
    msg.d = list(info.d)
    msg.k = list(info.k)
    msg.r = list(info.r)
    msg.p = list(info.p)
    return msg


class CameraPublisher:
    """The two topics of one camera on ``node`` (relative names, so namespaces apply).

    ``node`` may be an :class:`~simreal_ros.ros.image_participant.ImageParticipant`: anything
    with ``create_publisher``.
    """

    def __init__(self, node: Any, cam: CameraSpec, info: CameraInfoData) -> None:
        self.cam = cam
        self.info = info
        self.pub_image = node.create_publisher(Image, f'{cam.name}/image_raw', IMAGE)
        self.pub_info = node.create_publisher(CameraInfo, f'{cam.name}/camera_info', IMAGE)
        self.published = 0

    def publish(self, img: npt.NDArray[np.uint8], stamp_ns: int, encoding: str = '') -> None:
        """Publish ``img`` and its camera_info, both stamped ``stamp_ns``."""
        h, w = int(img.shape[0]), int(img.shape[1])
        info = self.info.scaled_to(w, h)
        self.pub_image.publish(image_msg(img, encoding or self.cam.encoding, stamp_ns,
                                         self.cam.frame_id))
        self.pub_info.publish(camera_info_msg(info, stamp_ns, self.cam.frame_id))
        self.published += 1


class SimCameras:
    """The sim bridge's cameras: a render thread fed by the physics thread, and publishers.

    The sim publishes the ideal pinhole of each camera's spec as its camera_info (that is
    what it renders; a calibration file describes a real lens). It renders only while
    something subscribes to a camera's image_raw or camera_info (checked every
    ``SUBSCRIBER_CHECK_S``), as ROS camera drivers publish lazily: a 640x480 software render at
    30 Hz takes most of a CPU core here, which a graph that never looks at the images (most
    tests, a policy on joint states) should not pay.

    The images go out through a participant of their own (:class:`~simreal_ros.ros.
    image_participant.ImageParticipant`, node ``<bridge>_images``): a 640x480 frame crowds the
    other samples of its participant out of the shared-memory segment, and their repair
    stalled every subscriber of four 1 kHz topics next to one camera for 0.4-2 s (the bridge's
    own 1 kHz ``joint_states`` showed no difference: docs/camera.md).
    """

    SUBSCRIBER_CHECK_S = 0.2

    def __init__(self, node: Any, sim: Any, cameras: tuple[CameraSpec, ...]) -> None:
        from simreal_ros.ros.image_participant import ImageParticipant
        from simreal_ros.sim.render_thread import RenderThread
        self.node = node
        self.participant = ImageParticipant(node)
        self.pubs = [CameraPublisher(self.participant, c, CameraInfoData.ideal(c))
                     for c in cameras]
        self.render = RenderThread(lambda: sim.camera_renderer(cameras), cameras,
                                   self._on_frame, self._on_error)
        self.watched = False
        node.create_timer(self.SUBSCRIBER_CHECK_S, self._check_subscribers)

    def _check_subscribers(self) -> None:
        self.watched = any(p.pub_image.get_subscription_count()
                           or p.pub_info.get_subscription_count() for p in self.pubs)

    def offer(self, stamp_ns: int, state: Any) -> None:
        """Offer the state just published (physics thread; returns at once)."""
        if self.watched:
            self.render.offer(stamp_ns, state)

    def _on_frame(self, stamp_ns: int, images: list[Any]) -> None:
        if not self.participant.ok():  # shutting down: the publishers are gone
            return
        for pub, img in zip(self.pubs, images, strict=True):
            if img is not None:
                pub.publish(img, stamp_ns)

    def _on_error(self, exc: BaseException) -> None:
        if not self.participant.ok():  # a publish raced the shutdown: not a failure
            return
        self.node.get_logger().error(f'camera rendering stopped: {exc!r} (physics goes on; '
                                     f'MUJOCO_GL=egl or osmesa must be able to render here)')

    def values(self) -> dict[str, object]:
        """Diagnostics values of the cameras."""
        return {'cameras_watched': self.watched, **self.render.values()}

    def close(self) -> None:
        """Stop rendering, then close the image participant."""
        self.render.close()
        self.participant.close()
