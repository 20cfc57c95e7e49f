"""Conformance of every engine to the protocol (sim/backend.py): real engines, no ROS.

Parametrized over ``ENGINES``: a second engine joins these tests by being listed there. The
expectations are the protocol's, not one engine's: time in whole steps, the servo law on the
first step, the delay line, snapping the state, observations, divergence counting, rollouts.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ModelError
from simreal_ros.sim.backend import Capabilities, RolloutJob, SimBackend
from simreal_ros.sim.engines import ENGINES, make_sim

ROBOT = load_robot('simreal_arm')
OFFSET = np.array([0.3, -0.2, 0.2, 0.4, -0.3, 0.5])


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_engine_names_itself_and_its_capabilities(engine):
    sim = make_sim(ROBOT, engine=engine)
    assert isinstance(sim, SimBackend)
    assert sim.engine == engine
    assert isinstance(sim.capabilities, Capabilities)
    assert sim.dt_ns == round(ROBOT.timestep_s * 1e9)


def test_an_unknown_engine_is_one_clear_error():
    with pytest.raises(ModelError, match=r"engine 'nope': expected one of mujoco, pybullet"):
        make_sim(ROBOT, engine='nope')


def test_step_counts_time_in_whole_steps_and_reset_keeps_it(engine):
    sim = make_sim(ROBOT, engine=engine)
    assert (sim.step_count, sim.time_ns) == (0, 0)
    sim.set_target(JointTarget.hold(ROBOT.home + OFFSET))
    sim.step(7)
    sim.step(3)
    assert (sim.step_count, sim.time_ns) == (10, 10 * sim.dt_ns)
    assert sim.observe().stamp_ns == sim.time_ns
    assert np.abs(sim.observe().position - ROBOT.home).max() > 1e-4  # it moved
    sim.reset()
    assert sim.time_ns == 10 * sim.dt_ns
    obs = sim.observe()
    np.testing.assert_allclose(obs.position, ROBOT.home, atol=1e-12)
    np.testing.assert_allclose(obs.velocity, 0.0, atol=1e-12)
    np.testing.assert_array_equal(sim.target.position, ROBOT.home)


def test_first_step_applies_the_servo_law_clamped_to_the_effort_limit(engine):
    sim = make_sim(ROBOT, engine=engine)
    kp = np.array([j.kp for j in ROBOT.joints])
    kd = np.array([j.kd for j in ROBOT.joints])
    q0 = ROBOT.home + 0.05
    v0 = np.array([0.2, -0.1, 0.0, 0.3, 0.1, -0.2])
    target = JointTarget(ROBOT.home + OFFSET, np.full(ROBOT.n, 0.5), np.full(ROBOT.n, 0.01))
    sim.set_joint_state(q0, v0)
    sim.set_target(target)
    sim.step(1)
    law = kp * (target.position - q0) - kd * v0 + kd * target.velocity + target.effort
    expected = np.clip(law, -ROBOT.effort_limit, ROBOT.effort_limit)
    assert np.any(np.abs(law) > ROBOT.effort_limit)  # some joints saturate, some do not
    assert np.any(np.abs(law) < ROBOT.effort_limit)
    np.testing.assert_allclose(sim.joint_state()[2], expected, rtol=1e-9, atol=1e-12)


def test_delay_line_releases_a_target_at_its_step(engine):
    sim = make_sim(ROBOT, overlay=load_overlay('worn_arm'), engine=engine)
    assert sim.delay_steps == 8
    sim.set_target(JointTarget.hold(ROBOT.home + 0.1))
    sim.step(7)
    np.testing.assert_array_equal(sim.target.position, ROBOT.home)
    sim.step(1)
    np.testing.assert_array_equal(sim.target.position, ROBOT.home + 0.1)


def test_set_joint_state_is_what_observe_reads(engine):
    sim = make_sim(ROBOT, engine=engine)
    q, v = ROBOT.home + OFFSET, np.linspace(-0.5, 0.5, ROBOT.n)
    sim.set_joint_state(q, v)
    obs = sim.observe()
    np.testing.assert_allclose(obs.position, q, atol=1e-12)
    np.testing.assert_allclose(obs.velocity, v, atol=1e-12)
    np.testing.assert_allclose(sim.joint_positions(), q, atol=1e-12)
    assert obs.position.shape == obs.velocity.shape == obs.effort.shape == (ROBOT.n,)


def test_imu_is_observed_when_the_engine_and_the_robot_have_one(engine):
    sim = make_sim(ROBOT, engine=engine)
    sim.step(500)
    obs = sim.observe()
    if sim.capabilities.imu and ROBOT.imu is not None:
        assert obs.imu_acc is not None and obs.imu_gyro is not None
        assert np.linalg.norm(obs.imu_acc) == pytest.approx(9.81, abs=0.05)
        assert np.linalg.norm(obs.imu_quat_wxyz) == pytest.approx(1.0)
    else:
        assert obs.imu_acc is None and obs.imu_quat_wxyz is None


def test_nan_state_is_reset_counted_and_cleared_by_reset(engine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warning to MUJOCO_LOG.TXT in the cwd
    sim = make_sim(ROBOT, engine=engine)
    if not sim.capabilities.divergence_reset:
        pytest.skip(f'{engine} does not reset diverged states')
    sim.step(10)
    assert sim.divergences() == 0
    sim.set_joint_state(ROBOT.home, np.full(ROBOT.n, np.nan))
    sim.step(5)
    assert sim.divergences() == 1
    obs = sim.observe()
    assert np.all(np.isfinite(obs.position)) and np.all(np.isfinite(obs.velocity))
    sim.reset()
    assert sim.divergences() == 0


def test_same_seed_same_commands_same_states(engine):
    runs = []
    for _ in range(2):
        sim = make_sim(ROBOT, overlay=load_overlay('worn_arm'), seed=5, engine=engine)
        for k in range(50):
            sim.set_target(JointTarget.hold(ROBOT.home + OFFSET * np.sin(k / 10)))
            sim.step(10)
        runs.append(sim.observe().position)
    np.testing.assert_array_equal(runs[0], runs[1])


def test_rollout_replays_like_stepping_and_leaves_the_state_alone(engine):
    sim = make_sim(ROBOT, engine=engine)
    steps = 300
    rows = np.tile(np.concatenate([ROBOT.home + OFFSET, np.zeros(2 * ROBOT.n)]), (steps, 1))
    heavy = replace(sim.base, joints={n: replace(j, damping=j.damping * 20)
                                      for n, j in sim.base.joints.items()})
    jobs = [RolloutJob(0, ROBOT.home.copy(), np.zeros(ROBOT.n), rows),
            RolloutJob(1, ROBOT.home.copy(), np.zeros(ROBOT.n), rows)]
    q = sim.rollout([sim.base, heavy], jobs, nthread=2)
    assert q.shape == (2, steps, ROBOT.n)
    assert sim.time_ns == 0
    np.testing.assert_allclose(sim.joint_positions(), ROBOT.home, atol=1e-12)
    stepped = []
    sim.set_target(JointTarget.hold(ROBOT.home + OFFSET))
    for _ in range(steps):
        sim.step(1)
        stepped.append(sim.joint_positions())
    # the replay is the bridge's physics: bit for bit on MuJoCo (sysid relies on it); 1e-12
    # leaves another engine room for a different summation order only
    np.testing.assert_allclose(q[0], np.array(stepped), rtol=0, atol=1e-12)
    assert np.abs(q[1, 100] - q[0, 100]).max() > 1e-2  # the damping slowed the base


def test_probe_reads_gravity_without_touching_the_state(engine):
    sim = make_sim(ROBOT, engine=engine)
    sim.step(20)
    before = sim.observe()
    probe = sim.probe(ROBOT.home + OFFSET)
    assert probe.contacts == 0
    assert probe.gravity.shape == (ROBOT.n,)
    yaw = ROBOT.index('base_yaw')
    assert abs(probe.gravity[yaw]) < 1e-9                 # a vertical axis carries no weight
    assert np.abs(probe.gravity).max() > 0.1              # the pitch joints do
    after = sim.observe()
    np.testing.assert_array_equal(after.position, before.position)
    np.testing.assert_array_equal(after.velocity, before.velocity)
    assert sim.moving_bodies()  # the arm's links
