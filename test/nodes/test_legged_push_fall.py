"""Pushes over ROS and the policy's fall hand-over, with simreal_quad on the sim bridge over DDS.

A push on ``push`` (geometry_msgs/Wrench) changes the base's velocity by its impulse over the
total mass (in MuJoCo and PyBullet), and so does the random push a ``~/reset`` draws from a
randomization's ``pushes:``, at the time its answer gives; a sideways push that tips the robot
over makes the policy node (fall detection on by default for a floating base) stop its
network, command the measured positions (damping), say so once in its log and as ERROR on
/diagnostics, refuse to re-enable while the robot lies on its side, and take over again after a
reset puts it on its feet.
"""

from __future__ import annotations

import re

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Wrench
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
import torch
from transforms3d import quaternions
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_quad')
MASS_KG = 1.84  # the URDF's links summed (test/sim/test_quadruped.py)
G = 9.81


def wrench(fx: float = 0.0, fy: float = 0.0, fz: float = 0.0, tz: float = 0.0) -> Wrench:
    w = Wrench()
    w.force.x, w.force.y, w.force.z, w.torque.z = fx, fy, fz, tz
    return w


def world_vz(o: Odometry) -> float:
    """The base's vertical velocity in the world (odom's twist is in the base frame)."""
    q = o.pose.pose.orientation
    v = o.twist.twist.linear
    return float((quaternions.quat2mat([q.w, q.x, q.y, q.z]) @ [v.x, v.y, v.z])[2])


def status(diags: list, suffix: str) -> DiagnosticStatus | None:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(suffix):
                return st
    return None


def values(st: DiagnosticStatus | None) -> dict:
    return {} if st is None else {kv.key: kv.value for kv in st.values}


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_a_push_over_ros_changes_the_base_velocity_by_its_impulse(start_node, ros_client,
                                                                  engine):
    odom = ros_client.collect(Odometry, 'odom')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge', robot='simreal_quad', engine=engine, publish_rate_hz=200.0,
               push_duration_s=0.1, sim_time=True, diagnostics_period_s=0.3)
    ros_client.wait_for(lambda: odom and abs(odom[-1][1].pose.pose.position.z
                                             - ROBOT.base.height_m) < 0.005
                        and abs(world_vz(odom[-1][1])) < 0.01, 60, 'the quadruped standing')
    pub = ros_client.publisher(Wrench, 'push')
    ros_client.wait_for_subscribers(pub)
    pub.publish(wrench(tz=1.0))  # a torque is not a push: rejected, counted
    ros_client.wait_for(lambda: values(status(diags, 'sim bridge')).get('pushes_rejected')
                        == '1', 10, 'the push with a torque rejected')
    n = len(odom)
    pub.publish(wrench(fz=4 * MASS_KG * G))  # 4 m g up for 0.1 s: +3 g

    def risen_and_slowed() -> bool:  # above 2 m/s, then below 1 m/s (gravity slows it)
        vz = [world_vz(o) for _t, o in odom[n:]]
        up = next((k for k, v in enumerate(vz) if v > 2.0), None)
        return up is not None and min(vz[up:]) < 1.0
    ros_client.wait_for(risen_and_slowed, 20, 'the base flying up, then slowing down')
    t = np.array([messages.stamp_to_ns(o.header.stamp) for _t, o in odom[n:]]) / 1e9
    vz = np.array([world_vz(o) for _t, o in odom[n:]])
    top = int(np.argmax(vz))
    # the sampled peak depends on where odom's samples fall (a loaded realtime bridge steps in
    # bigger blocks), so fit the two lines the push makes in sim time: pushed (from 0.3 m/s,
    # past the feet's unloading) and flying after it; they meet at the push's end
    rise = (np.arange(len(vz)) < top) & (vz > 0.3)
    fall = (np.arange(len(vz)) > top) & (vz > 1.0)
    a_push, b_push = np.polyfit(t[rise], vz[rise], 1)
    a_fly, b_fly = np.polyfit(t[fall], vz[fall], 1)
    assert a_push == pytest.approx(3 * G, rel=0.03)  # F / m - g
    assert a_fly == pytest.approx(-G, rel=0.03)  # the push has ended
    t_end = (b_fly - b_push) / (a_push - a_fly)
    # the push's impulse over the mass, less gravity's over its 0.1 s: 3 g * 0.1 s = 2.94 m/s
    assert a_push * t_end + b_push == pytest.approx(3 * G * 0.1, rel=0.03)
    assert values(status(diags, 'sim bridge'))['pushes'] == '1'


def world_vxy(o: Odometry) -> np.ndarray:
    """The base's horizontal velocity in the world."""
    q = o.pose.pose.orientation
    v = o.twist.twist.linear
    return (quaternions.quat2mat([q.w, q.x, q.y, q.z]) @ [v.x, v.y, v.z])[:2]


FIRST_PUSH = re.compile(r'the first at sim time ([\d.]+) s \(([\d.]+) s after the reset\), '
                        r'force \[([-\d.]+), ([-\d.]+), ([-\d.]+)\] N for ([\d.]+) s')


def test_a_reset_draws_a_push_that_changes_the_velocity_at_its_time(start_node, ros_client,
                                                                   tmp_path):
    """20 N for 0.1 s in a drawn direction, 0.5-0.6 s after the reset: +1.087 m/s.

    The feet's friction is scaled to 0.02 so that the ground takes at most 1.8 % of the
    impulse (test/sim/test_push.py: 44 % of it reached the base at friction x1).
    """
    rand = tmp_path / 'pushes.yaml'
    rand.write_text(yaml.safe_dump({'friction_scale': [0.02, 0.02], 'pushes': {
        'interval_s': [0.5, 0.6], 'force_n': [20.0, 20.0], 'duration_s': 0.1}}))
    odom = ros_client.collect(Odometry, 'odom')
    start_node('sim_bridge', robot='simreal_quad', randomization=str(rand), seed=3,
               publish_rate_hz=200.0, sim_time=True)
    ros_client.wait_for(lambda: odom, 60, 'odom')
    res = ros_client.call(Trigger, '/sim_bridge/reset', Trigger.Request())
    assert res.success
    m = FIRST_PUSH.search(res.message)
    assert m, res.message
    assert 'random pushes every 0.5-0.6 s, 20-20 N for 0.1 s' in res.message
    at_s, after_s = float(m[1]), float(m[2])
    force = np.array([float(m[3]), float(m[4])])
    assert 0.5 <= after_s <= 0.601 and float(m[5]) == 0.0 and float(m[6]) == 0.1
    assert np.linalg.norm(force) == pytest.approx(20.0, abs=1e-3)

    def stamp_s(o: Odometry) -> float:
        return messages.stamp_to_ns(o.header.stamp) / 1e9
    ros_client.wait_for(lambda: stamp_s(odom[-1][1]) > at_s + 0.15, 20, 'the push over')
    samples = [o for _t, o in odom]
    before = max((o for o in samples if stamp_s(o) <= at_s + 1e-6), key=stamp_s)
    after = min((o for o in samples if stamp_s(o) >= at_s + 0.1 - 1e-6), key=stamp_s)
    assert stamp_s(before) > at_s - after_s  # a state after the reset, before the push
    assert np.abs(world_vxy(before)).max() < 0.01  # standing still until the drawn time
    dv = world_vxy(after) - world_vxy(before)
    np.testing.assert_allclose(dv, force * 0.1 / MASS_KG, rtol=0.03, atol=0.02)


class Zero(torch.nn.Module):
    """Zero actions: the default pose (simreal_quad's home), standing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x.shape[0], 12)


def test_a_fall_hands_the_policy_over_to_damping_until_re_enabled(start_node, ros_client,
                                                                  tmp_path):
    torch.jit.script(Zero()).save(str(tmp_path / 'zero.pt'))
    spec = tmp_path / 'quad_zero.yaml'
    spec.write_text(yaml.safe_dump({
        'policy': 'quad_zero', 'robot': 'simreal_quad', 'model': 'zero.pt',
        'control_rate_hz': 50.0,
        'observation': [{'term': 'projected_gravity'}, {'term': 'base_ang_vel'},
                        {'term': 'joint_pos_rel'}],
        'action': {'scale': 0.25, 'clip': 4.0}, 'safety': {'ramp_s': 0.2}}))
    states = ros_client.collect(JointState, 'joint_states')
    commands = ros_client.collect(JointState, 'joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge', robot='simreal_quad', publish_rate_hz=100.0)
    policy = start_node('policy', policy=str(spec), enable_on_start=True,
                        diagnostics_period_s=0.2)

    def mode() -> str:
        return values(status(diags, ': policy')).get('mode', '')
    ros_client.wait_for(lambda: mode() == 'running', 60, 'the policy running')
    pub = ros_client.publisher(Wrench, 'push')
    ros_client.wait_for_subscribers(pub)
    pub.publish(wrench(fy=40.0))  # 40 N sideways for 0.1 s rolls it over (20 N does not)
    ros_client.wait_for(lambda: mode() == 'damping', 20, 'the fall detected')
    st = status(diags, ': policy')
    assert st.level == DiagnosticStatus.ERROR
    assert st.message.startswith('fallen, damping until re-enabled: base tilt')
    assert values(st)['falls'] == '1'
    log = policy.output()
    assert log.count('fall detected: base tilt') == 1
    assert 'hands over to damping' in log and 'simreal policy enable' in log

    # damping: each command is a recent measurement (the robot settles on its back)
    def follows() -> bool:
        if len(commands) < 2 or len(states) < 2:
            return False
        cmd = np.array(commands[-1][1].position)
        stamp = messages.stamp_to_ns(commands[-1][1].header.stamp)
        near = [np.abs(np.array(m.position) - cmd).max() for _t, m in states[-40:]
                if abs(messages.stamp_to_ns(m.header.stamp) - stamp) < 50_000_000]
        return bool(near) and min(near) < 1e-3
    ros_client.wait_for(follows, 10, 'the commands following the measured positions')
    # the zero network's command is exactly the home pose; a measured pose never is
    assert np.abs(np.array(commands[-1][1].position) - ROBOT.home).max() > 1e-6

    res = ros_client.call(SetBool, '/policy/enable', SetBool.Request(data=True))
    assert not res.success and 'on its feet' in res.message
    assert mode() == 'damping'
    assert ros_client.call(Trigger, '/sim_bridge/reset', Trigger.Request()).success
    ros_client.wait_for(lambda: ros_client.call(SetBool, '/policy/enable',
                                                SetBool.Request(data=True)).success,
                        10, 'enable accepted once the robot is on its feet')
    ros_client.wait_for(lambda: mode() == 'running', 20, 'the policy running again')
    ros_client.wait_for(lambda: status(diags, ': policy').level == DiagnosticStatus.OK, 5,
                        'diagnostics OK again')
