"""The virtual robot's camera: the emulator's reality rendered and served as MJPEG over HTTP.

``simreal emulate --camera`` starts one :class:`VirtualCamera` per camera of the robot spec. It
renders the emulator's arm as it really is (the physics of the reality file) through the
camera's *optical reality* (``camera:`` of the reality file,
:class:`~simreal_ros.core.camera_info.OpticalReality`): the true intrinsics (which a calibration
has to find; the nominal ones are the spec's), lens distortion, blur, exposure gain, white
balance and sensor noise; each frame is served ``latency_s`` after the instant it shows, so the
OpenCV driver on ``backend:=real`` meets what a USB or IP camera gives it.

The stream is ``multipart/x-mixed-replace`` JPEG (what IP cameras and ``mjpg-streamer`` serve)
at ``http://127.0.0.1:PORT/NAME.mjpg``; the server listens on loopback only. ``drop_at=T`` /
``restore_at=T`` (``--camera-faults``; seconds after the first client connected, so that a
test's timing does not depend on how long its driver took to start) close every connection and
refuse new ones until restored, as a camera that is unplugged or an IP camera that reboots.

Frames are rendered only while a client streams. Rendering runs on the camera's own thread
from a ``qpos`` copy (the emulator's event loop is
never blocked: ``mjr_render`` and ``cv2.imencode`` release the GIL), so a slow render lowers the
camera's frame rate, not the servo loop's timing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import socket
import threading
import time
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from simreal_ros.core.camera_info import OpticalReality
from simreal_ros.core.robot import CameraSpec
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.emulator.optics import Optics, offset_pose, rotation_matrix

__all__ = ['CameraFaults', 'Optics', 'VirtualCamera', 'start_cameras']

Image = npt.NDArray[np.uint8]
BOUNDARY = 'simrealframe'


@dataclass(frozen=True)
class CameraFaults:
    """``--camera-faults drop_at=T,restore_at=T`` (seconds after the first client connected)."""

    drop_at: float | None = None
    restore_at: float | None = None

    @classmethod
    def parse(cls, text: str) -> 'CameraFaults':
        """Parse ``drop_at=5,restore_at=7``; ConfigError naming a bad part."""
        values: dict[str, float] = {}
        for part in filter(None, (s.strip() for s in text.split(','))):
            key, sep, raw = part.partition('=')
            if not sep or key not in ('drop_at', 'restore_at'):
                raise ConfigError('--camera-faults', part, 'drop_at=S or restore_at=S',
                                  has_got=False)
            try:
                values[key] = float(raw)
            except ValueError:
                raise ConfigError('--camera-faults', key, 'a number of seconds', raw) from None
            if not values[key] >= 0:
                raise ConfigError('--camera-faults', key, 'a number of seconds >= 0', raw)
        out = cls(**values)
        if out.restore_at is not None and (out.drop_at is None or out.restore_at <= out.drop_at):
            raise ConfigError('--camera-faults', 'restore_at', 'a time after drop_at',
                              out.restore_at)
        return out


class _Handler(BaseHTTPRequestHandler):
    server: '_Server'

    def log_message(self, *_args: Any) -> None:  # no access log on stderr
        return

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        cam = self.server.camera
        if self.path.split('?')[0] not in (f'/{cam.spec.name}.mjpg', '/'):
            self.send_error(404, f'the stream is /{cam.spec.name}.mjpg')
            return
        self.send_response(200)
        self.send_header('Content-Type', f'multipart/x-mixed-replace;boundary={BOUNDARY}')
        self.send_header('Cache-Control', 'no-cache')
        self.send_header('Connection', 'close')
        self.end_headers()
        seq = -1
        if cam.first_client_ns is None:
            cam.first_client_ns = time.monotonic_ns()
        cam.clients += 1
        try:
            while cam.serving:
                frame = cam.wait_frame(seq, 1.0)
                if frame is None:
                    continue
                seq, jpeg = frame
                self.wfile.write(f'--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n'
                                 f'Content-Length: {len(jpeg)}\r\n\r\n'.encode('ascii'))
                self.wfile.write(jpeg)
                self.wfile.write(b'\r\n')
        except (BrokenPipeError, ConnectionResetError, OSError):
            return
        finally:
            cam.clients -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    camera: 'VirtualCamera'


class VirtualCamera:
    """One camera of the emulator: render thread + MJPEG server (see module doc)."""

    def __init__(self, arm: Any, spec: CameraSpec, reality: OpticalReality, port: int = 0,
                 faults: CameraFaults | None = None, host: str = '127.0.0.1',
                 barcode: bool = False) -> None:
        self.arm = arm
        self.reality = reality
        self.faults = faults or CameraFaults()
        self.true_intrinsics = reality.intrinsics or spec.intrinsics()
        self.spec = spec
        self.optics = Optics(reality, spec.width, spec.height, self.true_intrinsics)
        # the render is the ideal pinhole of the *true* lens (padded for the lens to see
        # beyond it) at the *true* camera pose; the nominal ones are the spec's
        xyz, rpy = offset_pose(spec.xyz, spec.rpy, reality.pose_translation_m,
                               reality.pose_rotation_rad)
        w, h = self.optics.ideal_size
        self._render_spec = replace(
            spec, fovy_deg=None, width=w, height=h, xyz=xyz, rpy=rpy, encoding='rgb8',
            given_intrinsics=self.optics.ideal_intrinsics(self.true_intrinsics))
        self.host = host
        self.barcode = barcode  # frame number drawn in the top rows (simreal bench camera)
        self._cond = threading.Condition()
        self._frame: tuple[int, bytes] | None = None
        self.serving = True
        self.running = True
        self.frames = 0
        self.render_ns: list[int] = []
        self.capture_ns: dict[int, int] = {}  # seq -> monotonic capture time (last 100)
        self.ready = threading.Event()
        self.error = ''
        self.first_client_ns: int | None = None
        self.clients = 0  # open streams; with none, nothing is rendered
        self._server = self._listen(port)
        self.port = self._server.server_address[1]
        self._start_server()
        self.thread = threading.Thread(target=self._run, name=f'camera_{spec.name}',
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """Where OpenCV (or a browser) reads the stream."""
        return f'http://{self.host}:{self.port}/{self.spec.name}.mjpg'

    def _listen(self, port: int) -> _Server:
        server = _Server((self.host, port), _Handler)
        server.camera = self
        return server

    def _start_server(self) -> None:
        threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.1},
                         name='camera_http', daemon=True).start()

    def wait_frame(self, after_seq: int, timeout: float) -> tuple[int, bytes] | None:
        """Return the newest frame after ``after_seq``, waiting up to ``timeout`` s for one."""
        with self._cond:
            if self._frame is None or self._frame[0] <= after_seq:
                self._cond.wait(timeout)
            if self._frame is None or self._frame[0] <= after_seq or not self.serving:
                return None
            return self._frame

    def drop(self) -> None:
        """Close every stream and stop listening (the camera is gone)."""
        with self._cond:
            self.serving = False
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def restore(self) -> None:
        """Listen again on the same port."""
        for _ in range(50):  # the old socket may linger in TIME_WAIT for a moment
            try:
                self._server = self._listen(self.port)
                break
            except OSError:
                time.sleep(0.1)
        with self._cond:
            self.serving = True
        self._start_server()

    def _run(self) -> None:
        try:
            renderer = self.arm.sim.camera_renderer([self._render_spec])
            r = self.reality
            if not r.nominal_lighting:
                renderer.set_lighting(r.light_diffuse_scale, r.light_ambient_scale,
                                      rotation_matrix(r.light_rotation_rad))
            optics = self.optics
        except Exception as exc:  # noqa: BLE001 - reported by the emulator, the bus goes on
            self.error = repr(exc)
            self.ready.set()
            return
        self.ready.set()
        period = self.spec.period_ns
        latency = int(self.reality.latency_s * 1e9)
        encode = [int(cv2.IMWRITE_JPEG_QUALITY), self.reality.jpeg_quality]
        pending: list[tuple[int, int, bytes]] = []  # (serve at, seq, jpeg)
        seq = 0
        next_capture = time.monotonic_ns()
        dropped = False
        try:
            while self.running:
                now = time.monotonic_ns()
                since = (now - (self.first_client_ns or now)) / 1e9
                f = self.faults
                if (not dropped and f.drop_at is not None and self.first_client_ns
                        and since >= f.drop_at):
                    self.drop()
                    dropped = True
                if dropped and f.restore_at is not None and since >= f.restore_at:
                    self.restore()
                    dropped = False
                    f = self.faults = CameraFaults()
                if now >= next_capture and self.clients == 0:
                    next_capture = now + period
                elif now >= next_capture:
                    qpos = np.array(self.arm.sim.render_state())  # the instant this frame shows
                    captured = time.monotonic_ns()
                    rgb = renderer.render(qpos)[0]
                    assert rgb is not None
                    img = optics.apply(rgb)
                    if self.barcode:
                        draw_barcode(img, seq + 1)
                    ok, jpeg = cv2.imencode('.jpg', cv2.cvtColor(img, cv2.COLOR_RGB2BGR),
                                            encode)
                    done = time.monotonic_ns()
                    self.render_ns = self.render_ns[-99:] + [done - captured]
                    if ok:
                        seq += 1
                        pending.append((captured + latency, seq, jpeg.tobytes()))
                        self.capture_ns[seq] = captured
                        self.capture_ns.pop(seq - 100, None)
                    # frames at the camera's rate; a slow render slips instead of bursting
                    next_capture = max(next_capture + period, done)
                while pending and pending[0][0] <= time.monotonic_ns():
                    _at, s, jpeg_bytes = pending.pop(0)
                    with self._cond:
                        self._frame = (s, jpeg_bytes)
                        self.frames += 1
                        self._cond.notify_all()
                wake = min([next_capture] + [p[0] for p in pending[:1]])
                time.sleep(max(0.0, (wake - time.monotonic_ns()) / 1e9))
        finally:
            renderer.close()

    def close(self) -> None:
        """Stop rendering and serving."""
        self.running = False
        self.thread.join(timeout=5.0)
        if self.serving:
            self.drop()


BARCODE_BITS = 16
BARCODE_BLOCK = 8  # px: an 8x8 block survives JPEG at any quality used here


def draw_barcode(img: Image, value: int) -> None:
    """Write ``value`` (16 bits) as black/white 8x8 blocks along the top-left of ``img``."""
    b = BARCODE_BLOCK
    for bit in range(BARCODE_BITS):
        img[:b, bit * b:(bit + 1) * b] = 255 if value >> bit & 1 else 0


def read_barcode(img: Image) -> int:
    """Read the value :func:`draw_barcode` wrote (from the block centres)."""
    b = BARCODE_BLOCK
    grey = img if img.ndim == 2 else img.mean(axis=2)
    return sum(1 << bit for bit in range(BARCODE_BITS)
               if grey[b // 2, bit * b + b // 2] > 127)


def start_cameras(arm: Any, reality_path: str, port: int, faults: str,
                  echo: Any = print) -> list[VirtualCamera]:
    """Start the virtual cameras of ``arm``'s robot and print ``camera URL`` for each."""
    cams = arm.robot.cameras
    if not cams:
        raise ConfigError(str(arm.robot.source), 'cameras', 'a camera to serve (--camera)',
                          [])
    reality = OpticalReality.from_reality(reality_path) if reality_path else OpticalReality()
    fault_cfg = CameraFaults.parse(faults)
    out: list[VirtualCamera] = []
    for i, cam in enumerate(cams):
        try:
            vc = VirtualCamera(arm, cam, reality, port + i if port else 0, fault_cfg)
        except OSError as exc:
            for v in out:
                v.close()
            raise ConfigError('--camera-port', 'port', 'a free TCP port on 127.0.0.1',
                              port + i) from exc
        vc.ready.wait(30.0)
        if vc.error:
            for v in out + [vc]:
                v.close()
            raise ConfigError('--camera', cam.name, 'a camera the emulator can render '
                              '(MUJOCO_GL=egl or osmesa)', vc.error)
        out.append(vc)
        echo(f'camera {vc.url}')
    return out


def free_port() -> int:
    """Return a TCP port on loopback that is free now (for tests and benchmarks)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])
