"""The virtual legged robot end to end: ``simreal emulate --robot simreal_quad --imu-link``
serves the quadruped's twelve STS3215 and its WT901 IMU, ``simreal launch backend:=real``
drives them through the vendor SDK and the IMU driver, a reset stands the robot up, and what
``joint_states`` and ``imu/data`` say agrees with the emulator's physics (its trace)."""

from __future__ import annotations

from pathlib import Path
import signal
import subprocess
import sys

import numpy as np
import pytest
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.imu import witmotion as wit
from simreal_ros.ros.messages import stamp_to_ns

pytestmark = [pytest.mark.ros, pytest.mark.e2e]
REPO = Path(__file__).resolve().parents[2]
QUAD = load_robot('simreal_quad')
#: where the base stands at home in the physics (test_virtual_imu.py: 0.1625 m)
STANDING_Z_M = 0.1625
#: at rest: this many trace samples (0.2 s at the IMU's 200 Hz) without motion
REST_SAMPLES = 40


def imu_trace(path: Path) -> np.ndarray:
    """Rows of the emulator trace's imu lines: time_ns, quat (4), gyro (3), acc (3), base z."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith('imu '):
            parts = line.split()
            rows.append([float(v) for v in parts[1:12]] + [float(parts[12].split('=')[1])])
    return np.array(rows)


def reading(msg: Imu) -> np.ndarray:
    o, g, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    return np.array([o.w, o.x, o.y, o.z, g.x, g.y, g.z, a.x, a.y, a.z])


def match(msg: Imu, trace: np.ndarray) -> float | None:
    """Latency (s) from the physics sample a message carries to its stamp (None: no match).

    The message's values are the sample's quantised to one count of the protocol; the match
    is the latest sample before the stamp within half a count (quaternion: two).
    """
    stamp = stamp_to_ns(msg.header.stamp)
    r = reading(msg)
    tol = np.array([2 * wit.QUAT_LSB] * 4 + [wit.GYRO_LSB_RAD_S / 2 + 1e-9] * 3
                   + [wit.ACC_LSB_M_S2 / 2 + 1e-9] * 3)
    before = trace[(trace[:, 0] <= stamp) & (trace[:, 0] > stamp - 2e8)]
    q = before[:, 1:5] * np.sign(before[:, 1:2])  # the device sends w >= 0
    ok = np.all(np.abs(np.hstack([q, before[:, 5:11]]) - r) <= tol, axis=1)
    if not ok.any():
        return None
    return (stamp - before[ok][-1, 0]) / 1e9


@pytest.mark.timing  # every IMU message within 50 ms of its physics sample: a latency
def test_virtual_quadruped_stands_on_backend_real_and_its_imu_agrees_with_the_physics(
        ros_env, ros_client, tmp_path):
    states = ros_client.collect(JointState, 'joint_states')
    imus = ros_client.collect(Imu, 'imu/data')
    trace = tmp_path / 'trace'
    with EmulatorProcess(link=tmp_path / 'ttyQUAD', robot='simreal_quad',
                         imu_link=tmp_path / 'ttyIMU', trace=trace, env=ros_env) as emu:
        assert f'imu {tmp_path / "ttyIMU"}' in emu.lines
        proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'launch',
                                 'backend:=real', 'robot:=simreal_quad', f'port:={emu.port}',
                                 f'imu_port:={tmp_path / "ttyIMU"}'],
                                env=ros_env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            ros_client.wait_for(lambda: len(states) > 5 and len(imus) > 5, 60,
                                'joint_states and imu/data from the drivers')
            assert list(states[-1][1].name) == QUAD.joint_names
            assert imus[-1][1].header.frame_id == 'imu_link'
            # torque came on where the robot was: it stood up from its home start or sank;
            # the reset moves every joint to home at 0.5 rad/s
            reply = ros_client.call(Trigger, 'feetech_driver/reset', Trigger.Request())
            assert reply.success, reply.message

            def standing() -> bool:
                rows = imu_trace(trace)
                q = np.array(states[-1][1].position)
                return bool(len(rows) and abs(rows[-1, 11] - STANDING_Z_M) < 0.004
                            and np.abs(q - QUAD.home).max() < 0.03)

            rest_from_ns = []

            def at_rest() -> bool:
                """The physics (the trace: the true values) still for the last 0.2 s."""
                rows = imu_trace(trace)[-REST_SAMPLES:]
                still = bool(len(rows) == REST_SAMPLES and np.ptp(rows[:, 11]) < 1e-4
                             and np.abs(rows[:, 5:8]).max() < 0.01
                             and np.abs(np.linalg.norm(rows[:, 8:11], axis=1) - 9.81).max()
                             < 0.005)
                if still:
                    rest_from_ns.append(int(rows[0, 0]))
                return still

            def stamped_at_rest() -> list[Imu]:
                return [m for _t, m in list(imus)
                        if stamp_to_ns(m.header.stamp) >= rest_from_ns[0]]
            # deadlines for a load average of 12, where the whole test took 25-47 s: the
            # reset's 0.5 rad/s ramp takes a few seconds of emulator time, then the body
            # settles; 40 samples take 0.2 s at 200 Hz. Standing at home is not yet at rest,
            # and under load this client receives imu/data late: the 40 messages received
            # after "standing" carried the settling sway (|specific force| 9.73-9.92 m/s^2
            # in the last one: 5 of 6 runs failed at load 10-13), and even after the physics came
            # to rest some received next were sampled before. So it waits for the physics at
            # rest and takes the messages by their stamps, not by when they came.
            ros_client.wait_for(standing, 60, 'the robot standing at home in the physics')
            ros_client.wait_for(at_rest, 60, 'the robot at rest in the physics')
            ros_client.wait_for(lambda: len(stamped_at_rest()) > 40, 30,
                                '40 IMU samples stamped at rest')
            late = stamped_at_rest()
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            print(out)
        assert proc.returncode == 0, out
    rows = imu_trace(trace)
    # standing, near level (the legs' sag under the servos' P law pitches it a few mrad):
    # imu/data reads gravity, 9.81 m/s^2, up in the body
    last = reading(late[-1])
    assert np.linalg.norm(last[7:10]) == pytest.approx(9.81, abs=0.01)
    roll, pitch, _yaw = wit.euler_from_quat(tuple(last[:4]))
    assert abs(roll) < 0.02 and abs(pitch) < 0.02
    assert last[9] == pytest.approx(9.81 * np.cos(roll) * np.cos(pitch), abs=0.01)
    # every message is a sample of the physics, quantised, a few ms old (the wire alone takes
    # 3.8 ms; at rest successive samples are equal, so a message may match a later one: the
    # latency printed is a lower bound)
    latencies = [match(m, rows) for m in late]
    assert None not in latencies
    print(f'IMU latency, physics sample -> imu/data stamp: median '
          f'{np.median(latencies) * 1e3:.1f} ms, max {np.max(latencies) * 1e3:.1f} ms')
    assert max(latencies) < 0.05
