"""The OpenCV camera driver over real DDS, on the virtual robot's MJPEG camera (no hardware)."""

from __future__ import annotations

from pathlib import Path
import time

import cv2
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, Image
from startup import start_up_error
import yaml

from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.emulator.virtual_camera import free_port
from simreal_ros.ros import messages
from simreal_ros.ros.image_publisher import IMAGE

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
OK, ERROR = DiagnosticStatus.OK, DiagnosticStatus.ERROR
CALIBRATION = """image_width: 160
image_height: 120
camera_name: camera
camera_matrix: {rows: 3, cols: 3, data: [151.0, 0, 80.5, 0, 152.0, 58.0, 0, 0, 1]}
distortion_model: plumb_bob
distortion_coefficients: {rows: 1, cols: 5, data: [-0.08, 0.01, 0, 0, 0]}
rectification_matrix: {rows: 3, cols: 3, data: [1, 0, 0, 0, 1, 0, 0, 0, 1]}
projection_matrix: {rows: 3, cols: 4, data: [150.0, 0, 80.0, 0, 0, 151.0, 58.5, 0, 0, 0, 1, 0]}
"""


@pytest.fixture
def small_robot(tmp_path: Path) -> str:
    """simreal_arm with its camera at 160x120, 15 Hz, and a calibration file for it."""
    data = yaml.safe_load((REPO / 'config/robots/simreal_arm.yaml').read_text())
    data['urdf'] = str(REPO / 'urdf/simreal_arm.urdf')
    (tmp_path / 'ost.yaml').write_text(CALIBRATION)
    data['cameras'][0].update(width=160, height=120, fps_hz=15.0,
                              calibration=str(tmp_path / 'ost.yaml'))
    path = tmp_path / 'arm160.yaml'
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    reality = tmp_path / 'reality.yaml'
    reality.write_text(yaml.safe_dump({'robot': 'simreal_arm', 'camera': {
        'gain': 1.2, 'white_balance': [1.05, 1.0, 0.9], 'noise_std': 1.5,
        'blur_sigma_px': 0.5, 'distortion': [-0.08, 0.01, 0.0, 0.0, 0.0], 'latency_s': 0.03,
        'intrinsics': {'fx': 151.0, 'fy': 152.0, 'cx': 80.5, 'cy': 58.0},
        'full_well_e': 6000, 'lighting': {'diffuse_scale': 0.8, 'rotation_rad': [0.1, 0, 0]},
        'pose_offset': {'translation_m': [0.004, 0, 0], 'rotation_rad': [0, 0.01, 0]}}}))
    return str(path)


def camera_emulator(tmp_path: Path, env: dict, robot: str, faults: str = '') -> EmulatorProcess:
    emu = EmulatorProcess(link=tmp_path / 'ttyDXL', robot=robot,
                          reality=str(tmp_path / 'reality.yaml'), env=env)
    emu.cmd += ['--camera', '--camera-port', str(free_port())]
    if faults:
        emu.cmd += ['--camera-faults', faults]
    return emu


def camera_url(emu: EmulatorProcess) -> str:
    lines = [ln for ln in emu.lines if ln.startswith('camera ')]
    assert len(lines) == 1, emu.lines
    return lines[0].split(' ', 1)[1]


def statuses(diags: list) -> list:
    return [st for _t, arr in diags for st in arr.status if st.name.endswith('camera camera')]


def values(st) -> dict:
    return {kv.key: kv.value for kv in st.values}


def test_driver_publishes_the_virtual_camera_through_opencv(
        ros_env, tmp_path, small_robot, start_node, ros_client):
    images = ros_client.collect(Image, 'camera/image_raw', IMAGE)
    infos = ros_client.collect(CameraInfo, 'camera/camera_info', IMAGE)
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with camera_emulator(tmp_path, ros_env, small_robot) as emu:
        url = camera_url(emu)
        assert url.startswith('http://127.0.0.1:') and url.endswith('/camera.mjpg')
        start_node('camera_driver', robot=small_robot, device=url, diagnostics_period_s=0.5)
        ros_client.wait_for(lambda: len(images) >= 10 and len(infos) >= 10, 60, 'frames')
        ros_client.wait_for(lambda: values(statuses(diags)[-1])['frames'] != '0', 10,
                            'diagnostics with frames')
        st = values(statuses(diags)[-1])  # while the camera still streams
    img = images[-1][1]
    assert (img.width, img.height, img.encoding, img.step) == (160, 120, 'rgb8', 480)
    assert img.header.frame_id == 'camera_optical_frame'
    pixels = np.frombuffer(bytes(img.data), np.uint8).reshape(120, 160, 3)
    assert pixels.std() > 3.0, 'a rendered arm, not a blank frame'
    info_stamps = {messages.stamp_to_ns(m.header.stamp): m for _t, m in infos}
    info = info_stamps[messages.stamp_to_ns(img.header.stamp)]
    # camera_info is the calibration file's (not the spec's nominal pinhole)
    assert list(info.k) == [151.0, 0, 80.5, 0, 152.0, 58.0, 0, 0, 1]
    assert list(info.d) == [-0.08, 0.01, 0, 0, 0]
    assert list(info.p)[0] == 150.0
    stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in images]
    assert np.all(np.diff(stamps) > 0)
    # stamped at capture: before the time it reached this client, by less than a second
    recv_wall = time.time_ns() - (time.monotonic_ns() - images[-1][0])
    assert 0 < recv_wall - stamps[-1] < 1_000_000_000
    assert (st['state'], st['device_width'], st['device_height']) == ('streaming', '160',
                                                                      '120')
    assert (st['capture_latency_source'], st['reconnects']) == ('none', '0')


def test_driver_reconnects_after_the_stream_drops(ros_env, tmp_path, small_robot, start_node,
                                                  ros_client):
    images = ros_client.collect(Image, 'camera/image_raw', IMAGE)
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with camera_emulator(tmp_path, ros_env, small_robot, 'drop_at=6,restore_at=8.5') as emu:
        start_node('camera_driver', robot=small_robot, device=camera_url(emu),
                   reconnect_period_s=0.5, diagnostics_period_s=0.25)

        def after_streaming() -> list:
            """The statuses from the first one that reports streamed frames on."""
            sts = statuses(diags)
            start = next((i for i, st in enumerate(sts) if values(st)['state'] == 'streaming'
                          and values(st)['frames'] != '0'), len(sts))
            return sts[start:]

        ros_client.wait_for(lambda: any(st.level == ERROR and 'disconnected' in st.message
                                        for st in after_streaming()), 60,
                            'streaming, then ERROR disconnected')
        ros_client.wait_for(lambda: after_streaming()[-1].level == OK, 60, 'streaming again')
        seen = after_streaming()  # before the emulator (and its camera) stops
        gone = next(i for i, st in enumerate(seen) if st.level == ERROR)
        n = len(images)
        ros_client.wait_for(lambda: len(images) > n + 3, 30, 'frames after the return')
        final = values(statuses(diags)[-1])
    before = max(int(values(st)['frames']) for st in seen[:gone])
    assert int(final['frames']) > before
    assert (final['state'], final['reconnects']) == ('streaming', '1')
    assert int(final['opens_failed']) >= 1  # it kept trying while the camera was gone


def test_dead_device_is_reported_not_fatal(start_node, ros_client):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    images = ros_client.collect(Image, 'camera/image_raw', IMAGE)
    drv = start_node('camera_driver', device=f'http://127.0.0.1:{free_port()}/camera.mjpg',
                     reconnect_period_s=0.3, diagnostics_period_s=0.25)
    ros_client.wait_for(lambda: int(values(statuses(diags)[-1])['opens_failed']) >= 2, 30,
                        'failed opens reported')
    st = statuses(diags)[-1]
    assert st.level == ERROR and st.message.startswith('disconnected: cannot open http://')
    assert not images
    assert drv.proc.poll() is None, 'the driver keeps retrying'


def test_no_device_is_one_clear_error(start_node):
    drv = start_node('camera_driver')  # simreal_arm's camera has device ''
    line = start_up_error(drv)
    assert 'device: expected a V4L2 index or path or a stream URL for camera camera' in line


def test_optics_distort_as_opencv_projects() -> None:
    from simreal_ros.core.camera_info import OpticalReality
    from simreal_ros.hardware.emulator.virtual_camera import Optics
    k = (151.0, 152.0, 80.5, 58.0)
    dist = (-0.2, 0.05, 0.001, -0.002, 0.0)
    optics = Optics(OpticalReality(distortion=dist), 160, 120, k)
    w, h = optics.ideal_size  # padded: the lens sees beyond the pinhole's frame
    ideal = np.zeros((h, w, 3), np.uint8)
    ideal[30 + optics.pad, 130 + optics.pad] = 255  # one bright pixel, off-centre
    out = optics.apply(ideal)
    ys, xs = np.nonzero(out[:, :, 0])
    w = out[ys, xs, 0].astype(float)
    u, v = (xs * w).sum() / w.sum(), (ys * w).sum() / w.sum()
    kmat = np.array([[k[0], 0, k[2]], [0, k[1], k[3]], [0, 0, 1]])
    ray = np.array([[(130 - k[2]) / k[0], (30 - k[3]) / k[1], 1.0]])
    expected, _ = cv2.projectPoints(ray, np.zeros(3), np.zeros(3), kmat, np.array(dist))
    assert abs(u - expected[0, 0, 0]) < 0.5 and abs(v - expected[0, 0, 1]) < 0.5
    bright = Optics(OpticalReality(gain=1.5, white_balance=(1.0, 0.5, 1.0)), 4, 4, k)
    assert bright.apply(np.full((4, 4, 3), 100, np.uint8))[0, 0].tolist() == [150, 75, 150]
