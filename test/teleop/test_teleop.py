"""The teleop core without ROS: mapping, calibration files, safe start, deadman, leader loss."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.teleop.control import (
    GripperMap,
    JointMap,
    LeaderConfig,
    LeaderMapping,
    TeleopControl,
    button_pressed,
    calibration_text,
    compensation_current,
    leader_mapping,
    load_calibration,
)

ROBOT = load_robot('simreal_arm')
MS = 1_000_000


def mapping(**kw: JointMap) -> LeaderMapping:
    return LeaderMapping(ROBOT, tuple(kw.get(n, JointMap()) for n in ROBOT.joint_names))


def test_mapping_applies_offset_sign_scale_and_clamps() -> None:
    m = mapping(base_yaw=JointMap(offset_rad=0.1, sign=-1, scale=2.0))
    leader = ROBOT.home.copy()
    leader[0] = 0.4
    out = m.map(leader)
    assert out[0] == pytest.approx(-2.0 * (0.4 - 0.1))
    assert np.array_equal(out[1:], ROBOT.home[1:])
    assert m.clamped == 0
    leader[0] = -5.0  # -2 * (-5.1) = 10.2 rad, beyond the upper limit 2.7
    assert m.map(leader)[0] == ROBOT.upper[0]
    assert m.clamped == 1


def test_offsets_for_pose_map_the_leader_onto_the_pose() -> None:
    m = mapping(elbow_pitch=JointMap(sign=-1, scale=1.5))
    leader = ROBOT.home + np.linspace(0.05, 0.3, ROBOT.n)
    offsets = m.offsets_for_pose(leader, ROBOT.home)
    cal = LeaderMapping(ROBOT, tuple(JointMap(float(o), j.sign, j.scale)
                                     for o, j in zip(offsets, m.joints, strict=True)))
    assert np.allclose(cal.map(leader), ROBOT.home)


def test_calibration_file_round_trip_and_errors(tmp_path) -> None:
    m = mapping(base_yaw=JointMap(0.25, -1, 1.0), wrist_pitch=JointMap(-0.125, 1, 2.0))
    path = tmp_path / 'leader.yaml'
    path.write_text(calibration_text(m, 'home', 'simreal_arm'))
    back = load_calibration(path, ROBOT)
    assert back.joints == m.joints
    path.write_text(calibration_text(m, 'home', 'simreal_arm').replace('sign: -1', 'sign: 2'))
    with pytest.raises(ConfigError, match=r'leader.yaml: joints.base_yaw.sign: expected 1 or '
                                          r'-1, got 2'):
        load_calibration(path, ROBOT)
    path.write_text('robot: simreal_arm\njoints: {base_yaw: {offset_rad: 0.1}}\n')
    with pytest.raises(ConfigError, match='joints.shoulder_pitch: expected an entry for every '
                                          "joint, got 'missing'"):
        load_calibration(path, ROBOT)
    with pytest.raises(ConfigError, match='simreal calibrate-leader'):
        load_calibration(tmp_path / 'none.yaml', ROBOT)


def control(**kw: object) -> TeleopControl:
    args: dict = {'start_mode': 'wait', 'start_tolerance_rad': 0.1, 'blend_speed_rad_s': 0.5,
                  'leader_timeout_s': 0.1}
    args.update(kw)
    return TeleopControl(LeaderMapping.identity(ROBOT), **args)


def test_nothing_is_sent_before_both_arms_are_known() -> None:
    c = control()
    assert c.step(0).command is None
    c.leader_read(ROBOT.home, 0)
    d = c.step(1 * MS)
    assert (d.command, d.state) == (None, 'waiting')


def test_wait_mode_refuses_a_far_follower_until_the_leader_comes_close() -> None:
    c = control()
    far = ROBOT.home.copy()
    far[2] += 0.5
    c.follower_state(ROBOT.home)
    c.leader_read(far, 0)
    d = c.step(1 * MS)
    assert (d.command, d.state) == (None, 'far')
    assert d.distance_rad == pytest.approx(0.5)
    assert 'start refused' in d.events[0] and 'elbow_pitch' in d.events[0]
    assert c.step(2 * MS).events == ()  # said once
    near = ROBOT.home + 0.05
    c.leader_read(near, 3 * MS)
    d = c.step(4 * MS)
    assert d.state == 'tracking'
    assert np.allclose(d.command, near)


def test_blend_moves_the_command_at_the_blend_speed_then_tracks() -> None:
    c = control(start_mode='blend')
    leader = ROBOT.home.copy()
    leader[0] += 0.5025
    c.follower_state(ROBOT.home)
    c.leader_read(leader, 0)
    d = c.step(0)
    assert d.state == 'blending'
    assert np.allclose(d.command, ROBOT.home)  # starts where the follower is
    t = 0
    commands = []
    while d.state == 'blending':
        t += 10 * MS
        c.leader_read(leader, t)
        d = c.step(t)
        commands.append(d.command[0])
        assert t < 2_000 * MS
    steps = np.diff([ROBOT.home[0]] + commands[:-1])
    assert np.allclose(steps, 0.5 * 0.01)  # 0.5 rad/s at 100 Hz
    # within the tolerance (0.1) after 81 steps of 5 mrad (0.5025 - 0.405 = 0.0975)
    assert t == 810 * MS
    assert d.state == 'tracking' and d.command[0] == leader[0]


def test_deadman_release_stops_at_once_and_press_rechecks_the_start() -> None:
    c = control()
    c.follower_state(ROBOT.home)
    c.leader_read(ROBOT.home, 0)
    assert c.step(1 * MS).state == 'tracking'
    assert 'stopped' in c.set_deadman(False)
    c.leader_read(ROBOT.home, 2 * MS)
    d = c.step(2 * MS)
    assert (d.command, d.state) == (None, 'waiting')
    far = ROBOT.home + 0.3  # the leader moved while released
    c.leader_read(far, 3 * MS)
    c.set_deadman(True)
    d = c.step(3 * MS)
    assert (d.command, d.state) == (None, 'far')


def test_leader_loss_stops_streaming_and_return_rechecks_the_start() -> None:
    c = control()
    c.follower_state(ROBOT.home)
    c.leader_read(ROBOT.home, 0)
    assert c.step(50 * MS).command is not None
    d = c.step(101 * MS)  # no reading for 0.101 s > leader_timeout_s 0.1
    assert (d.command, d.state) == (None, 'leader_lost')
    assert d.events[0].startswith('leader lost')
    assert c.leader_losses == 1
    c.leader_read(ROBOT.home + 0.5, 300 * MS)
    d = c.step(300 * MS)
    assert d.state == 'far' and d.command is None
    assert d.events[0] == 'leader back: start check again'


def test_leader_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="leader: port: expected the leader arm's serial port"):
        LeaderConfig()
    with pytest.raises(ConfigError, match="start_mode: expected one of \\['wait', 'blend'\\]"):
        LeaderConfig(port='/dev/ttyUSB1', start_mode='jump')
    with pytest.raises(ConfigError, match='leader_timeout_s: expected at least two leader '
                                          'periods'):
        LeaderConfig(port='/dev/ttyUSB1', rate_hz=100.0, leader_timeout_s=0.01)


def test_blend_starts_inside_the_limits_for_a_follower_resting_past_one() -> None:
    c = control(start_mode='blend')
    sagged = ROBOT.home.copy()
    sagged[1] = ROBOT.upper[1] + 0.1  # shoulder_pitch fell past its limit, torque off
    c.follower_state(sagged)
    c.leader_read(ROBOT.home, 0)
    d = c.step(0)
    assert d.state == 'blending'
    assert d.command[1] == ROBOT.upper[1]


def tracking_with_button() -> TeleopControl:
    c = control(button=False)
    c.follower_state(ROBOT.home)
    c.leader_read(ROBOT.home, 0)
    assert c.step(1 * MS).command is None  # a configured button is released until read
    assert c.set_button(True) == 'deadman button pressed: start check, then streaming'
    assert c.set_button(True) is None  # no change, no event
    assert c.step(2 * MS).state == 'tracking'
    return c


def test_button_release_stops_in_the_cycle_that_reads_it_and_press_rechecks_the_start() -> None:
    c = tracking_with_button()
    c.leader_read(ROBOT.home, 3 * MS)
    assert c.set_button(False) == 'deadman button released: command streaming stopped'
    d = c.step(3 * MS)
    assert (d.command, d.state) == (None, 'waiting')
    c.leader_read(ROBOT.home + 0.3, 4 * MS)  # the hand moved the leader while released
    c.set_button(True)
    d = c.step(4 * MS)
    assert (d.command, d.state) == (None, 'far')


def test_the_service_and_the_button_both_must_be_pressed() -> None:
    c = tracking_with_button()
    # the service released: pressing the button does not override it
    assert c.set_deadman(False) == 'deadman released: command streaming stopped'
    c.set_button(False)
    assert c.set_button(True) == ('deadman button pressed; ~/deadman is released: nothing '
                                  'streams until ~/deadman true')
    c.leader_read(ROBOT.home, 5 * MS)
    assert c.step(5 * MS).command is None
    # the button released: pressing the service does not override it
    assert c.set_button(False) == 'deadman button released'
    assert c.set_deadman(True) == ('deadman pressed; the leader button is released: nothing '
                                   'streams until it is pressed')
    c.leader_read(ROBOT.home, 6 * MS)
    assert c.step(6 * MS).command is None
    # the last one pressed starts (through the start check: here the follower is close)
    c.set_button(True)
    c.leader_read(ROBOT.home, 7 * MS)
    d = c.step(7 * MS)
    assert d.state == 'tracking' and d.events == ('follower within 0.000 rad of the leader: '
                                                  'tracking',)


def test_button_value_and_config_errors_name_the_key() -> None:
    cfg = LeaderConfig(port='p', button_id=6, button_size=2, button_pressed_value=0)
    assert button_pressed(0, cfg) is True
    assert button_pressed(1, cfg) is False
    for kw, msg in (({'button_id': 253}, 'leader: button_id: expected a servo ID 1..252'),
                    ({'button_size': 3}, 'leader: button_size: expected a register size'),
                    ({'button_address': 65535, 'button_size': 2},
                     'leader: button_address: expected an integer 0..65534 \\(button_size 2\\)'),
                    ({'button_pressed_value': 256},
                     'leader: button_pressed_value: expected an integer 0..255')):
        with pytest.raises(ConfigError, match=msg):
            LeaderConfig(port='p', **kw)
    with pytest.raises(ConfigError, match=r'leader: button_id: expected a servo ID of the '
                                          r'leader simreal_arm \[1, 2, 3, 4, 5, 6\]'):
        leader_mapping(LeaderConfig(port='p', button_id=9), ROBOT, ROBOT)


def test_gripper_trigger_maps_linearly_and_clamps() -> None:
    g = GripperMap(5, trigger_open_rad=0.2, trigger_closed_rad=-0.6, open_rad=1.0,
                   closed_rad=-1.0)
    assert g.target(0.2) == 1.0
    assert g.target(-0.6) == -1.0
    assert g.target(-0.2) == pytest.approx(0.0)
    assert g.target(0.5) == 1.0 and g.target(-2.0) == -1.0  # past the trigger's stops
    with pytest.raises(ValueError, match='must differ'):
        GripperMap(5, 0.1, 0.1, 0.0, 1.0)


def test_an_existing_joint_plays_the_gripper() -> None:
    """simreal_arm has no gripper: wrist_roll (the last joint) plays it, mapped from the
    leader's raw reading (no calibration offset), the other joints unchanged."""
    cfg = LeaderConfig(port='p', gripper_joint='wrist_roll', gripper_trigger_open_rad=0.0,
                       gripper_trigger_closed_rad=0.5, gripper_open_rad=-1.0,
                       gripper_closed_rad=1.0)
    m = leader_mapping(cfg, ROBOT, ROBOT)
    k = ROBOT.joint_names.index('wrist_roll')
    leader = ROBOT.home.copy()
    for trigger, want in ((0.0, -1.0), (0.25, 0.0), (0.5, 1.0), (0.9, 1.0), (-0.3, -1.0)):
        leader[k] = trigger
        q = m.map(leader)
        assert q[k] == pytest.approx(want)
        assert np.array_equal(np.delete(q, k), np.delete(ROBOT.home, k))
    assert m.clamped == 0  # the trigger's clamping is not a limit hit
    for kw, msg in (({'gripper_joint': 'finger'}, 'leader: gripper_joint: expected a joint '
                                                 'of simreal_arm'),
                    ({'gripper_joint': 'wrist_roll', 'gripper_closed_rad': 9.0},
                     'leader: gripper_closed_rad: expected an angle within wrist_roll limits')):
        with pytest.raises(ConfigError, match=msg):
            leader_mapping(LeaderConfig(port='p', **kw), ROBOT, ROBOT)
    with pytest.raises(ConfigError, match='leader: gripper_trigger_closed_rad: expected a '
                                          'reading other than gripper_trigger_open_rad'):
        LeaderConfig(port='p', gripper_joint='wrist_roll', gripper_trigger_closed_rad=0.0)


def test_compensation_current_is_a_fraction_of_the_holding_torque_plus_friction_clamped() -> None:
    cfg = LeaderConfig(port='p', compensation=True, gravity_fraction=0.5, friction_nm=0.1,
                       friction_deadband_rad_s=0.05, max_current_a=0.3)
    kt = np.full(4, 2.0)
    hold = np.array([0.4, -0.4, 0.4, 3.0])
    vel = np.array([0.0, 0.04, -1.0, 0.0])  # still, inside the deadband, moving, still
    i = compensation_current(hold, vel, kt, cfg)
    # 0.5 * 0.4 / 2; -0.5 * 0.4 / 2 (no friction inside the deadband); (0.2 - 0.1) / 2;
    # 0.5 * 3.0 / 2 = 0.75 clamped to 0.3
    assert i == pytest.approx([0.1, -0.1, 0.05, 0.3])
    for kw, msg in (({'gravity_fraction': 1.5}, 'leader: gravity_fraction: expected a number '
                                                '<= 1.0'),
                    ({'friction_nm': -0.1}, 'leader: friction_nm: expected a number >= 0.0'),
                    ({'max_current_a': 0.0}, 'leader: max_current_a: expected a number > 0')):
        with pytest.raises(ConfigError, match=msg):
            LeaderConfig(port='p', **kw)
