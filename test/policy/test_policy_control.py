"""The policy controller's safety state machine: enable, ramp, run, stale hold, rejection."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.control import DISABLED, HOLD, RAMPING, RUNNING, PolicyController
from simreal_ros.policy.spec import load_policy_spec

ROBOT = load_robot('simreal_arm')
SPEC = load_policy_spec('simreal_arm_reach')
P = SPEC.period_ns
NAMES = ROBOT.joint_names


class Scripted:
    """A stand-in network: returns what the test sets, records what it saw."""

    def __init__(self) -> None:
        self.output = np.zeros(SPEC.act_dim)
        self.seen: list[np.ndarray] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.seen.append(obs.copy())
        return self.output.copy()


def make(start=None):
    model = Scripted()
    c = PolicyController(SPEC, ROBOT, model)
    q = ROBOT.home + 0.4 if start is None else start
    return c, model, np.asarray(q, float)


def run_ticks(c, q, t0, ticks):
    out = []
    for k in range(ticks):
        t = t0 + k * P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        out.append(c.step(t))
    return out, t0 + ticks * P


def test_nothing_is_commanded_until_enabled():
    c, model, q = make()
    results, _ = run_ticks(c, q, P, 5)
    assert all(r.command is None and r.mode == DISABLED for r in results)
    assert not model.seen


def test_enable_is_refused_without_a_fresh_observation():
    c, _m, q = make()
    ok, why = c.enable(10 * P)
    assert not ok and 'no joint_states' in why
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    ok, why = c.enable(P + 10 * P)
    assert not ok and 'ms old' in why and 'sim time' in why
    ok, why = c.enable(2 * P)
    assert ok and 'ramping' in why and c.mode == RAMPING


def test_ramp_starts_at_the_measured_pose_and_ends_at_default_then_hands_over():
    c, model, q = make()
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    assert c.enable(P)[0]
    ticks = int(c.ramp_s * SPEC.control_rate_hz) + 3
    results, t = run_ticks(c, q, P, ticks)
    cmds = np.array([r.command for r in results if r.mode == RAMPING])
    np.testing.assert_allclose(cmds[0], q, atol=1e-9)  # first command = where the arm is
    steps = np.abs(np.diff(cmds, axis=0)).max()
    assert steps <= SPEC.safety.ramp_max_velocity / SPEC.control_rate_hz * 1.01
    assert c.mode == RUNNING  # the network is called only after the ramp
    assert len(model.seen) == sum(r.mode == RUNNING for r in results) > 0
    np.testing.assert_allclose(cmds[-1], SPEC.default, atol=1e-9)
    # the policy's first command after the ramp starts from the default pose (rate limited)
    model.output = np.full(SPEC.act_dim, 4.0)
    r = c.step(t)
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
    r = c.step(t)
    assert r.mode == RUNNING and model.seen
    np.testing.assert_allclose(np.abs(r.command - SPEC.default).max(), 2 * 0.06, atol=1e-9)


def enabled(ramp_done=True):
    c, model, q = make(start=ROBOT.home)
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    assert c.enable(P)[0]
    t = P
    if ramp_done:
        results, t = run_ticks(c, q, P, int(c.ramp_s * SPEC.control_rate_hz) + 2)
        assert c.mode == RUNNING
    return c, model, q, t


def test_observation_built_in_spec_order_from_state_goal_and_last_action():
    c, model, q, t = enabled()
    goal = ROBOT.home + 0.3
    c.set_goal(list(reversed(NAMES)), list(reversed(goal)))  # names in any order
    model.output = np.full(SPEC.act_dim, 0.1)
    v = np.arange(ROBOT.n) * 1.0
    for k in range(2):
        c.set_state(NAMES, q + 0.01, v, t + k * P)
        c.step(t + k * P)
    obs = model.seen[-1]
    n = ROBOT.n
    np.testing.assert_allclose(obs[:n], 0.01, atol=1e-12)
    np.testing.assert_allclose(obs[n:2 * n], 0.1 * v)
    np.testing.assert_allclose(obs[2 * n:3 * n], 0.3, atol=1e-12)
    np.testing.assert_allclose(obs[3 * n:], 0.1)  # last action


def test_stale_observations_hold_the_last_command_and_recover():
    c, model, q, t = enabled()
    model.output = np.full(SPEC.act_dim, 0.1)
    results, t = run_ticks(c, q, t, 3)
    last = results[-1].command
    stale_t = t + int(SPEC.safety.stale_after_periods * P) + P  # no new state since t - P
    r = c.step(stale_t)
    assert r.mode == HOLD and 'ms old' in r.event
    np.testing.assert_array_equal(r.command, last)
    n_calls = len(model.seen)
    r = c.step(stale_t + P)
    np.testing.assert_array_equal(r.command, last)
    assert len(model.seen) == n_calls and c.counts['stale_holds'] == 1
    c.set_state(NAMES, q, np.zeros(ROBOT.n), stale_t + 2 * P)
    r = c.step(stale_t + 2 * P)
    assert r.mode == RUNNING and len(model.seen) == n_calls + 1


def test_stale_during_the_ramp_pauses_it():
    c, _m, q = make()
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    c.enable(P)
    results, t = run_ticks(c, q, P, 10)
    before = results[-1].command
    r = c.step(t + 10 * P)
    assert r.mode == HOLD
    np.testing.assert_array_equal(r.command, before)
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t + 11 * P)
    r = c.step(t + 11 * P)
    assert r.mode == RAMPING
    assert np.abs(r.command - before).max() <= 0.5 / 50 * 1.01


@pytest.mark.parametrize('bad', [np.nan, np.inf, 1e6])
def test_bad_network_outputs_are_rejected_and_the_command_held(bad):
    c, model, q, t = enabled()
    model.output = np.full(SPEC.act_dim, 0.2)
    results, t = run_ticks(c, q, t, 3)
    good = results[-1].command
    model.output = np.full(SPEC.act_dim, 0.2)
    model.output[2] = bad
    results, t = run_ticks(c, q, t, 2)
    for r in results:
        assert r.mode == RUNNING and r.event.startswith('rejected')
        np.testing.assert_array_equal(r.command, good)
    assert c.counts['rejected_outputs'] == 2
    reason = ('network output 1e+06 for elbow_pitch is beyond action.reject_abs=50'
              if np.isfinite(bad) else
              f'network output contains NaN or inf: [0.2, 0.2, {bad}, 0.2, 0.2, 0.2]')
    assert c.last_fault == f'rejected: {reason}; holding the last command'


def test_a_raising_network_is_a_fault_not_a_crash():
    c, model, q, t = enabled()

    def broken(_obs):
        raise RuntimeError('shape mismatch inside the network')
    held = c.last_command.copy()
    c.model = broken
    results, _ = run_ticks(c, q, t, 2)
    for r in results:
        assert r.mode == RUNNING
        assert r.event == ('rejected: model call failed: shape mismatch inside the network; '
                           'holding the last command')
        np.testing.assert_array_equal(r.command, held)
    assert c.counts['rejected_outputs'] == 2


def test_commands_never_leave_the_limits():
    c, model, q, t = enabled()
    model.output = np.full(SPEC.act_dim, 49.0)  # below reject_abs: clipped, not rejected
    results, t = run_ticks(c, q, t, 200)
    cmds = np.array([r.command for r in results])
    assert np.all(cmds <= SPEC.upper + 1e-12) and np.all(cmds >= SPEC.lower - 1e-12)
    np.testing.assert_allclose(cmds[-1], np.minimum(SPEC.default + 3.0, SPEC.upper))
    assert c.counts['clipped_actions'] > 0


def test_bad_states_and_goals_are_rejected_with_a_reason():
    c, _m, q, t = enabled()
    with pytest.raises(ValueError, match='NaN'):
        c.set_state(NAMES, [np.nan] + list(q[1:]), np.zeros(ROBOT.n), t)
    with pytest.raises(ValueError, match='lacks joints'):
        c.set_state(NAMES[:3], q[:3], np.zeros(3), t)
    with pytest.raises(ValueError, match='no velocity'):
        c.set_state(NAMES, q, [], t)
    assert c.counts['rejected_states'] == 3
    with pytest.raises(ValueError, match='NaN'):
        c.set_goal(NAMES, [np.inf] * ROBOT.n)
    with pytest.raises(ValueError, match='6 values'):
        c.set_goal([], [0.0, 1.0])
    assert c.set_goal([], ROBOT.upper + 1.0)  # clamped into the limits
    np.testing.assert_allclose(c.goal, SPEC.upper)


def test_disable_stops_commanding():
    c, model, q, t = enabled()
    assert 'was running' in c.disable()
    results, _ = run_ticks(c, q, t, 3)
    assert all(r.command is None for r in results)


def test_rate_override_runs_staleness_and_rate_limit_at_the_node_rate():
    fast = SPEC.at_rate(200.0)
    p = fast.period_ns
    c = PolicyController(fast, ROBOT, Scripted())
    assert c.stale_after_ns == int(SPEC.safety.stale_after_periods * p) == 15_000_000
    q = np.asarray(ROBOT.home, float)
    c.set_state(NAMES, q, np.zeros(ROBOT.n), p)
    assert c.enable(p)[0]
    assert c.step(p + c.stale_after_ns + 1).mode == HOLD  # 3 periods of 5 ms, not of 20 ms
    for k in range(int(c.ramp_s * 200) + 3):
        c.set_state(NAMES, q, np.zeros(ROBOT.n), (k + 10) * p)
        c.step((k + 10) * p)
    assert c.mode == RUNNING
    c.model.output = np.full(SPEC.act_dim, 4.0)
    cmds = []
    for k in range(3):
        t = (k + 1000) * p
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        cmds.append(c.step(t).command)
    steps = np.abs(np.diff(cmds, axis=0)).max()
    assert steps == pytest.approx(0.06 * 50 / 200)  # still 3 rad/s


def imu_controller(tmp_path):
    import yaml

    from simreal_ros.policy.spec import load_policy_spec as load
    data = yaml.safe_load(SPEC.source.read_text())
    data['model'] = str(SPEC.model)
    data['observation'].append({'term': 'projected_gravity'})
    path = tmp_path / 'imu.yaml'
    path.write_text(yaml.safe_dump(data))
    spec = load(path)
    model = Scripted()
    return PolicyController(spec, ROBOT, model), model


def test_imu_terms_make_the_imu_part_of_the_freshness_check(tmp_path):
    c, model = imu_controller(tmp_path)
    q = np.asarray(ROBOT.home, float)
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    ok, why = c.enable(P)
    assert not ok and 'no imu/data' in why
    c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], P)
    assert c.enable(P)[0]
    t = P
    for _ in range(int(c.ramp_s * 50) + 3):
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], t)
        c.step(t)
    assert c.mode == RUNNING
    last = c.last_command
    n_calls = len(model.seen)
    # joint_states keep coming, the IMU stopped: hold, naming the IMU
    for _ in range(5):
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        r = c.step(t)
    assert r.mode == HOLD and 'imu/data is' in r.event and 'ms old' in r.event
    assert c.counts['stale_holds'] == 1
    assert len(model.seen) == n_calls + 3  # fresh for stale_after_periods (3), then held
    last = c.last_command
    n_calls = len(model.seen)
    t += P
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
    r = c.step(t)
    np.testing.assert_array_equal(r.command, last)
    assert len(model.seen) == n_calls
    with pytest.raises(ValueError, match='NaN'):
        c.set_imu([np.nan, 0, 0, 0], [0.0, 0.0, 0.0], t)
    assert c.counts['rejected_imu'] == 1
    c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], t)
    assert c.step(t).mode == RUNNING and len(model.seen) == n_calls + 1


def test_an_observation_that_cannot_be_built_holds_and_is_counted(tmp_path):
    c, model = imu_controller(tmp_path)
    q = np.asarray(ROBOT.home, float)
    t = P
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
    c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], t)
    assert c.enable(t)[0]
    for _ in range(int(c.ramp_s * 50) + 3):
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        c.set_imu([1.0, 0, 0, 0], [0.0, 0.0, 0.0], t)
        c.step(t)
    last = c.last_command
    n_calls = len(model.seen)
    for _ in range(3):
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        c.set_imu([0.0, 0, 0, 0], [0.0, 0.0, 0.0], t)  # finite but not a rotation
        r = c.step(t)
        assert r.mode == RUNNING and 'zero norm' in r.event
        np.testing.assert_array_equal(r.command, last)
    assert c.counts['observation_faults'] == 3 and len(model.seen) == n_calls
    assert 'observation' in c.last_fault
