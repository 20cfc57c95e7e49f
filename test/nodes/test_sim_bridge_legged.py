"""The sim bridge with a floating-base robot (simreal_quad) over real DDS.

One bridge per engine (MuJoCo, PyBullet), one test: every topic of the legged contract
arrives with its frames, the IMU reads gravity up, the four feet carry the standing robot
and cmd_vel is kept. The physics behind them (standing, IMU exactness, reset) is
test/sim/test_quadruped.py's and test_quadruped_bullet.py's, in-process.
"""

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import pytest
from sensor_msgs.msg import Imu, JointState
from tf2_msgs.msg import TFMessage

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import qos

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_quad')
MASS_KG = 1.84


def latest(samples: list) -> object:
    assert samples, 'no message received'
    return samples[-1][1]


def bridge_values(diags: list) -> dict:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith('sim bridge'):
                return {kv.key: kv.value for kv in st.values}
    return {}


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_the_quadruped_on_the_legged_topic_contract(start_node, ros_client, engine):
    states = ros_client.collect(JointState, 'joint_states')
    imu = ros_client.collect(Imu, 'imu/data')
    odom = ros_client.collect(Odometry, 'odom')
    feet = ros_client.collect(JointState, 'foot_contacts')
    tf = ros_client.collect(TFMessage, '/tf', qos.TF)
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    bridge = start_node('sim_bridge', robot='simreal_quad', engine=engine, publish_rate_hz=100.0,
                        diagnostics_period_s=0.5)
    ros_client.wait_for(lambda: states and imu and odom and feet and tf, 60,
                        'joint_states, imu/data, odom, foot_contacts and /tf')
    # standing: every foot pressed onto the ground (it starts with them just touching), the
    # four carrying the weight (in-process: within 4 % from the 2nd ms, 0.5 % after 1 s)
    weight = MASS_KG * 9.81

    def standing() -> bool:
        effort = latest(feet).effort
        return min(effort) > 0.2 * weight / 4 and abs(sum(effort) - weight) < 0.05 * weight
    ros_client.wait_for(standing, 20, 'all four feet in contact, carrying the weight')
    assert list(latest(states).name) == ROBOT.joint_names
    f = latest(feet)
    assert list(f.name) == ['fl_foot', 'fr_foot', 'rl_foot', 'rr_foot']
    assert len(f.effort) == 4 and not f.position and not f.velocity

    assert latest(imu).header.frame_id == 'imu_link'

    def at_rest() -> bool:  # specific force: gravity's reaction, up (-9.81 if the sign flips)
        acc = latest(imu).linear_acceleration
        return abs(acc.z - 9.81) < 0.1 and abs(acc.x) < 0.1 and abs(acc.y) < 0.1
    # the body still decelerates for a few 0.1 s after the feet touch (10.1 m/s^2 seen)
    ros_client.wait_for(at_rest, 20, 'imu/data at rest: +9.81 m/s^2 along z')

    o = latest(odom)
    assert (o.header.frame_id, o.child_frame_id) == ('odom', 'base_link')
    assert o.pose.pose.position.z == pytest.approx(ROBOT.base.height_m, abs=0.005)
    transforms = [t for _r, msg in tf for t in msg.transforms]
    assert {(t.header.frame_id, t.child_frame_id) for t in transforms} == {('odom',
                                                                            'base_link')}
    assert transforms[-1].transform.translation.z == pytest.approx(ROBOT.base.height_m,
                                                                   abs=0.005)

    pub = ros_client.publisher(Twist, 'cmd_vel')
    ros_client.wait_for_subscribers(pub)
    cmd = Twist()
    cmd.linear.x, cmd.angular.z = 0.2, 0.5
    pub.publish(cmd)
    ros_client.wait_for(lambda: int(bridge_values(diags).get('cmd_vel_received', 0)) == 1,
                        10, 'cmd_vel counted on /diagnostics')
    v = bridge_values(diags)
    assert (float(v['cmd_vel_linear_x']), float(v['cmd_vel_angular_z'])) == (0.2, 0.5)
    assert bridge.proc.poll() is None, bridge.output()
