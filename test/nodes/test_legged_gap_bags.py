"""``simreal gap`` on legged bags written by the recorder: a sim2sim pair and two bags.

Two sim bridges with simreal_quad stand side by side, ``/sim_a/`` in MuJoCo and ``/sim_b/`` in
PyBullet (realtime, wall-clock stamps); one recorder writes both namespaces into one bag, a
second writes ``/sim_b/`` alone into another. ``/sim_a/`` is pushed over (40 N sideways for
0.1 s rolls it onto its back, test/nodes/test_legged_push_fall.py) while ``/sim_b/`` stands.
The gap report must read odom, foot_contacts and imu/data from the bags and see exactly that:
one fall in MuJoCo, none in PyBullet, PyBullet's four feet on the ground throughout.
"""

from __future__ import annotations

import json
import math

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Wrench
from nav_msgs.msg import Odometry
import pytest

from simreal_ros.core.robot import load_robot

pytestmark = [pytest.mark.ros, pytest.mark.e2e]
ROBOT = load_robot('simreal_quad')


def tilt(o: Odometry) -> float:
    q = o.pose.pose.orientation
    return math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (q.x * q.x + q.y * q.y))))


def written(diags: list, node: str) -> int:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.startswith(f'/{node}:') and st.name.endswith(': recorder'):
                return int({kv.key: kv.value for kv in st.values}['messages_written'])
    return 0


def test_gap_reads_the_legged_topics_of_recorded_bags(start_node, ros_client, tmp_path,
                                                     simreal_cli):
    odom_a = ros_client.collect(Odometry, '/sim_a/odom')
    odom_b = ros_client.collect(Odometry, '/sim_b/odom')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    for ns, engine in (('sim_a', 'mujoco'), ('sim_b', 'pybullet')):
        start_node('sim_bridge', namespace=f'/{ns}', robot='simreal_quad', engine=engine,
                   publish_rate_hz=100.0, frame_prefix=f'{ns}/')
    pair, only_b = tmp_path / 'pair', tmp_path / 'only_b'
    rec_pair = start_node('recorder', name='rec_pair', bag=str(pair),
                          topics=['/sim_a/*', '/sim_b/*'], diagnostics_period_s=0.5)
    rec_b = start_node('recorder', name='rec_b', bag=str(only_b), topics=['/sim_b/*'],
                       diagnostics_period_s=0.5)
    ros_client.wait_for(lambda: odom_a and odom_b and abs(
        odom_a[-1][1].pose.pose.position.z - ROBOT.base.height_m) < 0.005, 60,
                        'both robots standing')
    ros_client.wait_for(lambda: written(diags, 'rec_pair') > 400
                        and written(diags, 'rec_b') > 200, 60, 'both recorders writing')
    push = ros_client.publisher(Wrench, '/sim_a/push')
    ros_client.wait_for_subscribers(push)
    w = Wrench()
    w.force.y = 40.0
    push.publish(w)
    ros_client.wait_for(lambda: tilt(odom_a[-1][1]) > 2.5, 20, '/sim_a/ on its back')
    n = len(odom_b)
    ros_client.wait_for(lambda: len(odom_b) > n + 50, 20, '0.5 s more recorded')
    assert rec_pair.stop() == 0, rec_pair.output()
    assert rec_b.stop() == 0, rec_b.output()

    # one bag, its sim2sim pair (joint streams judged as always: --allow-bad-data keeps a
    # stalled joint_states under load from refusing the joint gap, not the legged one)
    r = simreal_cli('gap', str(pair), '--out', str(tmp_path / 'one'), '--json', '--quiet',
                    '--allow-bad-data')
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)['legged']
    assert (g['reference'], g['compared']) == ('/sim_a/', '/sim_b/')
    a, b = g['episodes']['/sim_a/'], g['episodes']['/sim_b/']
    assert (a['falls'], b['falls']) == (1, 0)
    assert b['duty_factor'] == [1.0, 1.0, 1.0, 1.0]
    assert b['mean_height_m'] == pytest.approx(ROBOT.base.height_m, abs=0.005)
    assert g['orientation_error_rad'] > 1.0  # upside down for part of the window
    assert g['topics']['/sim_a/'] == {'odom': '/sim_a/odom',
                                      'foot_contacts': '/sim_a/foot_contacts',
                                      'imu': '/sim_a/imu/data'}
    assert a['velocity_tracking_error_m_s'] is None  # no cmd_vel was recorded
    assert g['gyro_error_rad_s'] is not None, g['notes']
    assert g['gyro_error_rad_s'] > 1.0 and g['shift_s'] == 0.0
    assert 'Legged gap: /sim_b/ against /sim_a/' in (tmp_path / 'one' / 'report.html'
                                                    ).read_text()

    # two bags: the pair bag's primary (/sim_a/) against the other bag's one robot
    r = simreal_cli('gap', str(pair), '--out', str(tmp_path / 'two'), '--against',
                    str(only_b), '--quiet', '--allow-bad-data')
    assert r.returncode == 0, r.stderr
    assert 'legged: compared:/sim_b/ against reference:/sim_a/' in r.stdout
    g2 = json.loads((tmp_path / 'two' / 'gap.json').read_text())['legged']
    a2, b2 = g2['episodes']['reference:/sim_a/'], g2['episodes']['compared:/sim_b/']
    assert (a2['falls'], b2['falls']) == (1, 0)
    assert b2['duty_factor'] == [1.0, 1.0, 1.0, 1.0]
    assert a2 == a  # the same bag, the same robot: the same metrics
    assert g2['bags'] == {'reference': str(pair), 'compared': str(only_b)}

    # a bag without a legged robot to compare against: one error line
    r = simreal_cli('gap', str(only_b), '--out', str(tmp_path / 'bad'), '--against',
                    str(tmp_path / 'nope'), '--quiet')
    assert r.returncode != 0 and r.stderr.count('error:') == 1, r.stderr
