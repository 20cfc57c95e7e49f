"""Camera frames from the simulation, rendered off the physics thread, for any engine.

:class:`RenderThread` is what the sim bridge uses (through ``ros.camera.SimCameras``, which
offers states only while a camera topic has a subscriber). The physics thread calls
:meth:`RenderThread.offer` with each published state (the engine's
:meth:`~simreal_ros.sim.backend.SimBackend.render_state`); when a camera's next frame is due
(by the state's stamp), it copies that state (a few dozen floats) and returns at once. The
render thread renders the latest such snapshot with the engine's renderer
(:meth:`~simreal_ros.sim.backend.SimBackend.camera_renderer`: its own engine data and GL
context, created on that thread when the first snapshot arrives) and hands the images,
stamped with the stamp of the state they show, to a callback. A snapshot that arrives while
the previous one is still rendering replaces it (counted as ``dropped``): rendering never
holds up physics.

Thread rather than process: MuJoCo's ``mjr_render`` and ``mj_kinematics`` release the GIL (a
pure Python counting thread kept 1.2x its solo rate while the main thread rendered 640x480
here), so a render thread costs the physics loop only the CPU it takes, which a render process
would take as well; ``bench/camera.py`` measures the physics loop's step period with and
without it.

The renderer places each camera's optical frame (z forward, x right, y down) in ``world`` or
on its parent link and sets the projection from the camera's intrinsics (fx, fy, cx, cy; pixel
centres at integer coordinates, as ROS and OpenCV count them), so the rendered pixels agree
with ``camera_info``. 640x480 took 10-45 ms a frame on this project's 2 shared CPU cores
(``simreal bench camera``), so 30 Hz is reached only on an idle core.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import CameraSpec
from simreal_ros.core.timing import PeriodStats

FloatArray = npt.NDArray[np.float64]
Image = npt.NDArray[np.uint8]
#: (stamp_ns, images in the renderer's camera order, None for a camera not due this time)
FrameCallback = Callable[[int, list[Image | None]], None]


class CameraRenderer(Protocol):
    """What an engine's renderer does; one thread creates it, uses it and closes it."""

    def render(self, state: FloatArray, which: Sequence[bool] | None = None
               ) -> list[Image | None]:
        """Render every camera (or those with ``which[i]``) at engine state ``state``."""

    def pose(self, i: int) -> tuple[FloatArray, FloatArray]:
        """Return camera ``i``'s world position and rotation at the last rendered state.

        The rotation's columns are the optical frame's x right, y down, z forward.
        """

    def close(self) -> None:
        """Free the renderer's resources (GL contexts)."""


def to_encoding(rgb: Image, encoding: str) -> Image:
    """Convert an (h, w, 3) RGB render to the camera's encoding (rgb8, bgr8, mono8)."""
    if encoding == 'rgb8':
        return rgb
    if encoding == 'bgr8':
        return np.ascontiguousarray(rgb[:, :, ::-1])
    # ITU-R BT.601 luma, as OpenCV's COLOR_RGB2GRAY
    grey = rgb @ np.array([0.299, 0.587, 0.114])
    mono: Image = np.clip(grey + 0.5, 0, 255).astype(np.uint8)
    return mono


class RenderThread:
    """Renders the cameras from snapshots offered by the physics thread (see module doc)."""

    def __init__(self, make_renderer: Callable[[], CameraRenderer],
                 cameras: Sequence[CameraSpec], on_frame: FrameCallback,
                 on_error: Callable[[BaseException], None]) -> None:
        self.make_renderer = make_renderer
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
        # started by the first offer: a graph that never looks at the images never creates a
        # GL context (an EGL context being created while the process exits killed it with
        # SIGSEGV in 2 of 10 exits 80 ms into the ~150 ms creation here, 7 of 10 at 120 ms)
        self.thread = threading.Thread(target=self._run, name='camera_render', daemon=True)

    def offer(self, stamp_ns: int, state: FloatArray) -> bool:
        """Take a snapshot if a camera is due at ``stamp_ns``; never blocks on rendering."""
        due = [stamp_ns >= t for t in self.next_due]
        if not any(due):
            return False
        for i, is_due in enumerate(due):
            if is_due:
                period = self.cameras[i].period_ns
                # the next frame is one period on, or at once after a long gap (pause, reset)
                self.next_due[i] = max(self.next_due[i] + period, stamp_ns - period // 2)
        snap = (stamp_ns, np.array(state, dtype=np.float64), due)
        with self._cond:
            if not self.running:
                return False
            if self.thread.ident is None:
                self.thread.start()
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
            renderer = self.make_renderer()
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
                    stamp, state, which = self._latest
                    self._latest = None
                t0 = time.monotonic_ns()
                images = renderer.render(state, which)
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
        if self.thread.ident is not None:
            self.thread.join(timeout=5.0)
