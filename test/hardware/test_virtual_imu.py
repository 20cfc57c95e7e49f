"""The virtual WT901 of ``simreal emulate --imu-link``: at rest it reads gravity as the
simulation's IMU does, at the rate it was set to, with the hidden reality's bias."""

from __future__ import annotations

import math
import os
from pathlib import Path
import select
import time

import numpy as np
import pytest

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import SimrealError
from simreal_ros.hardware.emulator.reality import Imperfections
from simreal_ros.hardware.emulator.sts_servo import StsArm
from simreal_ros.hardware.emulator.virtual_imu import VirtualImu
from simreal_ros.hardware.feetech import control_table as ct
from simreal_ros.hardware.imu import witmotion as wit

QUAD = load_robot('simreal_quad')


def run(imu: VirtualImu, steps: int) -> list[wit.Sample]:
    """Step the physics ``steps`` times, ticking the IMU; return what its port carried.

    A pty may hand the bytes written to its master to the reader's side in a kernel worker
    after ``write`` returned (never seen here: 0 short reads of 2,000 at load 8), so it
    reads on until every byte the IMU wrote has come (an event with a deadline, not a pause)
    instead of counting on the last packets being there when the loop ends.
    """
    parser = wit.Parser()
    fd = os.open(imu.link, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    out: list[wit.Sample] = []
    got = 0

    def read() -> None:
        nonlocal got
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        got += len(data)
        out.extend(parser.feed(data))
    try:
        for _ in range(steps):
            imu.arm.step(1)
            imu.tick(math.inf)  # every byte due at once (no wire timing in this test)
            read()
        deadline = time.monotonic() + 30.0
        while got < imu.stats['bytes'] and time.monotonic() < deadline:
            select.select([fd], [], [], 0.1)
            read()
    finally:
        os.close(fd)
    assert got == imu.stats['bytes']
    assert parser.stats['bad_checksum'] == 0
    return out


def standing(arm: StsArm) -> StsArm:
    """Switch every servo on at the spec's gains (as the driver does) and let it settle 0.6 s.

    The robot starts at its home pose with its feet on the ground, so it stands: after
    0.5 s it is still (|specific force| 9.810 m/s^2, base 0.1625 m up, pitch 1.4 mrad).
    """
    for i, j in enumerate(QUAD.joints):
        for name, value in (('p_coefficient', ct.kp_to_register(j.kp, 4096,
                                                                 j.servo.torque_per_amp)),
                            ('torque_enable', 1)):
            it = ct.BY_NAME[name]
            arm.write(i, arm.servos[i].check_write(it.address,
                                                   int(value).to_bytes(it.size, 'little')))
    arm.step(600)
    return arm


@pytest.fixture
def resting_quad() -> StsArm:
    """The quadruped standing still on its feet."""
    return standing(StsArm(QUAD))


def test_at_rest_it_reads_gravity_as_the_sim_does(resting_quad, tmp_path: Path):
    imu = VirtualImu(resting_quad, tmp_path / 'ttyIMU')
    imu.plug()
    try:
        samples = run(imu, 50)
    finally:
        imu.unplug()
    obs = resting_quad.sim.observe()
    s = samples[-1]
    assert obs.imu_acc is not None and obs.imu_quat_wxyz is not None
    # the sim's specific force: 9.81 m/s^2, up in the body (it stands almost level)
    assert np.linalg.norm(obs.imu_acc) == pytest.approx(9.81, abs=0.005)
    assert obs.imu_acc[2] == pytest.approx(9.81, abs=0.005)
    # the last sample is the state of the last step: the reading is the sim's, quantised
    np.testing.assert_allclose(s.acc_m_s2, obs.imu_acc, atol=wit.ACC_LSB_M_S2 / 2)
    np.testing.assert_allclose(s.gyro_rad_s, obs.imu_gyro, atol=wit.GYRO_LSB_RAD_S / 2)
    q = np.array(obs.imu_quat_wxyz) * np.sign(obs.imu_quat_wxyz[0])
    np.testing.assert_allclose(s.quat_wxyz, q, atol=2 * wit.QUAT_LSB)


def test_it_sends_at_its_rate_in_physics_time(resting_quad, tmp_path: Path):
    imu = VirtualImu(resting_quad, tmp_path / 'ttyIMU', rate_hz=100.0)
    imu.plug()
    try:
        samples = run(imu, 1000)  # 1 s of physics
    finally:
        imu.unplug()
    assert len(samples) == 100
    assert imu.stats['bytes'] == 100 * 44


def test_the_hidden_reality_biases_the_readings(tmp_path: Path):
    overlay = load_overlay('simreal_quad_worn')
    imp = Imperfections.from_overlay(overlay)
    assert imp.imu_gyro_bias_rad_s == 0.005 and imp.imu_accel_bias_m_s2 == 0.05
    imu = VirtualImu(standing(StsArm(QUAD, overlay)), tmp_path / 'ttyIMU')
    truth: list[np.ndarray] = []
    imu.on_sample = lambda _t_ns, _q, gyro, acc: truth.append(np.concatenate([gyro, acc]))
    imu.plug()
    try:
        samples = run(imu, 1000)
    finally:
        imu.unplug()
    # 5 ms latency: the last sample is still held back; the others pair with their truth
    assert len(samples) == len(truth) == 199
    error = np.array([[*s.gyro_rad_s, *s.acc_m_s2] for s in samples]) - np.array(truth)
    mean = error.mean(axis=0)
    # each axis +/- the bias (sign drawn at power-up); the noise (0.0009 rad/s, 0.098 m/s^2)
    # averages to 0.00006 rad/s and 0.007 m/s^2 over 199 samples
    np.testing.assert_allclose(np.abs(mean[:3]), 0.005, atol=0.0005)
    np.testing.assert_allclose(np.abs(mean[3:]), 0.05, atol=0.025)
    np.testing.assert_array_equal(np.sign(mean[:3]), np.sign(imu.gyro_bias))
    assert error[:, 0].std() == pytest.approx(0.0009, rel=0.3)


def test_a_rate_the_baud_rate_cannot_carry_is_refused(resting_quad, tmp_path: Path):
    with pytest.raises(SimrealError, match='needs 88000 bit/s: more than --imu-baud 57600'):
        VirtualImu(resting_quad, tmp_path / 'ttyIMU', rate_hz=200.0, baud=57600)
    with pytest.raises(SimrealError, match='--imu-rate 300: expected one of the WT901 rates'):
        VirtualImu(resting_quad, tmp_path / 'ttyIMU', rate_hz=300.0)


@pytest.mark.parametrize('robot, extra, message', [
    ('so101', [], '--imu-link {imu}: robot so101 has no imu in its spec'),
    ('simreal_quad', ['--imu-baud', '9600'],
     '--imu-rate 200 needs 88000 bit/s: more than --imu-baud 9600 carries'),
    ('simreal_quad', ['--imu-link', '{bus}'],
     '--imu-link {bus}: the same path as --link: the IMU needs a port of its own'),
])
def test_emulate_bad_imu_options_are_one_error_line(tmp_path, simreal_cli, robot, extra,
                                                     message):
    bus, imu = tmp_path / 'ttyBUS', tmp_path / 'ttyIMU'
    args = ['emulate', '--robot', robot, '--link', str(bus), '--imu-link', str(imu)]
    r = simreal_cli(*args, *[a.format(bus=bus, imu=imu) for a in extra])
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and len(errors) == 1, r.stderr
    assert errors[0].startswith('simreal emulate: error: '
                                + message.format(bus=bus, imu=imu)), errors
    assert 'Traceback' not in r.stderr
    assert not bus.exists() and not imu.exists()
