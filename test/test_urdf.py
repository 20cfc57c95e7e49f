"""Checks of urdf/simreal_arm.urdf with an independent parser (yourdfpy) against the spec."""

from __future__ import annotations

from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yourdfpy

from simreal_ros.core.robot import RobotSpec, load_robot

REPO = Path(__file__).resolve().parents[1]
URDF_FILE = REPO / 'urdf' / 'simreal_arm.urdf'


@pytest.fixture(scope='module')
def urdf() -> yourdfpy.URDF:
    return yourdfpy.URDF.load(str(URDF_FILE), build_scene_graph=False, load_meshes=False)


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    return load_robot('simreal_arm')


@pytest.fixture(scope='module')
def xml_root() -> ET.Element:
    return ET.parse(URDF_FILE).getroot()


def _joints(urdf: yourdfpy.URDF) -> list[yourdfpy.Joint]:
    return list(urdf.robot.joints)


def _revolute(urdf: yourdfpy.URDF) -> list[yourdfpy.Joint]:
    return [j for j in _joints(urdf) if j.type == 'revolute']


def test_spec_points_at_this_urdf(robot: RobotSpec) -> None:
    assert robot.urdf.resolve() == URDF_FILE.resolve()


def test_urdf_is_valid(urdf: yourdfpy.URDF) -> None:
    assert urdf.robot.name == 'simreal_arm'
    assert urdf.validate()
    assert not urdf.errors


def test_six_revolute_joints_and_fixed_tool_joint(urdf: yourdfpy.URDF,
                                                  robot: RobotSpec) -> None:
    joints = _joints(urdf)
    assert len(joints) == 7
    assert [j.type for j in joints] == ['revolute'] * 6 + ['fixed']
    tool = joints[-1]
    assert tool.name == 'tool_joint'
    assert tool.child == robot.tool_frame == 'tool0'
    assert urdf.num_actuated_joints == 6


def test_joint_names_and_order_match_spec(urdf: yourdfpy.URDF, robot: RobotSpec) -> None:
    assert [j.name for j in _revolute(urdf)] == robot.joint_names
    assert list(urdf.actuated_joint_names) == robot.joint_names


def test_spec_frames_exist(urdf: yourdfpy.URDF, robot: RobotSpec) -> None:
    links = set(urdf.link_map)
    assert robot.base_frame in links
    assert robot.tool_frame in links
    assert robot.imu is not None
    assert robot.imu.link in links


def test_axes_are_unit_vectors(urdf: yourdfpy.URDF) -> None:
    for j in _revolute(urdf):
        assert np.linalg.norm(j.axis) == pytest.approx(1.0), j.name


def test_moving_links_have_valid_inertia(urdf: yourdfpy.URDF) -> None:
    moving = [j.child for j in _revolute(urdf)]
    assert len(moving) == 6
    for name in moving + ['base_link']:
        inertial = urdf.link_map[name].inertial
        assert inertial is not None, name
        assert inertial.mass is not None and inertial.mass > 0, name
        inertia = np.asarray(inertial.inertia, dtype=float)
        assert inertia.shape == (3, 3), name
        np.testing.assert_allclose(inertia, inertia.T, err_msg=name)
        eig = np.linalg.eigvalsh(inertia)
        assert np.all(eig > 0), (name, eig)
        a, b, c = np.sort(eig)
        assert a + b >= c * (1 - 1e-9), (name, eig)
        ixx, iyy, izz = np.diag(inertia)
        assert ixx + iyy >= izz and iyy + izz >= ixx and izz + ixx >= iyy, name


def test_total_moving_mass_plausible(urdf: yourdfpy.URDF) -> None:
    total = sum(urdf.link_map[j.child].inertial.mass for j in _revolute(urdf))
    assert 0.5 < total < 1.5


def test_spec_limits_within_urdf_limits(urdf: yourdfpy.URDF, robot: RobotSpec) -> None:
    by_name = {j.name: j for j in _revolute(urdf)}
    for js in robot.joints:
        lim = by_name[js.name].limit
        assert lim is not None, js.name
        assert lim.lower <= js.limits.lower < js.limits.upper <= lim.upper, js.name
        assert 0 < js.limits.velocity <= lim.velocity, js.name
        assert 0 < js.limits.effort <= lim.effort, js.name
        assert lim.lower <= js.home <= lim.upper, js.name


def test_every_revolute_joint_has_dynamics(urdf: yourdfpy.URDF) -> None:
    for j in _revolute(urdf):
        assert j.dynamics is not None, j.name
        damping = float(j.dynamics.damping)
        friction = float(j.dynamics.friction)
        assert damping > 0, j.name
        assert friction >= 0, j.name


def test_mujoco_compiler_block(xml_root: ET.Element) -> None:
    compilers = xml_root.findall('./mujoco/compiler')
    assert len(compilers) == 1
    attrs = compilers[0].attrib
    assert attrs.get('angle') == 'radian'
    assert attrs.get('fusestatic') == 'false'


def test_urdf_is_a_tree(urdf: yourdfpy.URDF) -> None:
    links = set(urdf.link_map)
    parents: dict[str, str] = {}
    for j in _joints(urdf):
        assert j.parent in links, j.name
        assert j.child in links, j.name
        assert j.child not in parents, f'{j.child} has two parents'
        parents[j.child] = j.parent
    roots = links - set(parents)
    assert roots == {'base_link'}
    # every link reaches the root without a cycle
    for link in links:
        seen = set()
        while link in parents:
            assert link not in seen, f'cycle through {link}'
            seen.add(link)
            link = parents[link]
        assert link == 'base_link'


def test_chain_is_serial(urdf: yourdfpy.URDF) -> None:
    joints = _joints(urdf)
    for prev, nxt in zip(joints[:-1], joints[1:], strict=True):
        assert nxt.parent == prev.child, (prev.name, nxt.name)


ARMS = ('so101', 'koch', 'openmanipulator_x')


@pytest.mark.parametrize('arm', ARMS)
def test_arm_urdf_is_valid_and_matches_its_spec(arm: str) -> None:
    """The shipped arms, read by yourdfpy: joints, frames, limits and inertias as the spec says."""
    spec = load_robot(arm)
    u = yourdfpy.URDF.load(str(spec.urdf), build_scene_graph=False, load_meshes=False)
    assert u.robot.name == arm
    assert u.validate() and not u.errors
    assert spec.urdf.resolve() == (REPO / 'urdf' / f'{arm}.urdf').resolve()
    by_name = {j.name: j for j in _joints(u)}
    mimics = {j.name: j.mimic for j in _joints(u) if j.mimic is not None}
    # every moving joint is a spec joint or mimics one: nothing moves that no servo drives
    assert set(u.actuated_joint_names) == set(spec.joint_names)
    assert {m.joint for m in mimics.values()} <= set(spec.joint_names)
    assert set(by_name) - set(u.actuated_joint_names) - set(mimics) == {'tool_joint'}
    assert {spec.base_frame, spec.tool_frame} <= set(u.link_map)
    assert spec.joint_names[-1] == 'gripper'
    for js in spec.joints:
        j = by_name[js.name]
        assert j.type == 'revolute', js.name
        assert np.linalg.norm(j.axis) == pytest.approx(1.0), js.name
        assert j.limit.lower <= js.limits.lower < js.limits.upper <= j.limit.upper, js.name
        assert 0 < js.limits.velocity <= j.limit.velocity, js.name
        assert 0 < js.limits.effort <= j.limit.effort, js.name
        inertial = u.link_map[j.child].inertial
        eig = np.linalg.eigvalsh(np.asarray(inertial.inertia, dtype=float))
        assert inertial.mass > 0 and np.all(eig > 0), js.name
        a, b, c = np.sort(eig)
        assert a + b >= c * (1 - 1e-9), js.name
    for name, m in mimics.items():
        # a follower's range holds every position its leader's spec limits give it
        lead = spec.joints[spec.index(m.joint)].limits
        ends = sorted(m.multiplier * x + m.offset for x in (lead.lower, lead.upper))
        lim = by_name[name].limit
        assert lim.lower <= ends[0] and ends[1] <= lim.upper, name


def test_openmanipulator_fingers_mimic_the_gripper() -> None:
    u = yourdfpy.URDF.load(str(REPO / 'urdf' / 'openmanipulator_x.urdf'),
                           build_scene_graph=False, load_meshes=False)
    mimics = {j.name: (j.type, j.mimic.joint, j.mimic.multiplier, j.mimic.offset)
              for j in _joints(u) if j.mimic is not None}
    assert mimics == {'gripper_left_joint': ('prismatic', 'gripper', 0.015, 0.0),
                      'gripper_right_joint': ('prismatic', 'gripper', 0.015, 0.0)}
