"""The visuomotor reach task: its geometry on a real MuJoCo render, and the shipped policy."""

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.images import preprocess
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.visual_task import (
    ReachTask,
    TargetCamera,
    VisualDraw,
    camera_pixel,
)

ROBOT = load_robot('simreal_arm')


@pytest.fixture(scope='module')
def task():
    return ReachTask(ROBOT)


@pytest.fixture(scope='module')
def camera():
    cam = TargetCamera(ROBOT, (128, 96))
    yield cam
    cam.close()


def red_centroid(img, around, half=8):
    """(u, v) centre of the ball's pixels (red, green and blue well below red) within
    ``half`` px of ``around`` (the arm's orange links are red too: they are kept out)."""
    u0, v0 = (int(round(x)) for x in around)
    top, left = max(0, v0 - half), max(0, u0 - half)
    win = img[top:v0 + half + 1, left:u0 + half + 1].astype(int)
    r, g, b = win[:, :, 0], win[:, :, 1], win[:, :, 2]
    ys, xs = np.nonzero((r > 60) & (g < 150) & (r > 2 * g) & (r > 2 * b))
    assert xs.size > 0, 'no ball pixel near the projection'
    return left + xs.mean(), top + ys.mean()


def test_sampled_goal_puts_the_tool_on_the_reach_point_of_a_ball_in_view(task):
    rng = np.random.default_rng(5)
    geo = task.geo
    for _ in range(5):
        obj, q = task.sample(rng)
        assert obj[2] == pytest.approx(0.02)                      # resting on the floor
        assert geo.radius_m[0] <= np.hypot(obj[0], obj[1]) <= geo.radius_m[1]
        assert task.error_m(q, obj) < 1e-4                       # the goal is exact
        np.testing.assert_array_equal(q[3:], ROBOT.home[3:])     # the wrist stays at home
        u, v, z = camera_pixel(task.camera, obj)
        assert 0.08 * 640 <= u <= 639 - 0.08 * 640 and 0.08 * 480 <= v <= 479 - 0.08 * 480
        assert z > 0
        # success is a distance from the reach point: 4 cm above the ball, not the ball
        assert task.error_m(q, obj + np.array([0.0, 0.0, 0.04])) == pytest.approx(0.04, abs=1e-4)
    assert task.error_m(ROBOT.home, obj) > geo.tolerance_m     # home is no success


def test_the_ball_is_rendered_where_the_camera_model_projects_it(task, camera):
    rng = np.random.default_rng(11)
    small = task.camera.scaled(128, 96)
    for _ in range(3):
        obj, _q = task.sample(rng)
        img = camera.render(ROBOT.home, obj, VisualDraw(), rng)
        assert img.shape == (96, 128, 3)
        pu, pv, _z = camera_pixel(small, obj)
        u, v = red_centroid(img, (pu, pv))
        assert abs(u - pu) < 1.0 and abs(v - pv) < 1.0, (u, v, pu, pv)


def test_a_look_changes_the_frame_and_the_nominal_look_does_not(task, camera):
    rng = np.random.default_rng(3)
    obj, _q = task.sample(rng)
    a = camera.render(ROBOT.home, obj, VisualDraw(), rng)
    b = camera.render(ROBOT.home, obj, VisualDraw(), rng)
    np.testing.assert_array_equal(a, b)
    bright = camera.render(ROBOT.home, obj, VisualDraw(gain=1.3), rng)
    assert bright.mean() > a.mean() + 10
    moved = camera.render(ROBOT.home, obj, VisualDraw(camera_rotation_rad=(0.0, 0.05, 0.0)),
                          rng)
    # a rotation of 0.05 rad about the optical y axis moves the scene -fx * tan(0.05) px
    small = task.camera.scaled(128, 96)
    pu, pv, _z = camera_pixel(small, obj)
    shift = -small.intrinsics()[0] * np.tan(0.05)
    du = red_centroid(moved, (pu + shift, pv))[0] - red_centroid(a, (pu, pv))[0]
    assert du == pytest.approx(shift, abs=1.0)


@pytest.mark.e2e
def test_shipped_visual_policy_reaches_balls_it_only_sees(task, camera):
    """The committed network, run as the node runs it (preprocess, TorchScript), from pixels.

    Nominal worlds, then randomized ones (dynamics, a latency preset, the visual
    randomization), on seeds that training never used; success as the task defines it (tool0
    within 3 cm of the reach point for 0.2 s within 4 s).
    """
    torch = pytest.importorskip('torch')
    from simreal_ros.policy.visual_train import (
        EXPERT,
        evaluate,
        images_to_tensor,
        make_worlds,
        node_policy,
    )
    torch.set_num_threads(1)
    spec = load_policy_spec('simreal_arm_visual_reach')
    # training normalizes frames in torch: the same numbers as the node's preprocess
    frames = np.random.default_rng(0).integers(0, 256, (2, 48, 64, 3), dtype=np.uint8)
    ours = images_to_tensor(frames, spec).numpy()
    for i in range(2):
        np.testing.assert_allclose(ours[i], preprocess(spec.images[0], frames[i], 'rgb8'),
                                   rtol=0, atol=1e-6)
    expert = load_policy_spec(EXPERT)
    nominal = make_worlds(spec, expert, camera, task, [7001, 7002, 7003], False, False)
    result = evaluate(nominal, node_policy(spec, spec.model, 3), 3)
    assert result['successes'] == 3, result       # 40/40 in the model card's check
    randomized = make_worlds(spec, expert, camera, task, [7001, 7002, 7003], True, True)
    result = evaluate(randomized, node_policy(spec, spec.model, 3), 3)
    assert result['successes'] >= 2, result       # 36/40 in the model card's check
