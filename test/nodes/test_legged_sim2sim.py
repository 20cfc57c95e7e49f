"""Legged sim2sim across engines on identical topics: ``backend:=sim2sim`` with simreal_quad,
``sim_a`` in MuJoCo and ``sim_b`` in PyBullet, both trotting on one ``/joint_commands``
stream and told one ``/cmd_vel``, compared by the legged gap (simreal_ros/gap/legged.py) from
what their ``odom``, ``imu/data`` and ``foot_contacts`` carried.

Both bridges run in lockstep (``timing_mode:=lockstep``, sim time): tick k is published by
each, and the test answers it with the trot's command for that tick once both published it,
so both engines take each command at the same physics step, as in the in-process test
(test/sim/test_legged_cross_engine.py), whatever the host's load. In real time they did not:
PyBullet steps simreal_quad at 1,700-3,900 steps/s, and at a load average of 10 it fell
behind the wall clock the commands were paced by: a foot landed outside 5-7 times in the 3 s
compared. The assertions are therefore the in-process test's, which follow from the schedule
and the physics: both trot (each foot lands 6 times in the window, every touch-down paired
with the other engine's within a quarter period), neither falls, both walk forward, the
stance heights agree.
"""

from __future__ import annotations

import threading

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import pytest
from sensor_msgs.msg import Imu, JointState

from simreal_ros.bringup.planner import plan
from simreal_ros.core.robot import load_robot
from simreal_ros.gap.legged import LeggedEpisode, LeggedGapConfig, legged_gap
from simreal_ros.ros import messages
from simreal_ros.sim.gait import Trot

pytestmark = [pytest.mark.ros, pytest.mark.e2e]
ROBOT = load_robot('simreal_quad')
TROT_S = 4.0
#: the in-process test's window (0.875 .. 3.875 s of the trot, 6 touch-downs a foot) and
#: thresholds, test/sim/test_legged_cross_engine.py says why
CFG = LeggedGapConfig(skip_s=0.875, contact_force_n=1.0, min_swing_s=0.05)
RATE_HZ = 50.0
#: 3.875 s of trot at RATE_HZ: the last tick compared, as in the in-process test
TICKS = int(round(3.875 * RATE_HZ))


def episode(name: str, odom: list, feet: list, imu: list, start_ns: int, end_ns: int,
            speed_m_s: float) -> LeggedEpisode:
    """The samples stamped in [start_ns, end_ns], paired by stamp across the three topics."""
    def by_stamp(samples: list) -> dict:
        return {messages.stamp_to_ns(m.header.stamp): m for _t, m in samples}
    o, f, i = by_stamp(odom), by_stamp(feet), by_stamp(imu)
    stamps = sorted(t for t in o if start_ns <= t <= end_ns and t in f and t in i)
    rows = [(o[t].pose.pose, o[t].twist.twist, f[t], i[t]) for t in stamps]
    return LeggedEpisode.from_arrays(
        name, stamps,
        [[p.position.x, p.position.y, p.position.z] for p, _v, _f, _i in rows],
        [[p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z]
         for p, _v, _f, _i in rows],
        [[v.linear.x, v.linear.y, v.linear.z] for _p, v, _f, _i in rows],
        [[v.angular.x, v.angular.y, v.angular.z] for _p, v, _f, _i in rows],
        [list(ft.effort) for _p, _v, ft, _i in rows], [start_ns], [speed_m_s, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        [[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]
         for _p, _v, _f, m in rows],
        [[m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z]
         for _p, _v, _f, m in rows])


def received(diags: list, fqn: str) -> int:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name == f'{fqn}: sim bridge':
                return int({kv.key: kv.value for kv in st.values}.get('cmd_vel_received', 0))
    return 0


def test_mujoco_and_pybullet_trot_alike_on_identical_topics(start_node, ros_client):
    specs = [n for n in plan({'backend': 'sim2sim', 'robot': 'simreal_quad',
                              'engine_b': 'pybullet'}) if n.kind == 'sim_bridge']
    assert [(n.namespace, n.parameters['engine']) for n in specs] == [
        ('/sim_a', 'mujoco'), ('/sim_b', 'pybullet')]
    gait = Trot()
    period_ns = int(1e9 / RATE_HZ)
    dt_ns = int(round(ROBOT.timestep_s * 1e9))
    joint_pub = ros_client.publisher(JointState, '/joint_commands')
    ticks: dict[str, list[int]] = {'/sim_a': [], '/sim_b': []}  # distinct stamps, in order
    sent = [0]
    go = threading.Event()
    lock = threading.Lock()

    def answer() -> None:
        """Command tick k once both bridges published it (the gait at the tick's time + dt,
        as the in-process episode sets it)."""
        with lock:
            k = sent[0]
            if go.is_set() and k < TICKS and all(len(s) > k for s in ticks.values()):
                q = gait.targets(ROBOT, (k * period_ns + dt_ns) * 1e-9)
                joint_pub.publish(messages.joint_state(ROBOT.joint_names, k * period_ns, q))
                sent[0] = k + 1

    def on_feet(ns: str, msg: JointState) -> None:
        stamp = messages.stamp_to_ns(msg.header.stamp)
        with lock:
            if ticks[ns] and ticks[ns][-1] == stamp:
                return  # a re-sent state: that tick was answered already
            ticks[ns].append(stamp)
        answer()

    topics = {ns: {k: ros_client.collect(t, f'{ns}/{k}') for k, t in (
        ('odom', Odometry), ('imu/data', Imu))} for ns in ticks}
    for ns in ticks:
        topics[ns]['foot_contacts'] = ros_client.collect(
            JointState, f'{ns}/foot_contacts', callback=lambda m, ns=ns: on_feet(ns, m))
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    bridges = [start_node(n.kind, n.name, n.namespace, n.remappings,
                          **{**n.parameters, 'diagnostics_period_s': 0.5,
                             'timing_mode': 'lockstep', 'publish_rate_hz': RATE_HZ})
               for n in specs]
    cmd_pub = ros_client.publisher(Twist, '/cmd_vel')
    ros_client.wait_for_subscribers(cmd_pub, count=2, timeout=60)
    ros_client.wait_for_subscribers(joint_pub, count=2, timeout=60)
    cmd = Twist()
    cmd.linear.x = gait.speed_m_s
    cmd_pub.publish(cmd)
    ros_client.wait_for(lambda: all(received(diags, n.fqn) == 1 for n in specs), 30,
                        'cmd_vel counted by both bridges')
    ros_client.wait_for(lambda: all(ticks.values()), 30, 'both bridges at tick 0')
    go.set()
    answer()
    # the whole test took 11 s idle, 20-29 s at load averages 4-10 (three busy loops)
    ros_client.wait_for(lambda: all(len(s) > TICKS for s in ticks.values())
                        and all(len(t) > TICKS for s in topics.values() for t in s.values()),
                        120, f'both bridges through {TICKS} lockstep ticks')
    for b in bridges:
        assert b.proc.poll() is None, b.output()
    # sim time: tick k is stamped k periods after the reset in both engines, none skipped
    assert ticks['/sim_a'] == ticks['/sim_b'] == [
        ticks['/sim_a'][0] + k * period_ns for k in range(TICKS + 1)]

    start_ns = ticks['/sim_a'][0]
    a, b = (episode(ns, s['odom'], s['foot_contacts'], s['imu/data'], start_ns,
                    start_ns + TICKS * period_ns, gait.speed_m_s) for ns, s in topics.items())
    assert len(a.stamps_ns) == len(b.stamps_ns) == TICKS + 1
    gap = legged_gap(a, b, CFG)
    print(f"height error {gap['base_height_error_m'] * 1e3:.2f} mm, orientation error "
          f"{gap['orientation_error_rad'] * 1e3:.1f} mrad, velocity error "
          f"{gap['velocity_error_m_s']:.3f} m/s, forward "
          f"{[round(gap['episodes'][n]['mean_velocity_m_s'][0], 3) for n in ticks]} m/s, "
          f"touch-down offsets "
          f"{[round(f['mean_abs_s'], 3) for f in gap['contact_onset_offset_s']]} s mean per foot")
    for name in ('/sim_a', '/sim_b'):
        ep = gap['episodes'][name]
        assert ep['falls'] == 0
        assert all(0.2 < d < 0.9 for d in ep['duty_factor']), ep['duty_factor']
        assert 0.02 < ep['mean_velocity_m_s'][0] < 0.15
        # 2 Hz for the 3 s compared, each foot lands once a period
        assert [len(o) for o in ep['onsets_s']] == [6] * 4, ep['onsets_s']
    for foot in gap['contact_onset_offset_s']:
        assert foot['paired'] == 6, gap['contact_onset_offset_s']
        assert foot['mean_abs_s'] < 0.125, gap['contact_onset_offset_s']
    assert gap['base_height_error_m'] < 0.005
