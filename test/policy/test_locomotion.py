"""Locomotion: the velocity_command term, the gait expert, the trainer, the eval's metrics."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
from startup import cli_error_line

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.codec import ObservationBuilder
from simreal_ros.policy.control import RUNNING, PolicyController
from simreal_ros.policy.locomotion_eval import evaluate, run_episode, summarize
from simreal_ros.policy.locomotion_task import GaitExpert, LocoWorld, WorldSettings
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.terms import TERMS, ObsInputs

REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('simreal_quad')
SPEC = load_policy_spec('simreal_quad_walk')
Z = np.zeros(12)


def inputs(cmd=None, age=None):
    return ObsInputs(position=ROBOT.home.copy(), velocity=Z, default=SPEC.default,
                     last_action=Z, goal=SPEC.default, time_s=0.0, imu_gyro=np.zeros(3),
                     imu_quat_wxyz=np.array([1.0, 0, 0, 0]), cmd_vel=cmd, cmd_vel_age_s=age)


def command_slice(obs):
    start, stop = next((a, b) for n, a, b in SPEC.layout() if n == 'velocity_command')
    return obs[start:stop]


def test_velocity_command_is_the_scaled_command_and_zero_when_missing_or_stale():
    term = next(t for t in SPEC.observation if t.name == 'velocity_command')
    assert term.options == {'timeout_s': 0.5} and TERMS[term.name].needs == ('cmd_vel',)
    b = ObservationBuilder(SPEC)
    cmd = np.array([0.4, -0.1, 0.5])
    np.testing.assert_allclose(b.term_value(term, inputs(cmd, 0.0)), [0.8, -0.2, 0.5])
    np.testing.assert_allclose(b.term_value(term, inputs(cmd, 0.5)), [0.8, -0.2, 0.5])
    np.testing.assert_array_equal(b.term_value(term, inputs(cmd, 0.51)), np.zeros(3))
    np.testing.assert_array_equal(b.term_value(term, inputs(None, None)), np.zeros(3))
    with pytest.raises(ValueError, match='3 finite numbers'):
        b.term_value(term, inputs(np.array([np.nan, 0, 0]), 0.0))


def test_the_walk_spec_uses_only_what_a_real_robot_measures():
    assert [t.name for t in SPEC.observation] == [
        'base_ang_vel', 'projected_gravity', 'velocity_command', 'phase', 'joint_pos_rel',
        'joint_vel', 'last_action']
    assert SPEC.obs_dim == 47 and SPEC.act_dim == 12 and SPEC.control_rate_hz == 50
    assert SPEC.needs == {'imu', 'cmd_vel', 'clock', 'joint_states'}


class Scripted:
    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.seen.append(obs.copy())
        return np.zeros(SPEC.act_dim)


def test_the_controller_feeds_cmd_vel_until_it_times_out():
    model = Scripted()
    c = PolicyController(SPEC, ROBOT, model)
    p = SPEC.period_ns
    q = ROBOT.home.copy()
    t = p

    def tick(t):
        c.set_state(ROBOT.joint_names, q, Z, t)
        c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], t)
        return c.step(t)
    tick(t)
    assert c.enable(t)[0]
    while c.mode != RUNNING:
        t += p
        tick(t)
    c.set_cmd_vel(0.4, 0.0, -0.5, t)
    t += p
    tick(t)
    np.testing.assert_allclose(command_slice(model.seen[-1]), [0.8, 0.0, -0.5])
    t += int(0.6e9)      # no new cmd_vel for 0.6 s > timeout_s: the zero command
    tick(t)
    np.testing.assert_array_equal(command_slice(model.seen[-1]), np.zeros(3))
    with pytest.raises(ValueError, match='NaN'):
        c.set_cmd_vel(np.nan, 0.0, 0.0, t)


def test_a_policy_that_folds_its_legs_falls_and_fails():
    world = LocoWorld(SPEC, ROBOT, WorldSettings(), 0, randomize=False, pushes=False)
    crouch = np.tile([0.0, 2.0, -2.0], 4)   # hips and knees folded by 1 rad: the body drops
    ep = run_episode(world, lambda _obs: crouch, 0, 3.0)
    assert ep['fall'] and ep['fall_time_s'] < 3.0
    standing = {'fall': False, 'fall_time_s': None, 'velocity_tracking_error_mps': 0.1,
                'velocity_tracking_error_instant_mps': 0.2, 'yaw_rate_error_rad_s': 0.3,
                'distance_m': 4.0, 'energy_j': 40.0, 'energy_per_m': 10.0}
    m = summarize([ep, standing])
    assert m['falls'] == 1 and m['success_rate'] == 0.5 and m['episodes'] == 2


@pytest.mark.e2e
def test_the_expert_walks_at_the_commanded_speed_in_mujoco():
    world = LocoWorld(SPEC, ROBOT, WorldSettings(), 1, randomize=False, pushes=False)
    world.reset([0.4, 0.0, 0.0])
    expert = GaitExpert(ROBOT)
    v = []
    for _ in range(200):      # 4 s
        b = world.base()
        v.append(b.linear_velocity_in_base()[0])
        world.apply(world.label(expert.targets(world.t + world.tick_s, world.command, b,
                                               world.tick_s)))
    assert 0.3 < np.mean(v[100:]) < 0.5        # the last 2 s, m/s


@pytest.mark.e2e
def test_the_trainer_runs_on_a_tiny_budget_and_its_policy_loads(tmp_path):
    cli = subprocess.run([sys.executable, '-m', 'simreal_ros', 'train', 'simreal_quad_walk',
                          '--quick', '--out', str(tmp_path), '--json'], capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    summary = json.loads(cli.stdout.strip().splitlines()[-1])
    assert summary['policy'] == 'simreal_quad_walk' and len(summary['rounds']) == 1
    assert summary['rounds'][0]['samples'] > 0
    assert summary['check_mujoco']['episodes'] == 1
    spec = load_policy_spec(tmp_path / 'simreal_quad_walk.yaml')
    assert spec.model == tmp_path / 'simreal_quad_walk.pt' and spec.model.is_file()


@pytest.mark.e2e
def test_the_shipped_walk_policy_walks_without_falling_in_mujoco():
    from simreal_ros.policy.locomotion_eval import network_policy
    r = evaluate(SPEC, network_policy(SPEC), 'mujoco', episodes=1, seed=5, duration_s=6.0)
    m = r['metrics']
    assert m['falls'] == 0
    assert m['velocity_tracking_error_mps'] < 0.15
    assert m['distance_m'] > 1.5      # 0.4 m/s for 3 s, then 0.3 m/s for 3 s


def test_locomotion_eval_refuses_the_twin_backend():
    # a real process: --backend real runs on the virtual legged robot (test_locomotion_real.py)
    cli = subprocess.run([sys.executable, '-m', 'simreal_ros', 'eval', '--policy',
                          'simreal_quad_walk', '--backend', 'twin'], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert cli.returncode != 0
    assert 'is evaluated on sim, sim2sim or real (the virtual legged robot)' in \
        cli_error_line(cli)


def test_locomotion_training_config_errors_name_the_key():
    from simreal_ros.errors import ConfigError
    from simreal_ros.policy.locomotion_train import is_locomotion, load_loco_config
    assert is_locomotion('simreal_quad_walk') and not is_locomotion('simreal_arm_reach')
    with pytest.raises(ConfigError, match='envs') as exc:
        load_loco_config('simreal_quad_walk', envs=0)
    assert exc.value.source == 'override'
    with pytest.raises(ConfigError, match='push_force_n'):
        load_loco_config('simreal_quad_walk', push_force_n=-1.0)


def test_a_training_randomization_with_pushes_is_refused(tmp_path):
    from simreal_ros.errors import ConfigError
    from simreal_ros.policy.locomotion_train import load_loco_config
    text = (REPO / 'config/training/simreal_quad_walk.yaml').read_text()
    assert 'randomization: legged ' in text
    cfg = tmp_path / 'walk.yaml'
    cfg.write_text(text.replace('randomization: legged ', 'randomization: legged_pushes '))
    with pytest.raises(ConfigError) as exc:
        load_loco_config(cfg)
    assert str(exc.value) == (f"{cfg}: randomization: expected a randomization without "
                              "pushes: (the training world's pushes are push_force_n's, every "
                              "2-4 s for 0.15 s), got 'legged_pushes'")


@pytest.mark.e2e
def test_sim2sim_eval_reports_both_engines_and_their_ratios():
    cli = subprocess.run([sys.executable, '-m', 'simreal_ros', 'eval', '--policy',
                          'simreal_quad_walk', '--backend', 'sim2sim', '--episodes', '1',
                          '--episode-s', '2', '--json'], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    r = json.loads(cli.stdout)
    assert sorted(r['by_engine']) == ['mujoco', 'pybullet']
    for m in r['by_engine'].values():
        assert m['episodes'] == 1 and set(m) >= {
            'success_rate', 'velocity_tracking_error_mps', 'distance_m', 'energy_per_m',
            'falls'}
    assert r['sim2sim']['reference'] == 'mujoco' and r['sim2sim']['other'] == 'pybullet'


def test_the_randomized_training_world_pushes_as_before_the_shared_draw():
    """Seed 5's first push and the generator's state after it, as measured at f88e2b5.

    The world's pushes now come from core/pushes.py; the observation noise draws from the same
    generator between two pushes, so a change of the draws' order or timing moves both.
    """
    world = LocoWorld(SPEC, ROBOT, WorldSettings(), 5, randomize=True)
    seen = []
    push = world.sim.push_base

    def record(f):
        seen.append((round(world.t, 6), [float(x) for x in f]))
        push(f)
    world.sim.push_base = record
    for _ in range(int(round(2.4 / world.tick_s))):
        world.observation()
        world.apply(np.zeros(SPEC.act_dim))
    assert seen == [(2.32, [-3.9846140881566643, -0.5120863577628285, 0.0])]
    assert world.next_push == 5.451373269404353
    assert world.rng.random() == 0.5740374344578808  # every draw in between, noise included


def test_the_legged_pushes_example_is_the_training_worlds_randomization():
    from simreal_ros.core.dynamics import load_randomization
    ex, legged = load_randomization('legged_pushes'), load_randomization('legged')
    assert ex.pushes == WorldSettings().push_ranges()
    assert (ex.joints, ex.bodies, ex.command_delay_s, ex.friction_scale) == \
        (legged.joints, legged.bodies, legged.command_delay_s, legged.friction_scale)
