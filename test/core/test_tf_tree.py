"""The transform tree against MuJoCo's own forward kinematics, and its error handling."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import pytest
from transforms3d import euler, quaternions

from simreal_ros.core.robot import load_robot
from simreal_ros.core.tf_tree import TfTree, Transform, compose, parse_urdf
from simreal_ros.errors import ConfigError
from simreal_ros.sim.mujoco.model import build_model

ROBOT = load_robot('simreal_arm')


@dataclass(frozen=True)
class Camera:
    """The shape of a robot spec's ``cameras:`` entry (CameraSpec)."""

    name: str
    parent: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]


def tree(cameras: tuple[Camera, ...] = (), prefix: str = '') -> TfTree:
    return TfTree(parse_urdf(ROBOT.urdf.read_text(), ROBOT.urdf), ROBOT.base_frame, cameras,
                  prefix)


def mujoco_poses(q: np.ndarray) -> tuple[mujoco.MjModel, mujoco.MjData]:
    built = build_model(ROBOT)
    data = mujoco.MjData(built.model)
    data.qpos[built.qpos_adr] = q
    mujoco.mj_kinematics(built.model, data)
    return built.model, data


@pytest.mark.parametrize('seed', [0, 1, 2, 3])
def test_every_link_pose_matches_mujoco(seed):
    rng = np.random.default_rng(seed)
    q = rng.uniform(ROBOT.lower, ROBOT.upper) if seed else ROBOT.home
    t = tree()
    poses = compose(list(t.static()) + t.moving(dict(zip(ROBOT.joint_names, q, strict=True))))
    model, data = mujoco_poses(q)
    links = [model.body(b).name for b in range(1, model.nbody)]
    assert 'tool0' in links and len(links) == 8  # fixed-joint links are bodies too
    for name in links:
        b = model.body(name).id
        assert poses[name][:3, 3] == pytest.approx(data.xpos[b], abs=1e-9), name
        assert np.allclose(poses[name][:3, :3], quaternions.quat2mat(data.xquat[b]),
                           atol=1e-9), name


def test_camera_mount_is_static_with_its_pose_and_a_prefix():
    cams = (Camera('wrist', 'wrist_flange_link', (0.0, 0.02, 0.01), (0.0, -1.2, 1.5708)),
            Camera('scene', 'world', (0.6, 0.0, 0.5), (-2.2, 0.0, 1.5708)))
    static = tree(cams, 'twin/').static()
    by_child = {s.child: s for s in static}
    assert by_child['twin/base_link'].parent == 'world'
    assert by_child['twin/tool0'].parent == 'twin/wrist_flange_link'
    wrist = by_child['twin/wrist_optical_frame']
    assert wrist.parent == 'twin/wrist_flange_link'
    assert wrist.translation == (0.0, 0.02, 0.01)
    expected = euler.euler2mat(0.0, -1.2, 1.5708, 'sxyz')
    assert np.allclose(quaternions.quat2mat(wrist.rotation), expected, atol=1e-12)
    assert by_child['twin/scene_optical_frame'].parent == 'world'  # world is never prefixed


def test_camera_on_an_unknown_link_is_one_config_error():
    with pytest.raises(ConfigError, match=r"cameras: wrist.parent: expected 'world' or a link"):
        tree((Camera('wrist', 'gripper_link', (0, 0, 0), (0, 0, 0)),))


def test_prismatic_joint_translates_along_its_rotated_axis():
    urdf = ('<robot name="r"><joint name="slide" type="prismatic"><parent link="a"/>'
            '<child link="b"/><origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/>'
            '<axis xyz="1 0 0"/></joint></robot>')
    (t,) = TfTree(parse_urdf(urdf), 'a').moving({'slide': 0.5})
    assert t.translation == pytest.approx((1.0, 0.5, 0.0))
    assert isinstance(t, Transform)


@pytest.mark.parametrize('urdf, match', [
    ('<robot><joint', 'xml: expected a URDF document'),
    ('<model/>', 'root element: expected <robot>'),
    ('<robot><joint name="j" type="floating"><parent link="a"/><child link="b"/></joint>'
     '</robot>', "joint 'j' type: expected one of"),
    ('<robot><joint name="j" type="fixed"><parent link="a"/><child link="b"/>'
     '<origin xyz="0 nan 0"/></joint></robot>', "joint 'j' origin xyz: expected 3 finite"),
    ('<robot><joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
     '<axis xyz="0 0 0"/></joint></robot>', "joint 'j' axis: expected a non-zero vector"),
])
def test_malformed_urdf_is_one_config_error(urdf, match):
    with pytest.raises(ConfigError, match=match):
        parse_urdf(urdf, 'x.urdf')


def test_urdf_rpy_convention_matches_mujocos_urdf_import(tmp_path):
    inertial = ('<inertial><mass value="0.1"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" '
                'iyz="0" izz="1e-4"/></inertial>')
    urdf = (f'<robot name="r"><link name="a">{inertial}</link><link name="b">{inertial}</link>'
            f'<link name="c">{inertial}</link>'
            '<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
            '<origin xyz="0.1 -0.2 0.3" rpy="0.3 -0.5 1.1"/><axis xyz="0.6 0 0.8"/>'
            '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>'
            '<joint name="j2" type="fixed"><parent link="b"/><child link="c"/>'
            '<origin xyz="0 0.05 0" rpy="-1.0 0.2 2.5"/></joint></robot>')
    path = tmp_path / 'r.urdf'
    path.write_text(urdf)
    spec = mujoco.MjSpec.from_file(str(path))
    spec.compiler.fusestatic = False
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[0] = 0.7
    mujoco.mj_kinematics(model, data)
    t = TfTree(parse_urdf(urdf), 'a')
    poses = compose(list(t.static()) + t.moving({'j1': 0.7}))
    for name in ('b', 'c'):
        b = model.body(name).id
        assert poses[name][:3, 3] == pytest.approx(data.xpos[b], abs=1e-9), name
        assert np.allclose(poses[name][:3, :3], quaternions.quat2mat(data.xquat[b]),
                           atol=1e-9), name


@pytest.mark.parametrize('arm', ['so101', 'koch', 'openmanipulator_x'])
def test_every_arm_link_pose_matches_mujoco_mimic_fingers_included(arm):
    """The shipped arms; the OpenManipulator-X's fingers come from the gripper's angle alone."""
    robot = load_robot(arm)
    q = np.random.default_rng(7).uniform(robot.lower, robot.upper)
    t = TfTree(parse_urdf(robot.urdf.read_text(), robot.urdf), robot.base_frame)
    poses = compose(list(t.static()) + t.moving(dict(zip(robot.joint_names, q, strict=True))))
    built = build_model(robot)
    data = mujoco.MjData(built.model)
    data.qpos[built.qpos_adr] = q
    built.follow(data.qpos)
    mujoco.mj_kinematics(built.model, data)
    links = [built.model.body(b).name for b in range(1, built.model.nbody)]
    assert ('gripper_left_link' in links) == (arm == 'openmanipulator_x')
    for b, name in enumerate(links, start=1):
        assert name in poses, name
        np.testing.assert_allclose(poses[name][:3, 3], data.xpos[b], atol=1e-9, err_msg=name)
        np.testing.assert_allclose(poses[name][:3, :3], data.xmat[b].reshape(3, 3), atol=1e-9,
                                   err_msg=name)


def test_mimic_joint_follows_its_leader_unless_given():
    robot = load_robot('openmanipulator_x')
    t = TfTree(parse_urdf(robot.urdf.read_text(), robot.urdf), robot.base_frame)
    assert t.with_mimics({'gripper': 0.8}) == {
        'gripper': 0.8, 'gripper_left_joint': pytest.approx(0.012),
        'gripper_right_joint': pytest.approx(0.012)}
    assert t.with_mimics({'gripper_left_joint': 0.001, 'gripper': 0.8})[
        'gripper_left_joint'] == 0.001
    assert t.with_mimics({'joint1': 0.1}) == {'joint1': 0.1}  # no leader, no follower


MIMIC_BASE = ('<robot name="m"><link name="a"/><link name="b"/><link name="c"/>'
              '<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>{m1}</joint>'
              '<joint name="j2" type="prismatic"><parent link="b"/><child link="c"/>{m2}'
              '</joint></robot>')


@pytest.mark.parametrize('m1, m2, match', [
    ('', '<mimic joint="nope"/>', r"joint 'j2' mimic: expected the name of a moving joint.*"
                                  r"got 'nope'"),
    ('', '<mimic joint="j1" multiplier="x"/>', r"joint 'j2' mimic: expected <mimic joint="),
    ('<mimic joint="j2"/>', '<mimic joint="j1"/>', r'a chain of mimics that ends at a joint '
                                                   r'of its own, got .*j1 -> j2 -> j1'),
])
def test_bad_mimic_is_one_config_error(m1, m2, match):
    with pytest.raises(ConfigError, match=match):
        parse_urdf(MIMIC_BASE.format(m1=m1, m2=m2), 'm.urdf')
