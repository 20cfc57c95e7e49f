"""The virtual bus physics: servo law vs the sim bridge's actuator, and the hidden reality."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import Overlay, load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.emulator.reality import Imperfections, VirtualArm
from simreal_ros.sim.mujoco.physics import MujocoSim as SimRobot

ROBOT = load_robot('simreal_arm')
TICK = 2 * np.pi / 4096
GAINS = DynamixelBus(ROBOT, '/unused', 1_000_000).gains()  # what the driver writes
POSES = [ROBOT.home + np.array(d) for d in ([0.4, 0.6, -0.9, 0.5, 0.6, 0.3],
                                            [-0.3, 1.0, -1.0, -0.4, -0.5, -0.3])]


def configured(overlay: Overlay | None = None, seed: int = 0) -> VirtualArm:
    """A virtual arm configured as the driver configures it, holding home."""
    arm = VirtualArm(ROBOT, overlay, seed=seed)
    for i, regs in enumerate(GAINS):
        items = [(ct.BY_NAME[k], v) for k, v in regs.items()]
        assert arm.write(i, items + [(ct.BY_NAME['operating_mode'], 5)]) == 0
        assert arm.write(i, [(ct.BY_NAME['goal_position'], arm.q_to_ticks(i, ROBOT.home[i]))]) \
            == 0
        assert arm.write(i, [(ct.BY_NAME['torque_enable'], 1)]) == 0
    return arm


def goal(arm: VirtualArm, q: np.ndarray) -> None:
    for i in range(ROBOT.n):
        assert arm.write(i, [(ct.BY_NAME['goal_position'], arm.q_to_ticks(i, q[i]))]) == 0


def measured(arm: VirtualArm) -> np.ndarray:
    arm.update_present()
    return np.array([arm.ticks_to_q(i, arm.servos[i].get('present_position'))
                     for i in range(ROBOT.n)])


def compare(overlay: Overlay | None) -> tuple[np.ndarray, np.ndarray]:
    """Step both under the same targets; return (max |diff| over time, settled |diff|)."""
    arm, sim = configured(overlay), SimRobot(ROBOT)
    worst = np.zeros(ROBOT.n)
    settled = []
    for q in POSES:
        sim.set_target(JointTarget.hold(q))
        goal(arm, q)
        for _ in range(1000):
            sim.step(1)
            arm.step(1)
            worst = np.maximum(worst, np.abs(arm.true_position() - sim.observe().position))
        settled.append(np.abs(measured(arm) - sim.observe().position))
    return worst, np.max(settled, axis=0)


def test_nominal_reality_reproduces_the_sim_bridge_servo() -> None:
    worst, settled = compare(None)
    assert worst.max() < TICK  # the whole trajectory, not only the end: within one tick
    assert settled.max() <= TICK  # what the servo reports: quantized to ticks


def test_worn_reality_differs_measurably() -> None:
    worst, settled = compare(load_overlay('worn_arm'))
    assert worst.max() > 50 * TICK  # 8 ms delay, heavier tool: transients differ
    assert settled.max() > 3 * TICK  # friction and sag: where the arm ends up differs


def test_command_delay_holds_the_goal_back() -> None:
    arm = configured(Overlay('test', command_delay_s=0.01))
    assert arm.delay_steps == 10
    before = arm.goal.copy()
    goal(arm, ROBOT.home + 0.2)
    arm.step(9)
    assert np.array_equal(arm.goal, before)
    arm.step(1)
    assert np.allclose(arm.goal, ROBOT.home + 0.2, atol=TICK)


def test_encoder_noise_and_backlash() -> None:
    noisy = configured(Overlay('test', imperfections={'encoder_noise_rad': 0.002}), seed=1)
    noisy.step(200)
    reads = np.array([measured(noisy) for _ in range(50)])
    assert reads.std(axis=0).min() > 0  # every servo's reading is noisy
    assert np.all(np.abs(reads - reads.mean(axis=0)) % TICK < 1e-9 + TICK)  # in whole ticks
    # backlash: approaching the same goal from both sides leaves the link on different sides
    ends = []
    for side in (+0.3, -0.3):
        arm = configured(Overlay('test', imperfections={'backlash_rad': 0.02}))
        target = ROBOT.home.copy()
        goal(arm, target + side)
        arm.step(800)
        goal(arm, target)
        arm.step(1500)
        ends.append(arm.true_position()[0])  # base_yaw: no gravity
    assert abs(ends[0] - ends[1]) > 0.015  # nearly the full play of 0.02 rad


def test_temperature_rises_with_current_and_overheating_shuts_down() -> None:
    fast = Overlay('test', imperfections={'thermal_time_constant_s': 0.05,
                                          'thermal_rise_c_per_a2': 400.0, 'overload_s': 100.0})
    arm = configured(fast)
    i = 1  # shoulder: gravity keeps current flowing
    assert arm.write(i, [(ct.BY_NAME['goal_position'], arm.q_to_ticks(i, 1.5))]) == 0
    arm.step(400)
    assert arm.servos[i].get('hardware_error_status') & ct.HW_OVERHEATING
    assert arm.servos[i].get('torque_enable') == 0
    assert arm.temperature[i] > arm.temperature[0]


def test_unknown_imperfection_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r'imperfections\.backlash: expected one of'):
        VirtualArm(ROBOT, Overlay('bad.yaml', imperfections={'backlash': 0.1}))


def test_overlay_gains_scale_what_the_registers_deliver() -> None:
    sag = []
    for scale in (1.0, 0.5):
        arm = configured(Overlay('test', joints={'shoulder_pitch': {'kp_scale': scale}}))
        arm.step(1500)
        sag.append(abs(ROBOT.home[1] - arm.true_position()[1]))
    assert sag[0] > 0.01  # gravity pulls the shoulder off its goal
    assert sag[1] == pytest.approx(2 * sag[0], rel=0.15)  # half the stiffness, twice the sag


def test_torques_no_overlay_expresses_act_on_the_link() -> None:
    """Drag and Stribeck slow a moving joint; the cable pulls the base back toward home."""
    imp = Imperfections(drag_nm_s2_per_rad2=0.4, stribeck_nm=0.08, stribeck_velocity_rad_s=0.2,
                        cable_spring_nm_per_rad=0.6)
    tau = imp.unmodelled_torque(ROBOT.home + 0.1, np.array([1.0, -0.05, 0, 0, 0, 0]), ROBOT.home)
    stribeck = 0.08 * np.tanh(1.0) * np.exp(-0.0625)
    assert tau == pytest.approx([-0.4 - 0.08 * np.tanh(20.0) * np.exp(-25.0) - 0.06,
                                 0.4 * 0.0025 + stribeck, 0, 0, 0, 0])
    ends = {}
    for name, extra in (('plain', {}), ('cable', {'cable_spring_nm_per_rad': 0.6})):
        arm = configured(Overlay('test', imperfections=extra))
        goal(arm, ROBOT.home + 0.3)
        arm.step(1500)
        ends[name] = arm.true_position()[0] - ROBOT.home[0]
        kp = arm.kp[0]
    # the servo's P term gives way to the spring: 0.6 (0.3 - d) = kp d (kp ~23 N·m/rad)
    assert ends['plain'] == pytest.approx(0.3, abs=TICK)
    assert 0.3 - ends['cable'] == pytest.approx(0.18 / (kp + 0.6), abs=TICK)
    speeds = {}
    for name, extra in (('plain', {}), ('drag', {'drag_nm_s2_per_rad2': 0.4})):
        arm = configured(Overlay('test', imperfections=extra))
        goal(arm, ROBOT.home + 0.8)
        peak = 0.0
        for _ in range(30):
            arm.step(10)
            peak = max(peak, arm.sim.joint_state()[1][0])
        speeds[name] = peak
    # measured: a 0.8 rad step peaks at 10.8 rad/s plain, 3.1 rad/s against the drag
    assert speeds['drag'] < 0.5 * speeds['plain']


def test_a_stribeck_speed_of_zero_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r'imperfections\.stribeck_velocity_rad_s: '
                                          r'expected a speed > 0'):
        VirtualArm(ROBOT, Overlay('bad.yaml', imperfections={'stribeck_velocity_rad_s': 0.0}))


def test_present_registers_are_the_per_servo_conversions() -> None:
    """update_present converts all servos at once; each register holds what the one-servo
    conversions (q_to_ticks, rounding, the signed 2- and 4-byte items) give, Homing Offset
    and negative speeds and currents included."""
    arm = configured(load_overlay('worn_arm'), seed=3)
    for i, offset in enumerate((0, 120, -75, 0, 300, -1)):
        assert arm.write(i, [(ct.BY_NAME['torque_enable'], 0)]) == 0
        assert arm.write(i, [(ct.BY_NAME['homing_offset'], offset),
                             (ct.BY_NAME['torque_enable'], 1)]) == 0
    goal(arm, POSES[1])
    for _ in range(120):  # moving: speeds, currents and the profile's trajectory are non-zero
        arm.step(1)
    rng_state = arm.rng.bit_generator.state
    arm.update_present()
    arm.rng.bit_generator.state = rng_state  # the same encoder noise draw as update_present's
    q, qd, tau = arm.sim.joint_state()
    meas = arm._measure(q, noise=True)
    for i, reg in enumerate(arm.servos):
        vel = int(round(arm.direction[i] * qd[i] / arm.vel_unit[i]))
        assert reg.get('present_position') == arm.q_to_ticks(i, meas[i])
        assert reg.get('present_velocity') == vel
        assert reg.get('present_current') == int(round(arm.direction[i] * tau[i]
                                                       / arm.effort_unit[i]))
        assert reg.get('position_trajectory') == arm.q_to_ticks(i, arm.desired[i])
        assert reg.get('velocity_trajectory') == int(round(
            arm.direction[i] * arm.desired_vel[i] / arm.vel_unit[i]))
        assert reg.get('moving') == int(abs(vel) > reg.get('moving_threshold'))
    assert sorted({np.sign(arm.servos[i].get('present_velocity')) for i in range(ROBOT.n)}) \
        == [-1, 1]
