"""Sim vs virtual-real over ROS: the same commands on backend:=sim and on the virtual bus.

Both graphs come from the planner; the commands are the same step targets, each held until
the arm settled. With the nominal reality the settled positions agree to the encoder
quantization; with the worn_arm reality (friction, heavier tool, delay) they measurably do not.
"""

from __future__ import annotations

import time

import numpy as np
from plans import plan_without_tf as plan
import pytest
from sensor_msgs.msg import JointState

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')
TICK = 2 * np.pi / 4096
POSES = [ROBOT.home, *(ROBOT.home + np.array(d) for d in (
    [0.4, 0.6, -0.9, 0.5, 0.6, 0.3], [-0.3, 1.0, -1.0, -0.4, -0.5, -0.3]))]
HOLD_S = 1.3
SETTLED_N = 15  # states averaged at the end of each hold


def settled_positions(ros_client, ns: str, node: NodeProcess) -> np.ndarray:
    """Command each pose for HOLD_S; return the mean of its last SETTLED_N states."""
    states = ros_client.collect(JointState, f'/{ns}/joint_states')
    pub = ros_client.publisher(JointState, f'/{ns}/joint_commands')
    try:
        ros_client.wait_for(lambda: len(states) > 20, 30, f'{ns}/joint_states')
    except TimeoutError as exc:
        raise TimeoutError(f'{exc}: {node.output()}') from None
    out = []
    for q in POSES:
        t_end = time.monotonic() + HOLD_S
        n0 = len(states)
        # hold HOLD_S, and on a loaded machine until enough states came to average over
        while time.monotonic() < t_end or len(states) < n0 + 4 * SETTLED_N:
            pub.publish(messages.joint_state(ROBOT.joint_names, 0, q))
            time.sleep(0.02)
            assert time.monotonic() < t_end + 20, f'{ns}: joint_states stopped: {node.output()}'
        out.append(np.mean([m.position for _t, m in states[-SETTLED_N:]], axis=0))
    return np.array(out)


def run_backend(ros_client, ros_env, tmp_path, backend: str, reality: str = '') -> np.ndarray:
    if backend == 'sim':
        (spec,) = plan({'backend': 'sim', 'namespace': 'sim'})
        node = NodeProcess(spec, ros_env, tmp_path)
        try:
            return settled_positions(ros_client, 'sim', node)
        finally:
            node.stop()
    ns = f'real_{reality or "nominal"}'
    with EmulatorProcess(link=tmp_path / f'tty_{ns}', reality=reality, env=ros_env) as emu:
        (spec,) = plan({'backend': 'real', 'port': emu.port, 'namespace': ns})
        spec.parameters['goal_rate_limit'] = False  # like for like: the sim has no goal ramp
        node = NodeProcess(spec, ros_env, tmp_path)
        try:
            return settled_positions(ros_client, ns, node)
        finally:
            node.stop()


@pytest.mark.e2e
def test_nominal_reality_matches_sim_and_worn_arm_does_not(ros_client, ros_env, tmp_path):
    sim = run_backend(ros_client, ros_env, tmp_path, 'sim')
    nominal = run_backend(ros_client, ros_env, tmp_path, 'real')
    worn = run_backend(ros_client, ros_env, tmp_path, 'real', 'worn_arm')
    d_nominal = np.abs(nominal - sim)[1:]  # the first pose is where each started from
    d_worn = np.abs(worn - sim)[1:]
    print('ticks nominal', (d_nominal / TICK).round(2), 'worn', (d_worn / TICK).round(2))
    # the real side reports whole ticks; the servos' controller sees them too
    assert d_nominal.max() <= 2 * TICK, (d_nominal / TICK).round(2)
    assert d_worn.max() > 3 * TICK, (d_worn / TICK).round(2)
    assert d_worn.max() > 2 * d_nominal.max()


def test_twin_mode_feeds_the_twin_the_real_robots_commands(ros_client, ros_env, tmp_path):
    real = ros_client.collect(JointState, '/joint_states')
    twin = ros_client.collect(JointState, '/twin/joint_states')
    with EmulatorProcess(link=tmp_path / 'tty_twin', env=ros_env) as emu:
        nodes = [NodeProcess(spec, ros_env, tmp_path)
                 for spec in plan({'backend': 'twin', 'port': emu.port})]
        try:
            pub = ros_client.publisher(JointState, '/joint_commands')
            target = ROBOT.home + np.array([0.3, 0.2, -0.3, 0.4, 0.3, -0.4])

            def both_track() -> bool:
                pub.publish(messages.joint_state(ROBOT.joint_names, 0, target))
                return all(np.abs(np.array(s[-1][1].position) - target).max() < 0.05
                           for s in (real, twin))

            try:
                ros_client.wait_for(both_track, 40, 'the robot and its twin tracking')
            except TimeoutError as exc:
                raise TimeoutError(f'{exc}: {[n.output()[-2000:] for n in nodes]}') from None
            # nominal reality: once settled, the twin agrees with the robot. Waited for, not
            # slept: at a load average of 11 the robot had not settled 1 s after tracking
            # (base_yaw 0.011 rad from the twin). Settled = in agreement over 20 states in a row.
            streak_from = [len(real)]

            def twin_agrees() -> bool:
                gap = np.abs(np.array(real[-1][1].position) - np.array(twin[-1][1].position))
                if gap.max() >= 3 * TICK:
                    streak_from[0] = len(real)
                return len(real) - streak_from[0] >= 20

            ros_client.wait_for(twin_agrees, 30, 'the twin within 3 ticks of the settled robot')
        finally:
            for n in nodes:
                n.stop()
