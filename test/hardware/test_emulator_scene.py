"""``simreal emulate --scene``: the virtual robot's scene, placed through stdin, on its camera."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import EmulatorError
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.policy.visual_task import camera_pixel


def red_at(cap: cv2.VideoCapture, point: np.ndarray, deadline_s: float = 10.0) -> bool:
    """Whether a frame read within the deadline shows the ball's red at ``point``."""
    cam = load_robot('simreal_arm').cameras[0]
    u, v, _z = camera_pixel(cam, point)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        ok, bgr = cap.read()
        assert ok, 'the virtual camera stopped'
        b, g, r = (int(c) for c in bgr[int(round(v)), int(round(u))])
        if r > 150 and g < 90 and b < 90:
            return True
    return False


def test_place_moves_the_ball_in_the_virtual_cameras_view(tmp_path):
    with EmulatorProcess(tmp_path / 'ttyDXL', scene='reach_target', camera=True) as emu:
        cap = cv2.VideoCapture(emu.camera_urls[0])
        try:
            point = np.array([0.21, 0.15, 0.02])
            emu.place('target', point)
            assert emu.lines[-1] == 'placed target 0.210000 0.150000 0.020000'
            assert red_at(cap, point)
            with pytest.raises(EmulatorError) as err:
                emu.place('cube', [0.2, 0.0, 0.02])
            assert str(err.value) == ("the emulator refused to place cube: error: no free "
                                      "object 'cube' in the scene (free objects: target)")
        finally:
            cap.release()


def test_scene_with_a_leader_arm_is_one_error_line(simreal_cli, tmp_path):
    r = simreal_cli('emulate', '--link', str(tmp_path / 'tty'), '--role', 'leader', '--scene',
                    'reach_target')
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        'simreal emulate: error: --scene surrounds the follower robot (its cameras see it); '
        'a leader arm has none (leave out --scene with --role leader)']
