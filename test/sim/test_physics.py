"""The physics side of the sim bridge: real MuJoCo, no ROS."""

from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import load_overlay, load_randomization
from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import ImuSpec, load_robot
from simreal_ros.errors import ModelError
from simreal_ros.sim.mujoco.model import build_model
from simreal_ros.sim.mujoco.physics import MujocoSim as SimRobot
from simreal_ros.sim.scene import load_scene

ROBOT = load_robot('simreal_arm')


def drive(sim: SimRobot, seconds: float, pattern: str = 'chirp', seed: int = 0) -> np.ndarray:
    """Drive ``sim`` with an excitation at 100 Hz commands; return positions at 100 Hz."""
    exc = Excitation(ROBOT, ExcitationConfig(pattern, seconds, amplitude=0.4, seed=seed))
    out = []
    for k in range(int(seconds * 100)):
        q, qd = exc.sample(k / 100)
        sim.set_target(JointTarget(q, qd, np.zeros(ROBOT.n)))
        sim.step(10)
        out.append(sim.observe().position)
    return np.array(out)


def test_model_has_servo_and_feedforward_actuators_and_home_key():
    built = build_model(ROBOT)
    m = built.model
    assert m.nu == 2 * ROBOT.n
    assert [m.actuator(int(a)).name for a in built.servo_act] == ROBOT.joint_names
    np.testing.assert_allclose(m.key_qpos[built.home_key][built.qpos_adr], ROBOT.home)
    np.testing.assert_allclose(m.jnt_actfrcrange[[m.joint(n).id for n in ROBOT.joint_names]],
                               np.c_[-ROBOT.effort_limit, ROBOT.effort_limit])
    assert built.imu_adr is not None


def test_step_response_tracks_target_and_respects_effort_limit():
    sim = SimRobot(ROBOT)
    target = ROBOT.home + np.array([0.3, -0.2, 0.2, 0.4, -0.3, 0.5])
    sim.set_target(JointTarget.hold(target))
    peak = 0.0
    for _ in range(150):
        sim.step(10)
        peak = max(peak, float(np.abs(sim.observe().effort).max()))
    obs = sim.observe()
    # P servos against gravity sag a little (shoulder carries the arm): a few centiradians
    assert np.abs(obs.position - target).max() < 0.05
    assert np.abs(obs.velocity).max() < 0.05
    assert peak <= ROBOT.effort_limit.max() + 1e-9
    assert peak > 0.5 * ROBOT.effort_limit.max()  # the step saturated the servo


def test_command_delay_line_releases_targets_after_the_overlay_delay():
    sim = SimRobot(ROBOT, overlay=load_overlay('worn_arm'))
    assert sim.delay_steps == 8  # 8 ms at 1 ms steps
    act = sim.built.servo_act
    target = ROBOT.home + 0.1
    sim.set_target(JointTarget.hold(target))
    sim.step(7)
    np.testing.assert_allclose(sim.data.ctrl[act], ROBOT.home)
    sim.step(1)
    np.testing.assert_allclose(sim.data.ctrl[act], target)


def test_same_seed_same_commands_give_identical_states():
    rnd = load_randomization('default')
    runs = []
    for _ in range(2):
        sim = SimRobot(ROBOT, scene=load_scene('tabletop'), randomization=rnd, seed=42)
        sim.reset(randomize=True)
        runs.append(drive(sim, 3.0, 'multisine', seed=3))
    assert np.array_equal(runs[0], runs[1])
    other = SimRobot(ROBOT, scene=load_scene('tabletop'), randomization=rnd, seed=43)
    other.reset(randomize=True)
    assert not np.array_equal(runs[0], drive(other, 3.0, 'multisine', seed=3))


def test_overlay_measurably_changes_the_dynamics(tmp_path: Path):
    nominal = drive(SimRobot(ROBOT), 4.0)
    worn = drive(SimRobot(ROBOT, overlay=load_overlay('worn_arm')), 4.0)
    assert np.sqrt(np.mean((nominal - worn) ** 2)) > 1e-3
    heavy = tmp_path / 'heavy.yaml'
    heavy.write_text(yaml.safe_dump({'robot': 'simreal_arm', 'joints': {
        'base_yaw': {'damping': 2.0}}}))
    sim_heavy = SimRobot(ROBOT, overlay=load_overlay(heavy))
    sim_nom = SimRobot(ROBOT)
    for sim in (sim_heavy, sim_nom):
        sim.set_target(JointTarget.hold(ROBOT.home + np.array([0.5, 0, 0, 0, 0, 0])))
        sim.step(100)
    # ten times the viscous damping: the base moves visibly less in the first 100 ms
    assert sim_heavy.observe().position[0] < 0.8 * sim_nom.observe().position[0]
    assert sim_heavy.model.dof_damping[sim_heavy.built.dof_adr[0]] == 2.0


def test_reset_randomizes_within_ranges_and_is_seeded():
    rnd = load_randomization('default')
    a = SimRobot(ROBOT, randomization=rnd, seed=7)
    b = SimRobot(ROBOT, randomization=rnd, seed=7)
    pa, pb = a.reset(randomize=True), b.reset(randomize=True)
    assert pa == pb and pa != a.base
    for name, jd in pa.joints.items():
        base = a.base.joints[name]
        assert 0.7 * base.damping <= jd.damping <= 1.5 * base.damping
        assert 0.9 * base.kp <= jd.kp <= 1.1 * base.kp
        d = a.built.dof_adr[ROBOT.index(name)]
        assert a.model.dof_damping[d] == pytest.approx(jd.damping)
    assert 0.0 <= pa.command_delay_s <= 0.012
    mass = pa.body_mass['forearm_link']
    fid = a.model.body('forearm_link').id
    assert a.model.body_mass[fid] == pytest.approx(mass)
    # a plain reset goes back to the nominal (+overlay) world, time keeps running
    t = a.time_ns
    assert a.reset(randomize=False) == a.base
    assert a.time_ns == t
    np.testing.assert_allclose(a.observe().position, ROBOT.home)


def test_scene_adds_floor_and_free_objects_without_changing_joint_order():
    sim = SimRobot(ROBOT, scene=load_scene('tabletop'))
    assert sim.model.geom('floor').id >= 0
    assert sim.model.nq == ROBOT.n + 7  # the free cube
    sim.step(500)
    obs = sim.observe()
    assert obs.position.shape == (ROBOT.n,)
    cube_z = sim.data.body('cube').xpos[2]
    assert 0.015 < cube_z < 0.025  # resting on the floor


def test_imu_reads_gravity_at_rest():
    sim = SimRobot(ROBOT)
    sim.step(2000)
    obs = sim.observe()
    assert obs.imu_acc is not None and obs.imu_quat_wxyz is not None
    assert np.linalg.norm(obs.imu_acc) == pytest.approx(9.81, abs=0.05)
    assert np.linalg.norm(obs.imu_quat_wxyz) == pytest.approx(1.0)


def test_bad_models_fail_with_a_clear_message(tmp_path: Path):
    bad_joint = replace(ROBOT, joints=(replace(ROBOT.joints[0], name='no_such_joint'),)
                        + ROBOT.joints[1:])
    with pytest.raises(ModelError, match='no_such_joint.*not in'):
        build_model(bad_joint)
    wide = replace(ROBOT.joints[1], limits=replace(ROBOT.joints[1].limits, upper=3.0))
    with pytest.raises(ModelError, match='exceed the URDF limits'):
        build_model(replace(ROBOT, joints=(ROBOT.joints[0], wide) + ROBOT.joints[2:]))
    with pytest.raises(ModelError, match='imu.link'):
        build_model(replace(ROBOT, imu=ImuSpec('no_link', 'imu', (0, 0, 0))))
    broken = tmp_path / 'broken.urdf'
    broken.write_text('<robot name="x"><link name="a"></robot>')
    with pytest.raises(ModelError, match='could not load the URDF'):
        build_model(replace(ROBOT, urdf=broken))


def test_raw_step_rate_is_measured_on_a_copy():
    sim = SimRobot(ROBOT)
    before = sim.data.qpos.copy()
    assert sim.raw_step_rate(200) > 0
    np.testing.assert_array_equal(sim.data.qpos, before)
    assert isinstance(sim.data, mujoco.MjData)
