"""A robot's legged streams read from a real bag (simreal_ros/gap/legged_bag.py): the IMU's
recording edges are left out with a note, a message lost inside its span leaves it out."""

from __future__ import annotations

from pathlib import Path

from episode_bags import T0, TS, _time, joint_state
import numpy as np

from simreal_ros.bag import BagOptions, BagWriter, QosSpec
from simreal_ros.gap.legged_bag import read_legged

T = TS.types
PERIOD_NS = 10_000_000  # 100 Hz, as the sim bridge publishes
N = 50


def header(stamp_ns: int):
    return T['std_msgs/msg/Header'](_time(stamp_ns), 'odom')


def vec(x: float, y: float, z: float):
    return T['geometry_msgs/msg/Vector3'](x, y, z)


def odom(stamp_ns: int) -> bytes:
    pose = T['geometry_msgs/msg/Pose'](T['geometry_msgs/msg/Point'](0.0, 0.0, 0.165),
                                       T['geometry_msgs/msg/Quaternion'](0.0, 0.0, 0.0, 1.0))
    msg = T['nav_msgs/msg/Odometry'](
        header(stamp_ns), 'base_link', T['geometry_msgs/msg/PoseWithCovariance'](
            pose, np.zeros(36)),
        T['geometry_msgs/msg/TwistWithCovariance'](
            T['geometry_msgs/msg/Twist'](vec(0, 0, 0), vec(0, 0, 0)), np.zeros(36)))
    return bytes(TS.serialize_cdr(msg, 'nav_msgs/msg/Odometry'))


def imu(stamp_ns: int, k: int) -> bytes:
    msg = T['sensor_msgs/msg/Imu'](
        header(stamp_ns), T['geometry_msgs/msg/Quaternion'](0.0, 0.0, 0.0, 1.0), np.zeros(9),
        vec(0.01 * k, 0, 0), np.zeros(9), vec(0, 0, 9.81), np.zeros(9))
    return bytes(TS.serialize_cdr(msg, 'sensor_msgs/msg/Imu'))


def write_bag(path: Path, imu_samples: list[int]) -> None:
    """odom and foot_contacts for samples 0..N-1 of /sim_a/, imu/data for ``imu_samples``."""
    with BagWriter(path, BagOptions(), {}) as w:
        ho = w.add_topic('/sim_a/odom', 'nav_msgs/msg/Odometry', [QosSpec()])
        hf = w.add_topic('/sim_a/foot_contacts', 'sensor_msgs/msg/JointState', [QosSpec()])
        hi = w.add_topic('/sim_a/imu/data', 'sensor_msgs/msg/Imu', [QosSpec()])
        for k in range(N):
            stamp = T0 + k * PERIOD_NS
            w.write(ho, stamp + 100_000, odom(stamp))
            w.write(hf, stamp + 200_000, joint_state(stamp, (), (), (10.0, 12.0), ('fl', 'fr')))
            if k in imu_samples:
                w.write(hi, stamp + 300_000, imu(stamp, k))


def test_imu_recorded_later_and_stopped_earlier_keeps_the_samples_it_covers(tmp_path):
    write_bag(tmp_path / 'bag', list(range(3, N - 2)))  # subscribed 30 ms late, ended 20 ms early
    read = read_legged(str(tmp_path / 'bag'), ['/sim_a/'])['/sim_a/']
    ep = read.episode
    assert ep.stamps_ns.tolist() == [T0 + k * PERIOD_NS for k in range(3, N - 2)]
    assert ep.imu_gyro_rad_s is not None
    np.testing.assert_allclose(ep.imu_gyro_rad_s[:, 0], 0.01 * np.arange(3, N - 2))
    assert read.imu_note == ('/sim_a/imu/data starts 0.030 s after /sim_a/odom and ends '
                             '0.020 s before it: the 5 samples outside left out')


def test_imu_with_a_message_lost_inside_its_span_is_left_out(tmp_path):
    write_bag(tmp_path / 'bag', [k for k in range(N) if k != 20])
    read = read_legged(str(tmp_path / 'bag'), ['/sim_a/'])['/sim_a/']
    assert read.episode.imu_gyro_rad_s is None
    assert len(read.episode.stamps_ns) == N
    assert read.imu_note == '/sim_a/imu/data has 49 of the 50 odom stamps: IMU metrics left out'


def test_imu_on_every_stamp_joins_without_a_note(tmp_path):
    write_bag(tmp_path / 'bag', list(range(N)))
    read = read_legged(str(tmp_path / 'bag'), ['/sim_a/'])['/sim_a/']
    assert read.episode.imu_gyro_rad_s is not None and len(read.episode.stamps_ns) == N
    assert read.imu_note == ''
