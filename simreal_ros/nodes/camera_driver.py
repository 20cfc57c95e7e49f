"""``simreal_camera_driver``: a real camera on the topic contract, through OpenCV.

Opens ``cv2.VideoCapture`` on a V4L2 device (index ``0`` or path ``/dev/video0``) or a stream
URL (``http://`` MJPEG, ``rtsp://``), as the robot spec's camera ``device`` or the ``device``
parameter says, and publishes ``NAME/image_raw`` and ``NAME/camera_info`` (frame
``NAME_optical_frame``) exactly as the sim bridge does, plus ``/diagnostics``. Settings:
:class:`simreal_ros.core.camera_info.CameraDriverConfig`.

* **Requested and read back.** Resolution, rate and exposure are requested
  (``CAP_PROP_FRAME_WIDTH``/``HEIGHT``/``FPS``/``EXPOSURE``) and what the device reports is
  logged and put on ``/diagnostics``; frames are published at the size they arrive with
  ``camera_info`` scaled to it.
* **Stamps.** A frame is stamped when its read returns, minus the capture latency (exposure to
  the end of the read): ``capture_latency_s`` when set, else estimated from the V4L2 buffer
  timestamp (``CAP_PROP_POS_MSEC``, CLOCK_MONOTONIC) where the backend gives it, else 0. The
  latency applied and its source are on ``/diagnostics``.
* **Reconnect.** A failed read (unplugged, stream dropped; streams time out after
  ``2 * reconnect_period_s`` + 1 s without a frame) releases the device; it is reopened every
  ``reconnect_period_s`` until it answers. Meanwhile ``/diagnostics`` says ERROR
  ``disconnected`` and no frames are published.
* ``camera_info`` comes from the calibration file (camera_calibration_parsers YAML) when one
  is given, else the spec's nominal pinhole.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import cv2
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node

from simreal_ros.core.camera_info import (
    CameraDriverConfig,
    camera_info_for,
    device_argument,
    find_camera,
)
from simreal_ros.errors import ConfigError
from simreal_ros.ros import messages, qos
from simreal_ros.ros.image_publisher import CameraPublisher
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node

#: a V4L2 buffer timestamp further than this from now is not on CLOCK_MONOTONIC (ignored)
MAX_PLAUSIBLE_LATENCY_NS = 2_000_000_000


class CameraDriver(Node):
    """An OpenCV camera exposed over the topic contract."""

    def __init__(self) -> None:
        super().__init__('camera_driver')
        self.cfg = CameraDriverConfig.from_mapping(
            declare_dataclass(self, CameraDriverConfig),
            f'{self.get_fully_qualified_name()} params')
        cfg = self.cfg
        self.cam = find_camera(cfg.robot, cfg.camera, f'{self.get_fully_qualified_name()} '
                               f'params')
        self.device = cfg.device or self.cam.device
        if not self.device:
            raise ConfigError(f'{self.get_fully_qualified_name()} params', 'device',
                              f'a V4L2 index or path or a stream URL for camera '
                              f'{self.cam.name} (the robot spec has none; camera_device:=)',
                              '')
        self.width = cfg.width or self.cam.width
        self.height = cfg.height or self.cam.height
        self.fps_hz = cfg.fps_hz or self.cam.fps_hz
        self.pub = CameraPublisher(self, self.cam, camera_info_for(self.cam, cfg.calibration))
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self.state = 'connecting'
        self.stats: dict[str, Any] = {'frames': 0, 'reconnects': 0, 'read_failures': 0,
                                      'opens_failed': 0, 'last_error': '', 'device_width': 0,
                                      'device_height': 0, 'device_fps': 0.0,
                                      'device_exposure': 0.0, 'frame_width': 0,
                                      'frame_height': 0}
        self.read_ns: list[int] = []
        self.arrivals: list[int] = []
        self.latency_ns = 0
        self.latency_source = 'none'
        self._v4l2 = False
        self.running = True
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._capture_thread, name='capture',
                                       daemon=True)
        self.thread.start()
        self.get_logger().info(f'camera {self.cam.name}: {self.device}, requesting '
                               f'{self.width}x{self.height} at {self.fps_hz:g} Hz')

    # ---- capture -------------------------------------------------------------------------
    def _open(self) -> Any:
        dev = device_argument(self.device)
        is_stream = isinstance(dev, str) and '://' in dev
        if is_stream:
            timeout_ms = int((2 * self.cfg.reconnect_period_s + 1.0) * 1000)
            cap = cv2.VideoCapture(dev, cv2.CAP_FFMPEG,
                                   [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, timeout_ms,
                                    cv2.CAP_PROP_READ_TIMEOUT_MSEC, timeout_ms])
        else:
            cap = cv2.VideoCapture(dev, cv2.CAP_V4L2)
        if not cap.isOpened():
            cap.release()
            return None
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
        cap.set(cv2.CAP_PROP_FPS, self.fps_hz)
        if self.cfg.exposure >= 0:
            cap.set(cv2.CAP_PROP_AUTO_EXPOSURE, 1)  # V4L2: 1 = manual, 3 = aperture priority
            cap.set(cv2.CAP_PROP_EXPOSURE, self.cfg.exposure)
        st = self.stats
        st['device_width'] = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        st['device_height'] = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        st['device_fps'] = float(cap.get(cv2.CAP_PROP_FPS))
        st['device_exposure'] = float(cap.get(cv2.CAP_PROP_EXPOSURE))
        self.get_logger().info(
            f'opened {self.device} ({cap.getBackendName()}): requested {self.width}x'
            f'{self.height} at {self.fps_hz:g} Hz, device reports {st["device_width"]}x'
            f'{st["device_height"]} at {st["device_fps"]:g} Hz'
            + (f', exposure {st["device_exposure"]:g}' if self.cfg.exposure >= 0 else ''))
        self._v4l2 = not is_stream
        return cap

    def _capture_thread(self) -> None:
        while self.running:
            cap = self._open()
            if cap is None:
                self.stats['opens_failed'] += 1
                self.state = 'disconnected'
                self.stats['last_error'] = f'cannot open {self.device}'
                self.get_logger().warning(f'cannot open camera {self.device}; retrying every '
                                          f'{self.cfg.reconnect_period_s:g} s',
                                          throttle_duration_sec=10.0)
                self.wake.wait(self.cfg.reconnect_period_s)
                continue
            self.state = 'streaming'
            try:
                self._stream(cap)
            except Exception as exc:  # noqa: BLE001 - a publish after shutdown, or a bug
                if not self.context.ok():
                    return
                self.stats['last_error'] = repr(exc)
                self.get_logger().error(f'capture failed: {exc!r}; reopening the device')
            finally:
                cap.release()
            if self.running:
                self.state = 'disconnected'
                self.stats['reconnects'] += 1
                self.get_logger().warning(f'camera {self.device}: read failed, reconnecting')
                self.wake.wait(self.cfg.reconnect_period_s)

    def _stream(self, cap: Any) -> None:
        fixed = self.cfg.capture_latency_s
        while self.running:
            t0 = time.monotonic_ns()
            ok, frame = cap.read()
            done = time.monotonic_ns()
            ros_now = self.get_clock().now().nanoseconds
            if not ok or frame is None:
                self.stats['read_failures'] += 1
                self.stats['last_error'] = f'read from {self.device} failed'
                return
            if fixed >= 0:
                self.latency_ns, self.latency_source = int(fixed * 1e9), 'capture_latency_s'
            elif self._v4l2:
                buf_ns = int(cap.get(cv2.CAP_PROP_POS_MSEC) * 1e6)
                if 0 < done - buf_ns < MAX_PLAUSIBLE_LATENCY_NS:
                    self.latency_ns, self.latency_source = done - buf_ns, 'v4l2 timestamp'
            self.read_ns = self.read_ns[-199:] + [done - t0]
            self.arrivals = self.arrivals[-199:] + [done]
            self.pub.publish(self._convert(frame), ros_now - self.latency_ns)
            st = self.stats
            st['frames'] += 1
            st['frame_height'], st['frame_width'] = int(frame.shape[0]), int(frame.shape[1])

    def _convert(self, frame: Any) -> Any:
        enc = self.cam.encoding
        if frame.ndim == 2:
            return frame if enc == 'mono8' else cv2.cvtColor(
                frame, cv2.COLOR_GRAY2RGB if enc == 'rgb8' else cv2.COLOR_GRAY2BGR)
        if enc == 'bgr8':
            return frame
        return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB if enc == 'rgb8' else cv2.COLOR_BGR2GRAY)

    # ---- diagnostics -----------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        arrivals, reads = list(self.arrivals), sorted(self.read_ns)
        now = time.monotonic_ns()
        recent = [t for t in arrivals if now - t < 2_000_000_000]
        rate = ((len(recent) - 1) * 1e9 / (recent[-1] - recent[0])
                if len(recent) > 2 and recent[-1] > recent[0] else 0.0)
        level, message = 'ok', self.state
        if self.state != 'streaming':
            level = 'error' if self.state == 'disconnected' else 'warn'
            message = f'{self.state}: {self.stats["last_error"] or "no frame yet"}'
        values: dict[str, object] = {
            'device': self.device, 'state': self.state, 'rate_hz': rate,
            'requested_width': self.width, 'requested_height': self.height,
            'requested_fps': self.fps_hz,
            'read_ms_p50': reads[len(reads) // 2] / 1e6 if reads else float('nan'),
            'read_ms_max': reads[-1] / 1e6 if reads else float('nan'),
            'capture_latency_ms': self.latency_ns / 1e6,
            'capture_latency_source': self.latency_source, **self.stats}
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: camera {self.cam.name}', self.device, level,
            message, values)]
        self.pub_diag.publish(arr)

    def close(self) -> None:
        """Stop capturing (a read in progress finishes or times out first)."""
        self.running = False
        self.wake.set()
        self.thread.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Run the camera driver node."""
    return run_node(CameraDriver, args)


if __name__ == '__main__':
    raise SystemExit(main())
