"""``simreal eval --backend real`` for a locomotion policy: the virtual legged robot over ROS,
pushed and measured through the emulator's hidden world (hardware/emulator/hidden_world.py)."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.hidden_world import (
    HiddenWorld,
    format_truth,
    parse_truth,
    parse_world_line,
)
from simreal_ros.policy.locomotion_eval import EPISODE_S, episode_pushes
from simreal_ros.policy.locomotion_task import LocoWorld, WorldSettings
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.sim.backend import BaseState

SPEC = load_policy_spec('simreal_quad_walk')
QUAD = load_robot('simreal_quad')


@pytest.mark.parametrize('line,reason', [
    ('push 1 2 3', 'expected push FX FY FZ DURATION_S (4 numbers)'),
    ('push 1 2 x 0.1', 'expected push FX FY FZ DURATION_S'),
    ('push 1 0 0 6', 'a push lasts (0, 5] s, got 6.0'),
    ('push nan 0 0 0.1', 'a push force is 3 finite numbers'),
    ('truth 500', 'expected truth RATE_HZ (0 to stop, at most 200)'),
    ('place target 0 0 0', "unknown command 'place': expected one of push, truth, stand"),
    ('stand up', 'expected stand (no arguments)'),
    ('jump', "unknown command 'jump'"),
])
def test_a_hidden_world_line_it_cannot_use_names_the_reason(line, reason):
    with pytest.raises(ValueError) as exc:
        parse_world_line(line)
    assert reason in str(exc.value)


def test_push_and_truth_lines_parse():
    kind, push = parse_world_line('push 3 -4 0 0.15')
    assert kind == 'push' and push.force_n.tolist() == [3.0, -4.0, 0.0]
    assert push.duration_s == 0.15
    assert parse_world_line('truth 50') == ('truth', 50.0)
    base = BaseState(np.array([1.0, 2.0, 0.16]), np.array([1.0, 0.0, 0.0, 0.0]),
                     np.array([0.4, 0.0, 0.0]), np.array([0.0, 0.0, 0.5]))
    stamp, physics_s, got, energy = parse_truth(format_truth(123, 4.5, base, 7.25))
    assert (stamp, physics_s, energy) == (123, 4.5, 7.25)
    np.testing.assert_array_equal(got.linear_velocity_in_base(), [0.4, 0.0, 0.0])
    np.testing.assert_array_equal(got.position, base.position)


def test_the_hidden_world_pushes_the_base_and_streams_its_truth():
    from simreal_ros.hardware.emulator.sts_servo import StsArm
    arm = StsArm(QUAD)
    lines: list[str] = []
    world = HiddenWorld(arm, lines.append, lambda: 1000 + arm.step_count,
                        stream=io.StringIO('truth 50\nbogus\npush 0 0 60 0.05\n'))
    world.thread.join(timeout=5)
    world.tick(0.0)
    assert lines[0].startswith('error: unknown command')
    assert lines[1:3] == ['streaming truth 50', 'pushed 0.0000 0.0000 60.0000 0.05 1000']
    for _ in range(100):  # 0.1 s at 1 kHz, ticked after every step as the emulator's loop
        arm.step(1)
        world.tick(0.0)
    truth = [parse_truth(line) for line in lines if line.startswith('truth ')]
    # a line at the start and every 20 steps (50 Hz), stamped by the clock given
    assert [t[0] for t in truth] == [1000 + 20 * k for k in range(6)]
    assert [t[1] for t in truth] == pytest.approx([0.02 * k for k in range(6)])
    # 60 N up for 50 steps lifts the 1.8 kg robot off the ground, then the push has ended
    assert truth[2][2].linear_velocity[2] > 0.3
    assert world.push_end_step is None
    assert truth[-1][3] == 0.0  # torque off (as powered up): the servos spend nothing
    # stood up: back at the start's pose (the home keyframe), at rest
    world.pending.put(parse_world_line('stand'))
    world.tick(0.0)
    assert lines[-1] == f'stood {1000 + arm.step_count}'
    arm.step(1)
    base = arm.sim.observe().base
    np.testing.assert_allclose(base.position, truth[0][2].position, atol=1e-4)
    assert np.abs(base.linear_velocity).max() < 0.05


def test_the_pushes_are_the_in_process_worlds_pushes():
    world = LocoWorld(SPEC, QUAD, WorldSettings(), 7, randomize=False)
    seen: list[tuple[float, list[float]]] = []
    world.sim.push_base = lambda f: seen.append((world.t, list(f)))  # type: ignore[method-assign]
    for _ in range(int(round(EPISODE_S / world.tick_s))):  # the world's clock, no physics
        world._push()
        world.t += world.tick_s
    want = episode_pushes(7, EPISODE_S, world.tick_s)
    applied = [(t, f) for t, f in seen if any(f)]
    assert len(want) >= 5
    assert [t for t, _f in applied] == pytest.approx([t for t, _f in want])
    np.testing.assert_allclose([f for _t, f in applied], [f for _t, f in want])


@pytest.mark.parametrize('args,reason', [
    (['--backend', 'twin'], '--backend twin: a locomotion policy (simreal_quad_walk) is '
     'evaluated on sim, sim2sim or real (the virtual legged robot)'),
    (['--backend', 'real', 'port:=/dev/ttyUSB0'], 'port:=/dev/ttyUSB0: on a real legged '
     'robot simreal eval has no ground truth of the base (it has no odometry)'),
    (['--backend', 'real', '--reality', 'worn_arm'], '--reality worn_arm: a reality of '
     'simreal_arm'),
    (['--backend', 'real', 'robot:=simreal_arm'], 'simreal_quad'),
    (['--backend', 'sim', '--reality', 'simreal_quad_worn'], 'only for the virtual servo bus'),
])
def test_a_bad_real_locomotion_eval_is_one_error_line(simreal_cli, args, reason):
    r = simreal_cli('eval', '--policy', 'simreal_quad_walk', *args)  # nothing starts
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith('simreal eval: error: ') and reason in lines[0]


@pytest.mark.e2e
@pytest.mark.ros
def test_one_short_episode_on_the_virtual_legged_robot(ros_env):
    """The policy walks the worn virtual robot on cmd_vel, pushed, scored from the truth."""
    from simreal_ros.jobs.eval import EvalSettings
    from simreal_ros.jobs.locomotion import run_locomotion_eval
    # seed 3: the 3 s episode has one push (at 2.48 s), applied in the emulator's world
    pushes = episode_pushes(3, 3.0, 1.0 / SPEC.control_rate_hz)
    assert len(pushes) == 1
    logs: list[str] = []
    res = run_locomotion_eval(EvalSettings(
        backend='real', policy='simreal_quad_walk', episodes=1, seed=3, episode_s=3.0,
        reality='simreal_quad_worn', start_timeout_s=120.0), logs.append, ros_env)
    assert sorted(res['by_engine']) == ['mujoco', 'real']
    real = res['metrics']
    assert res['by_engine']['real'] is real and real['episodes'] == 1, logs
    (ep,) = res['episodes']
    assert ep['pushes'] == 1
    assert not ep['fall'], logs
    assert math.isfinite(ep['velocity_tracking_error_mps']) and ep['energy_j'] > 1.0
    assert ep['distance_m'] > 0.1, logs  # cmd_vel reached the policy: the robot walked
    assert res['real_vs_sim']['tracking_error_ratio'] == pytest.approx(
        real['velocity_tracking_error_mps']
        / res['by_engine']['mujoco']['velocity_tracking_error_mps'])
    assert int(res['policy_diagnostics']['commands_published']) > 100
    json.dumps(res)  # the --json result


def test_the_virtual_imu_is_set_to_the_rate_the_driver_is_told(tmp_path):
    from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
    emu = EmulatorProcess(tmp_path / 'bus', robot='simreal_quad', imu_link=tmp_path / 'imu',
                          world=True, imu_rate_hz=100.0)  # not started
    assert emu.cmd[-4:] == ['--imu-link', str(tmp_path / 'imu'), '--imu-rate', '100']
    assert '--imu-rate' not in EmulatorProcess(tmp_path / 'b2', robot='simreal_quad').cmd


def test_the_virtual_legged_robot_is_stopped_when_the_start_up_fails(monkeypatch, ros_env,
                                                                     started_emulators):
    from simreal_ros.errors import LaunchError
    import simreal_ros.jobs.eval as ev
    from simreal_ros.jobs.locomotion import run_locomotion_eval
    started = started_emulators

    def broken(*_args):
        raise LaunchError('the stack exploded after the emulator started')

    monkeypatch.setattr(ev, 'EvalStack', broken)
    with pytest.raises(LaunchError, match='exploded'):
        run_locomotion_eval(ev.EvalSettings(backend='real', policy='simreal_quad_walk',
                                            episodes=1, episode_s=0.2),
                            lambda _line: None, ros_env)
    (emu,) = started
    assert emu.world and emu.proc is not None and emu.proc.poll() is not None, 'it leaked'
    assert not emu.link.exists()
