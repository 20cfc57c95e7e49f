"""The state publisher over real DDS: URDF, static and moving TF checked against MuJoCo."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from startup import start_up_error
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from transforms3d import affines, quaternions

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages, qos
from simreal_ros.sim.mujoco.model import build_model

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def matrix(tf) -> np.ndarray:
    """4x4 of a geometry_msgs/Transform, decoded here, independently of the node's code."""
    t, r = tf.translation, tf.rotation
    return affines.compose([t.x, t.y, t.z], quaternions.quat2mat([r.w, r.x, r.y, r.z]),
                           np.ones(3))


def world_poses(messages_: list) -> dict[str, np.ndarray]:
    edges = {t.child_frame_id: (t.header.frame_id, matrix(t.transform))
             for m in messages_ for t in m.transforms}
    poses: dict[str, np.ndarray] = {'world': np.eye(4)}

    def pose(frame: str) -> np.ndarray:
        if frame not in poses:
            parent, m = edges[frame]
            poses[frame] = pose(parent) @ m
        return poses[frame]

    for frame in edges:
        pose(frame)
    return poses


def test_tf_matches_mujoco_body_poses_at_several_configurations(start_node, ros_client):
    import mujoco
    description = ros_client.collect(String, '/robot_description', qos.LATCHED)
    static = ros_client.collect(TFMessage, '/tf_static', qos.LATCHED)
    moving = ros_client.collect(TFMessage, '/tf', qos.TF)
    start_node('state_publisher', max_rate_hz=0.0)
    ros_client.wait_for(lambda: description and static, 30, 'latched description and static')
    assert description[-1][1].data == ROBOT.urdf.read_text()
    built = build_model(ROBOT)
    data = mujoco.MjData(built.model)
    pub = ros_client.publisher(JointState, 'joint_states')
    rng = np.random.default_rng(7)
    configurations = [ROBOT.home] + [rng.uniform(ROBOT.lower, ROBOT.upper) for _ in range(3)]
    for k, q in enumerate(configurations):
        stamp = 1_000_000_000 * (k + 1) + 17

        def arrived(stamp: int = stamp, q: np.ndarray = q) -> bool:
            pub.publish(messages.joint_state(ROBOT.joint_names, stamp, q))
            return any(messages.stamp_to_ns(m.transforms[0].header.stamp) == stamp
                       for _, m in moving)

        ros_client.wait_for(arrived, 20, f'/tf for configuration {k}')
        tf = next(m for _, m in moving
                  if messages.stamp_to_ns(m.transforms[0].header.stamp) == stamp)
        assert len(tf.transforms) == ROBOT.n
        poses = world_poses([static[-1][1], tf])
        data.qpos[built.qpos_adr] = q
        mujoco.mj_kinematics(built.model, data)
        for b in range(1, built.model.nbody):
            name = built.model.body(b).name
            assert poses[name][:3, 3] == pytest.approx(data.xpos[b], abs=1e-9), name
            assert np.allclose(poses[name][:3, :3], quaternions.quat2mat(data.xquat[b]),
                               atol=1e-9), name


def test_tf_is_throttled_by_stamp_and_nan_states_are_skipped(start_node, ros_client):
    moving = ros_client.collect(TFMessage, '/tf', qos.TF)
    start_node('state_publisher', max_rate_hz=10.0)
    pub = ros_client.publisher(JointState, 'joint_states')
    ms = 1_000_000

    def send(stamp: int, q: np.ndarray = ROBOT.home) -> None:
        pub.publish(messages.joint_state(ROBOT.joint_names, stamp, q))

    def stamps() -> list[int]:
        return [messages.stamp_to_ns(m.transforms[0].header.stamp) for _, m in moving]

    def until_tf(stamp: int) -> None:  # the stream is reliable and ordered: earlier ones are in
        ros_client.wait_for(lambda: send(stamp) or stamp in stamps(), 30, f'/tf at {stamp}')

    until_tf(1000 * ms)
    send(1050 * ms)  # 50 ms after the last published one: throttled
    until_tf(1100 * ms)
    nan = ROBOT.home.copy()
    nan[2] = np.nan
    send(1220 * ms, nan)  # skipped, and it does not count as published ...
    until_tf(1250 * ms)  # ... else this one, 30 ms after it, would be throttled
    assert sorted(set(stamps())) == [1000 * ms, 1100 * ms, 1250 * ms]


def test_unknown_robot_is_one_clear_error(start_node):
    p = start_node('state_publisher', robot='no_such_robot')
    assert 'no_such_robot' in start_up_error(p)
