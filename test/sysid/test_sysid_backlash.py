"""sysid models and identifies the virtual bus's backlash (one play shared with the emulator).

The bag is a servo-bus bag written in-process by the emulator's own arm
(:func:`simreal_ros.sysid.synth.record_servo_bag`: :class:`VirtualArm` with a reality of the
nominal dynamics and a known play, no noise, no latency), so the only things the replay does
not reproduce are the 4096-tick quantization (1.53 mrad a tick) and the backlash when it is
left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simreal_ros.cli import main
from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.emulator.backlash import play_trajectory
from simreal_ros.hardware.emulator.reality import VirtualArm
from simreal_ros.sysid import fit as fitmod
from simreal_ros.sysid.data import load_sysid_data
from simreal_ros.sysid.replay import Replayer
from simreal_ros.sysid.synth import record_servo_bag

ROBOT = load_robot('simreal_arm')
PLAY_RAD = 0.006


@pytest.fixture(scope='module')
def play_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp('backlash')
    reality = d / 'reality.yaml'
    reality.write_text(f'robot: simreal_arm\nimperfections:\n  backlash_rad: {PLAY_RAD}\n')
    return record_servo_bag(d / 'bag', ROBOT, load_overlay(reality),
                            ExcitationConfig('sysid', 2.2, amplitude=0.3, ramp_s=0.3),
                            lead_s=0.1, tail_s=0.1)


@pytest.fixture(scope='module')
def replayer(play_bag: Path) -> Replayer:
    return Replayer(ROBOT, load_sysid_data(play_bag, ROBOT, None), nthread=1)


def _rmse(rp: Replayer, plays: list[float]) -> list[float]:
    segs = rp.segments(*rp.data.window_ns, None)
    pred = rp.predict([rp.nominal] * len(plays), [0] * len(plays), segs, plays)
    meas = rp.measured(segs)[0]
    return [float(np.sqrt(np.mean((p[0] - meas) ** 2))) for p in pred]


def test_the_emulator_measures_through_the_shared_play() -> None:
    # the emulator's measurement is the shared operator's output: link up 10 mrad, back 4
    arm = VirtualArm(ROBOT, load_overlay_text(f'imperfections: {{backlash_rad: {PLAY_RAD}}}'))
    q0 = arm.sim.joint_positions().copy()
    links = q0 + np.array([[0.0], [0.010], [0.006]])
    want = play_trajectory(q0, links, PLAY_RAD / 2)
    got = np.array([arm._measure(q, noise=False) for q in links])
    tick = 2 * np.pi / 4096
    assert np.abs(got - want).max() <= tick / 2 + 1e-12
    # inside the play after the reversal: the motor side stays 3 mrad below the top
    np.testing.assert_allclose(want[2], q0 + 0.007)


def test_the_stepped_rollout_without_feedback_is_the_batched_one() -> None:
    from simreal_ros.sim.backend import RolloutJob
    from simreal_ros.sim.engines import make_sim
    sim = make_sim(ROBOT)
    t = np.arange(300)[:, None] * 1e-3
    target = ROBOT.home + 0.3 * np.sin(2 * np.pi * 2.0 * t) * np.linspace(0.5, 1.0, ROBOT.n)
    rows = np.concatenate([target, np.zeros_like(target), np.zeros_like(target)], axis=1)
    jobs = [RolloutJob(0, ROBOT.home, np.zeros(ROBOT.n), rows)] * 2
    native = sim.rollout([sim.nominal], jobs, 1)
    stepped = sim.rollout([sim.nominal], jobs, 1, feedback=lambda _k, q: np.zeros_like(q))
    # the full physics state carried from step to step (measured: 3e-20 rad apart)
    assert np.abs(native - stepped).max() < 1e-12
    assert np.ptp(native[0], axis=0).min() > 0.05  # it moved


def test_the_replay_with_the_true_play_reproduces_the_emulator(replayer) -> None:
    without, half, true = _rmse(replayer, [0.0, PLAY_RAD / 2, PLAY_RAD])
    # measured on 3 s of this excitation: 0.52 mrad at the true play (a tick is 1.53 mrad, its
    # quantization RMS 0.44), 1.0 at half of it, 1.7 without: the play's half-width of 3 mrad
    # in every motion
    assert true < 0.0007, true
    assert half > 0.0008, half
    assert without > 0.0013, without


@pytest.mark.e2e  # a whole Gauss-Newton fit: ~100 replays of 1.2 s stepped one by one
def test_the_fit_recovers_the_play(replayer) -> None:
    rp = replayer
    specs = fitmod.build_specs(rp.nominal, ['backlash'], ROBOT.joint_names, [])
    lo = rp.data.window_ns[0]
    segs = rp.segments(lo, lo + 1_200_000_000, None)
    result = fitmod.Fitter(rp, specs, rp.nominal, segs, fit_delay=False).run()
    got = result.values[fitmod.BACKLASH_KEY]
    # measured 5.9 mrad (3 s of this excitation: 5.94, stddev 0.04 mrad)
    assert abs(got - PLAY_RAD) < 0.1 * PLAY_RAD, got
    assert result.backlash_rad == got
    assert fitmod.BACKLASH_KEY not in result.flags, result.flags


def test_validate_replays_the_overlays_play(capsys, replayer, play_bag, tmp_path) -> None:
    ov = tmp_path / 'fit.yaml'
    ov.write_text(f'robot: simreal_arm\nimperfections:\n  backlash_rad: {PLAY_RAD}\n')
    assert main(['sysid', 'validate', str(play_bag), '--overlay', str(ov), '--json']) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out['backlash_rad'] == PLAY_RAD
    assert out['open_loop']['total_rad'] == pytest.approx(_rmse(replayer, [PLAY_RAD])[0])


def load_overlay_text(body: str):
    """An overlay of simreal_arm from ``body`` (YAML) via the real loader."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / 'ov.yaml'
        p.write_text(f'robot: simreal_arm\n{body}\n')
        return load_overlay(p)


@pytest.mark.parametrize('value', [0.5, -0.001])
def test_a_bad_play_is_one_error_line(capsys, play_bag, tmp_path, value) -> None:
    ov = tmp_path / 'bad.yaml'
    ov.write_text(f'robot: simreal_arm\nimperfections:\n  backlash_rad: {value}\n')
    code = main(['sysid', 'validate', str(play_bag), '--overlay', str(ov)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith('simreal sysid: error: '), lines
    assert 'imperfections.backlash_rad' in lines[0], lines[0]
    assert 'Traceback' not in err


def test_the_emulator_refuses_a_play_beyond_a_gearbox() -> None:
    with pytest.raises(ConfigError, match=r'imperfections\.backlash_rad: expected a total play '
                                          r'in \[0, 0\.1\] rad, got 0\.5'):
        VirtualArm(ROBOT, load_overlay_text('imperfections: {backlash_rad: 0.5}'))


@pytest.mark.e2e  # ~2.5 s of the STS emulator's arm stepped at 1 kHz in Python
def test_an_so101_servo_bag_replays_with_its_reality_and_play(tmp_path) -> None:
    so101 = load_robot('so101')
    reality = load_overlay('so101_reality')
    bag = record_servo_bag(tmp_path / 'bag', so101, reality,
                           ExcitationConfig('sysid', 2.2, f_max_hz=6.0, ramp_s=0.3),
                           lead_s=0.1, tail_s=0.1, sample_to_stamp_ns=2_800_000,
                           stamp_to_write_ns=900_000)
    rp = Replayer(so101, load_sysid_data(bag, so101, None), nthread=1)
    truth = reality.apply(rp.nominal, so101.name)
    segs = rp.segments(*rp.data.window_ns, None)
    # the servo's 8 ms plus the 3.7 ms pipeline: 12 whole steps
    pred = rp.predict([rp.nominal, truth], [0, 12], segs,
                      [0.0, reality.imperfections['backlash_rad']])
    meas = rp.measured(segs)[0]
    nominal, true = (float(np.sqrt(np.mean((p[0] - meas) ** 2))) for p in pred)
    # measured on 3 s: 10.2 mrad nominal, 1.35 mrad with the reality and its play (encoder
    # noise 0.5 mrad, 1.53 mrad ticks, the P register's quantization of kp)
    assert true < 0.002, true
    assert nominal > 0.005, nominal
