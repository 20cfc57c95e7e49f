"""Perception-gap curves: how an image model's answer degrades under each image perturbation.

``simreal perception-gap`` (and :func:`run_curves` from Python) measures where an image model
breaks, one perturbation of the latency injector at a time, at increasing strength:

    blur_sigma_px   Gaussian blur (px)                       0, 1, 2, 4, 8
    noise_std       additive Gaussian noise (grey levels)    0, 5, 10, 20, 40
    exposure_ev     exposure gain 2**ev (stops)              0, -1, -2, -3, +1, +2, +3
    jpeg_quality    JPEG re-compression quality              100, 50, 20, 10, 5, 1
    latency_s       the model sees the frame this much older 0, 0.033, 0.067, 0.133, 0.267

Blur, noise, exposure and JPEG are applied by the injector's own code
(:func:`simreal_ros.ros.perturb.perturb_image` on an ``ImageEffects``), so a curve is what the
model meets behind ``simreal launch latency:=...``; image latency delays the frame stream by
``round(latency_s * fps)`` frames (the model at step t sees frame t - d).

The task (:func:`render_target_episodes`): the robot's camera (MuJoCo render, at the
camera's resolution or scaled) looks at a free scene object (``tabletop``'s ``cube`` by
default) that moves at ``speed_m_s`` in a seeded random direction from a seeded random start
in a region of the table; the truth of each frame is the object centre's projection through
the camera's nominal pinhole (px). The model maps one frame to (u, v) in px of the frame it
was given; its error is the distance to the truth, and an episode succeeds when the error of
its last frame is within ``tolerance_px``. For each axis and level: success rate, mean and
max final error, and non-finite answers (a model that finds nothing). Every level of every
axis runs the same episodes, so the curves differ only by the perturbation.

The model (``--model``): TorchScript, ``forward(image) -> (1, 2)``, ``image`` float32
(1, 3, H, W), RGB in [0, 1]. A closed-loop image *policy* (joint commands from frames) is
not what this measures: its success under the same perturbations is
:mod:`simreal_ros.report.visual_gap`'s, and through the ROS graph ``simreal eval``'s
(:mod:`simreal_ros.jobs.visual_episodes`; docs/policy.md, "Perception-gap curves").
"""

from __future__ import annotations

from dataclasses import dataclass, field
import html
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import CameraSpec, RobotSpec
from simreal_ros.errors import SimrealError
from simreal_ros.latency.injection import ImageEffects, Perturbation
from simreal_ros.ros.perturb import perturb_image
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.scene import Scene

U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]
Model = Callable[[U8], Sequence[float]]

#: axis -> (levels in order of increasing harm from the first, unperturbed, level; label)
AXES: dict[str, tuple[tuple[float, ...], str]] = {
    'blur_sigma_px': ((0.0, 1.0, 2.0, 4.0, 8.0), 'blur sigma (px)'),
    'noise_std': ((0.0, 5.0, 10.0, 20.0, 40.0), 'noise std (grey levels)'),
    'exposure_ev': ((0.0, -1.0, -2.0, -3.0, 1.0, 2.0, 3.0), 'exposure (EV, gain 2**EV)'),
    'jpeg_quality': ((100.0, 50.0, 20.0, 10.0, 5.0, 1.0), 'JPEG quality'),
    'latency_s': ((0.0, 0.033, 0.067, 0.133, 0.267), 'image latency (s)'),
}


@dataclass(frozen=True)
class TargetEpisodes:
    """Rendered episodes: ``frames`` (E, T, H, W, 3) RGB, ``truth_px`` (E, T, 2) (u, v)."""

    frames: U8
    truth_px: F64
    fps_hz: float
    camera: str


def project(cam: CameraSpec, pos: F64, rot: F64, point: F64) -> tuple[float, float]:
    """Return pixel (u, v) of world ``point`` seen by ``cam`` at ``pos``, ``rot``.

    ``rot``'s columns are the optical frame's x right, y down, z forward in the world.
    """
    x, y, z = rot.T @ (point - pos)
    fx, fy, cx, cy = cam.intrinsics()
    return fx * x / z + cx, fy * y / z + cy


def render_target_episodes(robot: RobotSpec, scene: Scene, obj: str = 'cube',
                           episodes: int = 8, steps: int = 10, seed: int = 0,
                           size: tuple[int, int] | None = None, speed_m_s: float = 0.15,
                           region_m: tuple[float, float, float, float] = (0.16, 0.30, -0.12,
                                                                          0.12),
                           camera: str = '') -> TargetEpisodes:
    """Render the moving-object episodes (module doc) on ``robot``'s camera in MuJoCo.

    ``region_m`` is (x min, x max, y min, y max) of the start in the world; the object keeps
    its scene height. ``size`` (width, height) renders at another resolution (same lens).
    """
    if not robot.cameras:
        raise SimrealError(f'{robot.source}: the robot has no camera to render')
    cams = [c for c in robot.cameras if c.name == camera or not camera]
    if not cams:
        raise SimrealError(f'camera {camera!r}: not a camera of {robot.name} '
                           f'({", ".join(c.name for c in robot.cameras)})')
    cam = cams[0]
    cam = cam.scaled(*(size or (cam.width, cam.height)))
    sim = make_sim(robot, scene=scene)
    try:
        idx = sim.object_position_index(obj)
    except ValueError as exc:
        raise SimrealError(f'--object {obj!r}: {exc}') from None
    base = np.array(sim.render_state(), dtype=np.float64)
    height = float(base[idx + 2])
    rng = np.random.default_rng(seed)
    renderer = sim.camera_renderer([cam])
    frames = np.zeros((episodes, steps, cam.height, cam.width, 3), np.uint8)
    truth = np.zeros((episodes, steps, 2))
    dt = 1.0 / cam.fps_hz
    try:
        for e in range(episodes):
            start = np.array([rng.uniform(region_m[0], region_m[1]),
                              rng.uniform(region_m[2], region_m[3]), height])
            heading = rng.uniform(-math.pi, math.pi)
            vel = speed_m_s * np.array([math.cos(heading), math.sin(heading), 0.0])
            for t in range(steps):
                state = base.copy()
                p = start + vel * t * dt
                state[idx:idx + 3] = p
                img = renderer.render(state)[0]
                assert img is not None
                frames[e, t] = img
                pos, rot = renderer.pose(0)
                truth[e, t] = project(cam, pos, rot, p)
    finally:
        renderer.close()
    return TargetEpisodes(frames, truth, cam.fps_hz, cam.name)


def perturb_frame(frame: U8, effects: ImageEffects, rng: np.random.Generator) -> U8:
    """Apply the injector's image perturbation to one rgb8 frame (the injector's code)."""
    h, w, _ = frame.shape
    msg = SimpleNamespace(encoding='rgb8', height=h, width=w, step=w * 3,
                          data=frame.tobytes(), is_bigendian=0)
    perturb_image(msg, Perturbation(image=effects), rng)
    return np.frombuffer(msg.data, np.uint8).reshape(h, w, 3)


def effects_of(axis: str, level: float) -> ImageEffects | None:
    """Return the injector's ``perturb.image`` for ``level`` of ``axis`` (None: nothing)."""
    if axis == 'blur_sigma_px':
        return ImageEffects(blur_sigma_px=level) if level > 0 else None
    if axis == 'noise_std':
        return ImageEffects(noise_std=level) if level > 0 else None
    if axis == 'exposure_ev':
        return ImageEffects(gain=2.0 ** level) if level != 0 else None
    if axis == 'jpeg_quality':
        return ImageEffects(jpeg_quality=int(level))
    if axis == 'latency_s':
        return None
    raise SimrealError(f'axis {axis!r}: expected one of {", ".join(AXES)}')


@dataclass
class CurvePoint:
    """One level of one axis over every episode."""

    axis: str
    level: float
    successes: int
    episodes: int
    final_error_mean_px: float
    final_error_max_px: float
    not_found: int
    errors_px: list[float] = field(default_factory=list)

    @property
    def success_rate(self) -> float:
        """Successes / episodes."""
        return self.successes / self.episodes


def run_curves(model: Model, eps: TargetEpisodes, tolerance_px: float,
               axes: Mapping[str, Sequence[float]] | None = None, seed: int = 0
               ) -> list[CurvePoint]:
    """Run ``model`` on every episode at every level of every axis (module doc)."""
    axes = axes if axes is not None else {a: levels for a, (levels, _) in AXES.items()}
    out: list[CurvePoint] = []
    n_eps, steps = eps.frames.shape[:2]
    for axis, levels in axes.items():
        for li, level in enumerate(levels):
            fx = effects_of(axis, float(level))
            delay = int(round(float(level) * eps.fps_hz)) if axis == 'latency_s' else 0
            if delay >= steps:
                raise SimrealError(f'latency_s {level}: {delay} frames, the episodes have '
                                   f'{steps}: render more steps')
            rng = np.random.default_rng([seed, list(AXES).index(axis), li])
            errors = []
            for e in range(n_eps):
                frame = eps.frames[e, steps - 1 - delay]
                if fx is not None:
                    frame = perturb_frame(frame, fx, rng)
                u, v = (float(x) for x in model(frame))
                tu, tv = eps.truth_px[e, steps - 1]
                errors.append(math.hypot(u - tu, v - tv))
            finite = [x for x in errors if math.isfinite(x)]
            ok = sum(x <= tolerance_px for x in finite)
            out.append(CurvePoint(axis, float(level), ok, n_eps,
                                  float(np.mean(finite)) if finite else float('nan'),
                                  float(np.max(finite)) if finite else float('nan'),
                                  n_eps - len(finite), errors))
    return out


def torchscript_model(path: str | Path) -> Model:
    """Load a TorchScript ``(1, 3, H, W) RGB in [0, 1] -> (1, 2) px`` model (one thread)."""
    import torch
    torch.set_num_threads(1)
    try:
        net = torch.jit.load(str(path), map_location='cpu')  # type: ignore[no-untyped-call]
        net.eval()
    except (RuntimeError, ValueError, OSError) as exc:
        raise SimrealError(f'--model {path}: not a TorchScript file ({exc})') from None

    def call(frame: U8) -> Sequence[float]:
        x = torch.from_numpy(np.array(frame)).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            y: list[float] = net(x).reshape(-1).tolist()
        if len(y) != 2:
            raise SimrealError(f'--model {path}: expected 2 outputs (u, v), got {len(y)}')
        return y

    return call


def table(points: Sequence[CurvePoint]) -> list[dict[str, Any]]:
    """Rows of the results table (JSON-ready)."""
    return [{'axis': p.axis, 'level': p.level, 'successes': p.successes,
             'episodes': p.episodes, 'success_rate': p.success_rate,
             'final_error_mean_px': p.final_error_mean_px,
             'final_error_max_px': p.final_error_max_px, 'not_found': p.not_found}
            for p in points]


def curves_png(points: Sequence[CurvePoint], tolerance_px: float) -> bytes:
    """One panel per axis: success rate (left axis) and mean final error (right), PNG."""
    from simreal_ros.report.figures import pyplot, to_png
    plt = pyplot()
    axes = list(dict.fromkeys(p.axis for p in points))
    fig, panels = plt.subplots(1, len(axes), figsize=(3.4 * len(axes), 3.0), squeeze=False)
    for ax, axis in zip(panels[0], axes, strict=True):
        pts = sorted((p for p in points if p.axis == axis), key=lambda p: p.level)
        x = [p.level for p in pts]
        ax.plot(x, [p.success_rate for p in pts], 'o-', color='tab:blue')
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(AXES.get(axis, ((), axis))[1])
        ax.set_ylabel('success rate', color='tab:blue')
        err = ax.twinx()
        err.plot(x, [p.final_error_mean_px for p in pts], 's--', color='tab:red')
        err.axhline(tolerance_px, color='tab:red', lw=0.6, ls=':')
        err.set_ylabel('final error mean (px)', color='tab:red')
        if axis == 'jpeg_quality':
            ax.invert_xaxis()  # lower quality = stronger
    fig.tight_layout()
    return bytes(to_png(fig))


def write_html(path: str | Path, points: Sequence[CurvePoint], tolerance_px: float,
               about: Mapping[str, Any]) -> Path:
    """Write the report: settings, the curves figure and the table, one HTML file."""
    import base64
    out = Path(path)
    png = base64.b64encode(curves_png(points, tolerance_px)).decode('ascii')
    rows = ''.join(
        f'<tr><td>{html.escape(r["axis"])}</td><td>{r["level"]:g}</td>'
        f'<td>{r["successes"]}/{r["episodes"]}</td><td>{r["final_error_mean_px"]:.2f}</td>'
        f'<td>{r["final_error_max_px"]:.2f}</td><td>{r["not_found"]}</td></tr>'
        for r in table(points))
    settings = ''.join(f'<li>{html.escape(str(k))}: {html.escape(str(v))}</li>'
                       for k, v in about.items())
    out.write_text(
        '<!doctype html><html><head><meta charset="utf-8"><title>perception gap</title>'
        '</head><body><h1>Perception-gap curves</h1>'
        f'<ul>{settings}<li>success: final error &le; {tolerance_px:g} px</li></ul>'
        f'<img alt="curves" src="data:image/png;base64,{png}">'
        '<table border="1" cellpadding="3"><tr><th>axis</th><th>level</th><th>success</th>'
        '<th>final error mean (px)</th><th>max (px)</th><th>not found</th></tr>'
        f'{rows}</table></body></html>', encoding='utf-8')
    return out
