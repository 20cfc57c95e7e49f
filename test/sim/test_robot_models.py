"""A new robot's model in the engines: URDF with ``package://`` meshes, MJCF, PyBullet's refusal.

The 2-DoF arm of test/robot_files.py, loaded by real MuJoCo and real PyBullet.
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from robot_files import PACKAGE, mjcf_text, spec_data, write_description_package, write_spec

from simreal_ros.bringup.planner import plan
from simreal_ros.core.commands import JointTarget
from simreal_ros.core.model_files import MODEL_PATH_ENV
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ModelError, PlanError
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.mujoco.model import build_model

URI = f'package://{PACKAGE}/urdf/my_arm.urdf'
OFFSET = np.array([0.4, -0.5])


@pytest.fixture
def urdf_arm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RobotSpec:
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))
    write_description_package(tmp_path)
    return load_robot(write_spec(tmp_path / 'my_arm.yaml', spec_data(URI)))


@pytest.fixture
def mjcf_arm(tmp_path: Path) -> RobotSpec:
    write_description_package(tmp_path)  # for its meshes
    # an actuator of its own on a spec joint: replaced by the servo law
    text = mjcf_text(f'{PACKAGE}/meshes').replace(
        '<worldbody>', '<actuator><motor name="own" joint="shoulder"/></actuator><worldbody>')
    (tmp_path / 'my_arm.xml').write_text(text)
    return load_robot(write_spec(tmp_path / 'my_arm_mjcf.yaml', spec_data('my_arm.xml')))


def settle(robot: RobotSpec, engine: str, steps: int = 1500) -> np.ndarray:
    """Command home + OFFSET for ``steps`` steps; return the joint positions."""
    sim = make_sim(robot, engine=engine)
    sim.set_target(JointTarget(robot.home + OFFSET, np.zeros(robot.n), np.zeros(robot.n)))
    sim.step(steps)
    return np.asarray(sim.joint_positions())


def test_a_urdf_with_package_meshes_loads_in_mujoco(urdf_arm):
    model = build_model(urdf_arm).model
    assert model.nmesh == 2
    assert [model.mesh(i).name for i in range(model.nmesh)] == ['l1', 'l2']
    # the box meshes of test/robot_files.py: 8 vertices each
    assert model.mesh_vertnum.tolist() == [8, 8]
    geoms = [g for g in range(model.ngeom) if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
    assert len(geoms) == 2  # collision geoms (MuJoCo's URDF import drops the visual copies)


def test_the_same_urdf_runs_in_both_engines(urdf_arm):
    mj = settle(urdf_arm, 'mujoco')
    pb = settle(urdf_arm, 'pybullet')
    target = urdf_arm.home + OFFSET
    # gravity on the 0.6 kg arm against kp 6-8 N m/rad leaves a sag of a few hundredths
    assert np.abs(mj - target).max() < 0.1, mj
    assert np.abs(pb - target).max() < 0.1, pb
    # the engines agree far closer than either is to the target (docs/sim_bridge.md)
    assert np.abs(mj - pb).max() < 0.01, (mj, pb)


def test_an_mjcf_model_loads_in_mujoco_with_its_ranges_in_degrees(mjcf_arm):
    assert mjcf_arm.model_format == 'mjcf'
    built = build_model(mjcf_arm)
    model = built.model
    assert model.nmesh == 2
    np.testing.assert_allclose(model.jnt_range[built.qpos_adr],
                               np.radians([[-91.7, 91.7], [-114.6, 114.6]]))
    # the MJCF's own motor is replaced by the servo and feed-forward of each joint
    assert [model.actuator(i).name for i in range(model.nu)] == [
        'shoulder', 'shoulder_ff', 'elbow', 'elbow_ff']
    q = settle(mjcf_arm, 'mujoco')
    assert np.abs(q - (mjcf_arm.home + OFFSET)).max() < 0.1, q


def test_mjcf_limits_wider_than_the_model_are_refused(tmp_path):
    (tmp_path / 'my_arm.xml').write_text(mjcf_text())
    data = spec_data('my_arm.xml')
    data['joints'][0]['limits']['upper'] = 1.7  # the MJCF's 91.7 deg is 1.6005 rad
    robot = load_robot(write_spec(tmp_path / 'wide.yaml', data))
    with pytest.raises(ModelError) as info:
        build_model(robot)
    hi = math.radians(91.7)
    assert str(info.value) == (f"{tmp_path / 'wide.yaml'}: limits of 'shoulder' [-1.5, 1.7] "
                               f'exceed the MJCF limits [{-hi}, {hi}]')


def test_pybullet_refuses_an_mjcf_model_in_one_line(mjcf_arm, tmp_path):
    line = (f'{mjcf_arm.source}: model my_arm.xml is MJCF, which the pybullet engine does not '
            'load (its loadMJCF drops joint limits and inertias): use engine:=mujoco, or give '
            'the robot a URDF model (docs/robots.md)')
    with pytest.raises(ModelError) as info:
        make_sim(mjcf_arm, engine='pybullet')
    assert str(info.value) == line
    with pytest.raises(PlanError) as plan_info:
        plan({'backend': 'sim', 'engine': 'pybullet', 'robot': str(mjcf_arm.source)})
    assert str(plan_info.value) == line


def test_an_mjcf_robot_plans_no_state_publisher(mjcf_arm):
    nodes = plan({'backend': 'sim', 'robot': str(mjcf_arm.source)})
    assert [n.kind for n in nodes] == ['sim_bridge']
