"""Offscreen MuJoCo rendering of the robot spec's cameras, off the physics thread.

:class:`CameraRenderer` renders each :class:`~simreal_ros.core.robot.CameraSpec` of a robot
from a joint-position snapshot: the camera's optical frame (z forward, x right, y down) is placed
in ``world`` or on its parent link, and the OpenGL frustum is set from the camera's intrinsics
(fx, fy, cx, cy; pixel centres at integer coordinates, as ROS and OpenCV count them), so the
rendered pixels agree with ``camera_info``. Nothing is added to the model: the scene camera of
``mjv_updateScene`` is overwritten before ``mjr_render``.

:class:`RenderThread` is what the sim bridge uses (through ``ros.camera.SimCameras``, which
offers states only while a camera topic has a subscriber). The physics thread calls
:meth:`offer` with each published state; when a camera's next frame is due (by the state's
stamp), it copies
``qpos`` (a few dozen floats) and returns at once. The render thread renders the latest such
snapshot with its own ``MjData`` and GL context and hands the images, stamped with the stamp of
the state they show, to a callback. A snapshot that arrives while the previous one is still
rendering replaces it (counted as ``dropped``): rendering never holds up physics.

Thread rather than process: ``mjr_render`` and ``mj_kinematics`` release the GIL (a pure Python
counting thread kept 1.2x its solo rate while the main thread rendered 640x480 here), so a
render thread costs the physics loop only the CPU it takes, which a render process would take
as well; ``bench/camera.py`` measures the physics loop's step period with and without it.

Rendering uses ``MUJOCO_GL`` (default ``egl``, falling back to ``osmesa``): both render in
software where no GPU is present. 640x480 took 10-45 ms a frame on this project's 2 shared CPU
cores (``simreal bench camera``), so 30 Hz is reached only on an idle core.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
import time
from typing import Callable, Sequence

import mujoco
import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import CameraSpec
from simreal_ros.core.timing import PeriodStats

FloatArray = npt.NDArray[np.float64]
Image = npt.NDArray[np.uint8]
#: (stamp_ns, images in the renderer's camera order, None for a camera not due this time)
FrameCallback = Callable[[int, list[Image | None]], None]


def rpy_matrix(rpy: Sequence[float]) -> FloatArray:
    """Rotation matrix of ROS roll-pitch-yaw (fixed axes X, then Y, then Z)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _select_gl() -> None:
    """Make MuJoCo's Renderer use EGL (then OSMesa) unless ``MUJOCO_GL`` names a backend.

    MuJoCo picks its GL backend from ``MUJOCO_GL`` when it is first imported, and without it
    uses GLFW, which needs a display. The nodes import mujoco long before they know they will
    render, so the choice is made here instead, where it is needed.
    """
    if os.environ.get('MUJOCO_GL'):
        return
    from mujoco.rendering.classic import gl_context
    for backend in ('egl', 'osmesa'):
        try:
            module = importlib.import_module(f'mujoco.{backend}')
            module.GLContext(1, 1).free()
        except Exception:  # noqa: BLE001, S112 - not available here: try the next one
            continue
        gl_context.GLContext = module.GLContext
        os.environ['MUJOCO_GL'] = backend
        return


def to_encoding(rgb: Image, encoding: str) -> Image:
    """Convert an (h, w, 3) RGB render to the camera's encoding (rgb8, bgr8, mono8)."""
    if encoding == 'rgb8':
        return rgb
    if encoding == 'bgr8':
        return np.ascontiguousarray(rgb[:, :, ::-1])
    # ITU-R BT.601 luma, as OpenCV's COLOR_RGB2GRAY
    grey = rgb @ np.array([0.299, 0.587, 0.114])
    return np.clip(grey + 0.5, 0, 255).astype(np.uint8)


class CameraRenderer:
    """Renders cameras of a robot spec in a MuJoCo model; use it from one thread only."""

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[CameraSpec]) -> None:
        _select_gl()
        self.model = model
        self.cameras = list(cameras)
        self.data = mujoco.MjData(model)
        self.body = [-1 if c.parent == 'world' else
                     mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, c.parent)
                     for c in self.cameras]
        for c, b in zip(self.cameras, self.body, strict=True):
            if c.parent != 'world' and b < 0:
                raise ValueError(f'camera {c.name}: parent link {c.parent!r} is not a body of '
                                 f'the model')
        self.local = [(np.asarray(c.xyz, dtype=np.float64), rpy_matrix(c.rpy))
                      for c in self.cameras]
        # one renderer per resolution; the GL context is current in the creating thread
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        for c in self.cameras:
            key = (c.height, c.width)
            if key not in self._renderers:
                self._renderers[key] = self._make_renderer(c.height, c.width)
        self._vcam = mujoco.MjvCamera()
        self.near = float(model.vis.map.znear * model.stat.extent)
        self.far = float(model.vis.map.zfar * model.stat.extent)

    def _make_renderer(self, height: int, width: int) -> mujoco.Renderer:
        m = self.model
        # the offscreen buffer must hold the image: grow it in the model (render-only fields)
        m.vis.global_.offwidth = max(m.vis.global_.offwidth, width)
        m.vis.global_.offheight = max(m.vis.global_.offheight, height)
        return mujoco.Renderer(m, height, width)

    def pose(self, i: int) -> tuple[FloatArray, FloatArray]:
        """World position and rotation (columns x right, y down, z forward) of camera ``i``."""
        xyz, rot = self.local[i]
        b = self.body[i]
        if b < 0:
            return xyz, rot
        body_rot = self.data.xmat[b].reshape(3, 3)
        return self.data.xpos[b] + body_rot @ xyz, body_rot @ rot

    def render(self, qpos: FloatArray, which: Sequence[bool] | None = None
               ) -> list[Image | None]:
        """Render every camera (or those with ``which[i]``) at joint positions ``qpos``."""
        m, d = self.model, self.data
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        out: list[Image | None] = []
        for i, cam in enumerate(self.cameras):
            if which is not None and not which[i]:
                out.append(None)
                continue
            r = self._renderers[(cam.height, cam.width)]
            r.update_scene(d, self._vcam)
            pos, rot = self.pose(i)
            n = self.near
            fx, fy, cx, cy = cam.intrinsics()
            # frustum at the near plane; pixel u spans [u - 0.5, u + 0.5]
            left, right = n * (-0.5 - cx) / fx, n * (cam.width - 0.5 - cx) / fx
            top, bottom = n * (cy + 0.5) / fy, -n * (cam.height - 0.5 - cy) / fy
            for gl in r.scene.camera:
                gl.pos[:] = pos
                gl.forward[:] = rot[:, 2]
                gl.up[:] = -rot[:, 1]
                gl.frustum_near, gl.frustum_far = n, self.far
                gl.frustum_center = 0.5 * (left + right)
                gl.frustum_width = 0.5 * (right - left)
                gl.frustum_top, gl.frustum_bottom = top, bottom
                gl.orthographic = 0
            out.append(to_encoding(r.render(), cam.encoding))
        return out

    def close(self) -> None:
        """Free the GL contexts."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()


class RenderThread:
    """Renders the cameras from snapshots offered by the physics thread (see module doc)."""

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[CameraSpec],
                 on_frame: FrameCallback, on_error: Callable[[BaseException], None]) -> None:
        self.model = model
        self.cameras = list(cameras)
        self.on_frame = on_frame
        self.on_error = on_error
        self.next_due = [0] * len(self.cameras)  # stamp at which each camera is due next
        self._latest: tuple[int, FloatArray, list[bool]] | None = None
        self._cond = threading.Condition()
        self.running = True
        self.offered = 0
        self.dropped = 0
        self.rendered = 0
        self.render_ns: list[int] = []  # the last 100 render durations
        self.frame_stats = [PeriodStats(c.period_ns) for c in self.cameras]
        self.error = ''
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name='camera_render', daemon=True)
        self.thread.start()

    def offer(self, stamp_ns: int, qpos: FloatArray) -> bool:
        """Take a snapshot if a camera is due at ``stamp_ns``; never blocks on rendering."""
        due = [stamp_ns >= t for t in self.next_due]
        if not any(due):
            return False
        for i, is_due in enumerate(due):
            if is_due:
                period = self.cameras[i].period_ns
                # the next frame is one period on, or at once after a long gap (pause, reset)
                self.next_due[i] = max(self.next_due[i] + period, stamp_ns - period // 2)
        snap = (stamp_ns, np.array(qpos, dtype=np.float64), due)
        with self._cond:
            if self._latest is not None:
                self.dropped += 1
                old = self._latest[2]
                snap = (stamp_ns, snap[1], [a or b for a, b in zip(due, old, strict=True)])
            self._latest = snap
            self.offered += 1
            self._cond.notify()
        return True

    def _run(self) -> None:
        try:
            renderer = CameraRenderer(self.model, self.cameras)
        except Exception as exc:  # noqa: BLE001 - no GL: reported, physics goes on
            self.error = f'cannot render: {exc!r}'
            self.ready.set()
            self.on_error(exc)
            return
        self.ready.set()
        try:
            while True:
                with self._cond:
                    while self.running and self._latest is None:
                        self._cond.wait(0.5)
                    if not self.running:
                        return
                    assert self._latest is not None
                    stamp, qpos, which = self._latest
                    self._latest = None
                t0 = time.monotonic_ns()
                images = renderer.render(qpos, which)
                t1 = time.monotonic_ns()
                self.render_ns = self.render_ns[-99:] + [t1 - t0]
                self.rendered += 1
                for i, img in enumerate(images):
                    if img is not None:
                        self.frame_stats[i].tick(t1)
                self.on_frame(stamp, images)
        except Exception as exc:  # noqa: BLE001 - reported on the node's diagnostics
            self.error = repr(exc)
            self.on_error(exc)
        finally:
            renderer.close()

    def values(self) -> dict[str, object]:
        """Figures for ``/diagnostics``."""
        r = sorted(self.render_ns)
        out: dict[str, object] = {
            'camera_snapshots': self.offered, 'camera_renders': self.rendered,
            'camera_snapshots_dropped': self.dropped,
            'camera_render_ms_p50': r[len(r) // 2] / 1e6 if r else float('nan'),
            'camera_render_ms_max': r[-1] / 1e6 if r else float('nan'),
        }
        for cam, st in zip(self.cameras, self.frame_stats, strict=True):
            out[f'{cam.name}.rate_hz'] = st.summary().get('rate_hz', float('nan'))
        if self.error:
            out['camera_error'] = self.error
        return out

    def close(self) -> None:
        """Stop the render thread (it finishes the frame it is on)."""
        with self._cond:
            self.running = False
            self._cond.notify()
        self.thread.join(timeout=5.0)
