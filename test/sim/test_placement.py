"""Placing scene objects (sim/placement.py): the checks, the stdin line, the MuJoCo move."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.placement import (
    check_position,
    format_placed,
    movable_objects,
    parameter_name,
    parse_place_line,
)
from simreal_ros.sim.scene import load_scene


def test_the_free_objects_are_the_movable_ones_and_each_has_a_parameter():
    assert movable_objects(load_scene('reach_target')) == ('target',)
    assert movable_objects(None) == ()
    assert parameter_name('target') == 'objects.target.position'


def test_a_good_position_is_three_floats():
    assert check_position('target', [0.25, -0.1, 0.02], ('target',)) == (0.25, -0.1, 0.02)
    assert parse_place_line('place target 0.25 -0.1 0.02\n', ('target',)) == \
        ('target', (0.25, -0.1, 0.02))
    assert format_placed('target', (0.25, -0.1, 0.02)) == \
        'placed target 0.250000 -0.100000 0.020000'


@pytest.mark.parametrize(('name', 'value', 'reason'), [
    ('cube', [0, 0, 0], "no free object 'cube' in the scene (free objects: target)"),
    ('target', [0.1, 0.2], 'expected [x, y, z] in m (3 numbers), got 2'),
    ('target', 'abc', "expected [x, y, z] in m, got 'abc'"),
    ('target', [0.1, math.nan, 0.0], 'expected finite coordinates within 5.0 m'),
    ('target', [250.0, 0.0, 20.0], 'expected finite coordinates within 5.0 m'),
])
def test_a_bad_position_says_what_was_expected_and_got(name, value, reason):
    with pytest.raises(ValueError) as err:
        check_position(name, value, ('target',))
    assert reason in str(err.value)


@pytest.mark.parametrize(('line', 'reason'), [
    ('move target 1 2 3', 'expected "place <object> <x> <y> <z>", got \'move target 1 2 3\''),
    ('place target 1 2', 'expected "place <object> <x> <y> <z>"'),
    ('place target 1 two 3', "target: expected three numbers (m), got ['1', 'two', '3']"),
    ('place ball 0.1 0.1 0.02', "no free object 'ball'"),
])
def test_a_bad_place_line_is_refused_with_the_reason(line, reason):
    with pytest.raises(ValueError) as err:
        parse_place_line(line, ('target',))
    assert reason in str(err.value)


def test_render_only_needs_a_free_object(tmp_path):
    path = tmp_path / 'scene.yaml'
    path.write_text('objects:\n  - {name: m, type: sphere, size: [0.02], pos: [0, 0, 0.02], '
                    'render_only: true}\n')
    with pytest.raises(ConfigError) as err:
        load_scene(path)
    assert err.value.key == 'objects[0].render_only'
    assert load_scene('reach_target').objects[0].render_only is True


def test_a_placed_render_only_ball_stays_put_and_the_camera_sees_it_there():
    from simreal_ros.policy.visual_task import camera_pixel
    robot = load_robot('simreal_arm')
    sim = make_sim(robot, scene=load_scene('reach_target'))
    target = np.array([0.22, -0.12, 0.02])
    sim.place_object('target', target)
    sim.step(500)  # 1 s: neither gravity nor the falling arm (torque off) moves it
    i = sim.object_position_index('target')
    np.testing.assert_array_equal(sim.render_state()[i:i + 7], [*target, 1, 0, 0, 0])
    renderer = sim.camera_renderer(robot.cameras)
    try:
        img = renderer.render(np.array(sim.render_state()))[0]
    finally:
        renderer.close()
    u, v, _z = camera_pixel(robot.cameras[0], target)
    r, g, b = (int(c) for c in img[int(round(v)), int(round(u))])
    assert r > 150 and g < 90 and b < 90, (r, g, b)  # the ball's red (0.9, 0.15, 0.1)
    with pytest.raises(ValueError, match="no free object 'cube'"):
        sim.place_object('cube', target)
