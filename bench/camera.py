"""Camera benchmark (``simreal bench camera``): render cost, achieved rate, latency, side by side.

* ``sim``: the shipped camera (640x480, 30 Hz) rendered by the sim bridge's render thread from
  qpos snapshots offered by a 1 kHz physics loop: render ms per frame, achieved fps, and
  capture-to-publish latency (snapshot to the frame handed to the publisher);
* ``physics_loop``: the same 1 kHz ``mj_step`` loop alone, next to it with the render thread
  and with a render *process* (the alternative design): the loop's p99 period error and step
  rate as ratios to the loop alone, measured one after the other in this run;
* ``real``: the virtual robot's camera (render, optics, JPEG, MJPEG over HTTP) read through
  ``cv2.VideoCapture`` (FFMPEG) as the camera driver reads it: achieved fps and
  capture-to-read latency per frame (frames are identified by a barcode the virtual camera
  draws), with the reality's ``latency_s`` = 0, so the figure is the pipeline's own latency.
* ``visual_reality``: the cost of ``worn_camera``'s visual reality per frame at the camera's
  resolution, on the same arm state one after the other: the ideal render alone, the render
  as the reality needs it (padded for the lens, relit, from the offset pose), and each image
  stage of :class:`~simreal_ros.hardware.emulator.optics.Optics` (lens remap, blur, shot +
  read noise, gain and white balance); ratios to the ideal render.

The figures are what this machine achieves; they are not asserted anywhere.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from simreal_ros.core.robot import load_robot
from simreal_ros.sim.backend import SimBackend
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.scene import load_scene


def _stats_ms(values_ns: list[int]) -> dict[str, float]:
    if not values_ns:
        return {'p50_ms': float('nan'), 'p99_ms': float('nan'), 'n': 0}
    a = np.asarray(values_ns, dtype=np.float64) / 1e6
    return {'p50_ms': float(np.percentile(a, 50)), 'p99_ms': float(np.percentile(a, 99)),
            'n': int(a.size)}


def _physics_loop(sim: SimBackend, seconds: float, on_tick: Any = None) -> dict[str, float]:
    """A 1 kHz sleep-paced mj_step loop; returns its rate and p99 period error."""
    period = 1_000_000
    ticks: list[int] = []
    t_next = time.monotonic_ns()
    end = t_next + int(seconds * 1e9)
    while True:
        now = time.monotonic_ns()
        if now >= end:
            break
        sim.step(1)
        ticks.append(now)
        if on_tick is not None:
            on_tick(sim)
        t_next += period
        delay = t_next - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
    p = np.diff(np.asarray(ticks, dtype=np.int64))
    return {'rate_hz': float(1e9 / p.mean()),
            'period_err_p99_ms': float(np.percentile(np.abs(p - period), 99) / 1e6)}


#: the render-process alternative: renders the shipped camera at its rate for argv[1] s
_RENDER_PROCESS = """
import sys, time
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.scene import load_scene
robot = load_robot('simreal_arm')
sim = make_sim(robot, scene=load_scene('tabletop'))
renderer = sim.camera_renderer(robot.cameras)
print('ready', flush=True)
period, n = robot.cameras[0].period_ns, 0
t0 = next_t = time.monotonic_ns()
while time.monotonic_ns() - t0 < float(sys.argv[1]) * 1e9:
    renderer.render(sim.render_state())
    n += 1
    next_t = max(next_t + period, time.monotonic_ns())
    time.sleep(max(0.0, (next_t - time.monotonic_ns()) / 1e9))
print(n / float(sys.argv[1]), flush=True)
"""


def bench_sim(seconds: float) -> dict[str, Any]:
    from simreal_ros.sim.render_thread import RenderThread
    robot = load_robot('simreal_arm')
    sim = make_sim(robot, scene=load_scene('tabletop'))
    cam = robot.cameras[0]
    offered: dict[int, int] = {}
    latency: list[int] = []
    frames: list[int] = []

    def on_frame(stamp: int, _images: list) -> None:
        now = time.monotonic_ns()
        latency.append(now - offered.pop(stamp, now))
        frames.append(now)

    rt = RenderThread(lambda: sim.camera_renderer(robot.cameras), robot.cameras, on_frame,
                      lambda exc: None)

    def offer(s: SimBackend) -> None:
        if rt.offer(s.time_ns, s.render_state()):
            offered[s.time_ns] = time.monotonic_ns()

    # The first offer starts the render thread, which creates its GL context then (since
    # 2026-12-04): one frame before the loops, so that neither loop pays for the creation and
    # the thread waits idle beside the loop alone, as it does in the bridge. (Waiting on
    # `ready` without an offer ran out its whole 30 s timeout in every run.)
    offer(sim)
    deadline = time.monotonic() + 30
    while not frames and not rt.error and time.monotonic() < deadline:
        time.sleep(0.01)
    latency.clear()
    frames.clear()
    alone = _physics_loop(sim, seconds)
    with_thread = _physics_loop(sim, seconds, offer)
    rt.close()
    proc = subprocess.Popen([sys.executable, '-c', _RENDER_PROCESS, str(seconds + 1.0)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # 'ready': imported and the renderer built
    with_process = _physics_loop(sim, seconds)
    process_fps = float(proc.stdout.readline() or 'nan')
    proc.wait(30)
    span = (frames[-1] - frames[0]) / 1e9 if len(frames) > 1 else float('nan')
    return {
        'sim': {'camera': f'{cam.width}x{cam.height} at {cam.fps_hz:g} Hz',
                'render_ms': _stats_ms(rt.render_ns),
                'achieved_fps': (len(frames) - 1) / span if len(frames) > 1 else 0.0,
                'snapshots_dropped': rt.dropped,
                'capture_to_publish': _stats_ms(latency)},
        'physics_loop': {
            'alone': alone, 'render_thread': with_thread,
            'render_process': {**with_process, 'render_fps': process_fps},
            'period_err_p99_ratio_thread_over_alone':
                with_thread['period_err_p99_ms'] / max(alone['period_err_p99_ms'], 1e-6),
            'period_err_p99_ratio_process_over_alone':
                with_process['period_err_p99_ms'] / max(alone['period_err_p99_ms'], 1e-6),
            'rate_ratio_thread_over_alone': with_thread['rate_hz'] / alone['rate_hz'],
            'rate_ratio_process_over_alone': with_process['rate_hz'] / alone['rate_hz']},
    }


def bench_real(seconds: float) -> dict[str, Any]:
    import cv2

    from simreal_ros.core.camera_info import OpticalReality
    from simreal_ros.hardware.emulator.reality import VirtualArm
    from simreal_ros.hardware.emulator.virtual_camera import VirtualCamera, read_barcode
    robot = load_robot('simreal_arm')
    arm = VirtualArm(robot)
    vc = VirtualCamera(arm, robot.cameras[0], OpticalReality(noise_std=2.0), barcode=True)
    vc.ready.wait(30)
    stop = threading.Event()

    def physics() -> None:  # the emulator's arm keeps moving meanwhile (1 kHz steps)
        while not stop.is_set():
            arm.step(5)
            time.sleep(0.005)

    threading.Thread(target=physics, daemon=True).start()
    cap = cv2.VideoCapture(vc.url, cv2.CAP_FFMPEG,
                           [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 10000,
                            cv2.CAP_PROP_READ_TIMEOUT_MSEC, 10000])
    latency: list[int] = []
    reads: list[int] = []
    end = time.monotonic_ns() + int(seconds * 1e9)
    while cap.isOpened() and time.monotonic_ns() < end:
        ok, frame = cap.read()
        now = time.monotonic_ns()
        if not ok:
            break
        reads.append(now)
        captured = vc.capture_ns.get(read_barcode(frame))
        if captured is not None:
            latency.append(now - captured)
    cap.release()
    stop.set()
    vc.close()
    span = (reads[-1] - reads[0]) / 1e9 if len(reads) > 1 else float('nan')
    return {'camera': f'{robot.cameras[0].width}x{robot.cameras[0].height} MJPEG over HTTP',
            'render_optics_jpeg_ms': _stats_ms(vc.render_ns),
            'achieved_fps': (len(reads) - 1) / span if len(reads) > 1 else 0.0,
            'capture_to_read': _stats_ms(latency)}


def bench_visual_reality(frames: int) -> dict[str, Any]:
    from dataclasses import replace

    import cv2

    from simreal_ros.core.camera_info import OpticalReality
    from simreal_ros.hardware.emulator import optics as op
    robot = load_robot('simreal_arm')
    cam = robot.cameras[0]
    reality = OpticalReality.from_reality('worn_camera')
    sim = make_sim(robot, scene=load_scene('tabletop'))
    k = reality.intrinsics or cam.intrinsics()
    o = op.Optics(reality, cam.width, cam.height, k)
    xyz, rpy = op.offset_pose(cam.xyz, cam.rpy, reality.pose_translation_m,
                              reality.pose_rotation_rad)
    w, h = o.ideal_size
    ideal_spec = replace(cam, encoding='rgb8')
    true_spec = replace(cam, fovy_deg=None, width=w, height=h, xyz=xyz, rpy=rpy,
                        encoding='rgb8', given_intrinsics=o.ideal_intrinsics(k))
    ideal_r = sim.camera_renderer([ideal_spec])
    true_r = sim.camera_renderer([true_spec])
    true_r.set_lighting(reality.light_diffuse_scale, reality.light_ambient_scale,
                        op.rotation_matrix(reality.light_rotation_rad))
    state = np.array(sim.render_state())
    times: dict[str, list[int]] = {k: [] for k in ('ideal_render', 'reality_render', 'lens',
                                                   'blur', 'noise', 'gain_wb', 'optics_total')}

    def timed(key: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        out = fn(*args)
        times[key].append(time.perf_counter_ns() - t0)
        return out

    rng = np.random.default_rng(0)
    assert o.maps is not None
    for _ in range(frames):
        timed('ideal_render', ideal_r.render, state)
        img = timed('reality_render', true_r.render, state)[0]
        timed('optics_total', o.apply, img)
        lensed = timed('lens', cv2.remap, img, o.maps[0], o.maps[1], cv2.INTER_LINEAR)
        blurred = timed('blur', cv2.GaussianBlur, lensed, (0, 0), reality.blur_sigma_px)
        f = blurred.astype(np.float32)
        timed('noise', op.sensor_noise, f, reality.full_well_e, reality.noise_std, rng)
        timed('gain_wb', op.colour_gain, f, reality.gain, reality.white_balance)
    ideal_r.close()
    true_r.close()
    stats = {key: _stats_ms(v) for key, v in times.items()}
    base = stats['ideal_render']['p50_ms']
    return {'camera': f'{cam.width}x{cam.height} (render {w}x{h}, pad {o.pad} px)',
            **stats,
            'ratio_reality_render_over_ideal': stats['reality_render']['p50_ms'] / base,
            'ratio_optics_over_ideal_render': stats['optics_total']['p50_ms'] / base}


def run(quick: bool = False) -> dict[str, Any]:
    """Run every part and return the figures."""
    seconds = 1.5 if quick else 10.0
    out = bench_sim(seconds)
    out['real'] = bench_real(seconds)
    out['visual_reality'] = bench_visual_reality(10 if quick else 50)
    return out


if __name__ == '__main__':
    import json
    print(json.dumps(run(), indent=2))
