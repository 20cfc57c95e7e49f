"""Sim-bridge bags made in-process: a known overlay, an excitation, a real rosbag2 bag.

Used by the tests and ``bench/sysid.py`` where the truth must be known exactly. The robot is a
:class:`simreal_ros.sim.backend.SimBackend` (the bridge's physics) stepped in lockstep: every
``1 / command_rate_hz`` the excitation's command is set (bag time = the step's sim time, as the
bridge would receive it) and every ``1 / state_rate_hz`` the state is written on
``joint_states`` stamped with sim time.
The topics and ``custom_data`` (``backend``, ``robot_spec.argument``) are those a
``simreal launch backend:=sim excite:=... record:=true`` run writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from simreal_ros.bag import BagWriter, TypeRegistry
from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import Overlay
from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.engines import make_sim

JOINT_STATE = 'sensor_msgs/msg/JointState'
T0_NS = 1_700_000_000 * 10**9


def _msg(types: TypeRegistry, stamp_ns: int, names: list[str], q: np.ndarray,
         v: np.ndarray, e: np.ndarray | None = None) -> bytes:
    st = types.store.types
    stamp = st['builtin_interfaces/msg/Time'](int(stamp_ns // 10**9), int(stamp_ns % 10**9))
    msg = st[JOINT_STATE](st['std_msgs/msg/Header'](stamp, ''), list(names),
                          np.asarray(q, float), np.asarray(v, float),
                          np.asarray(e if e is not None else [], float))
    return bytes(types.serialize(msg, JOINT_STATE))


def record_sim_bag(path: str | Path, robot: RobotSpec, overlay: Overlay | None,
                   excitation: ExcitationConfig, *, command_rate_hz: float = 100.0,
                   state_rate_hz: float = 200.0, lead_s: float = 0.5, tail_s: float = 0.5,
                   start_pose: np.ndarray | None = None,
                   command_topic: str = '/joint_commands',
                   extra_torque: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                   encoder_noise_rad: float = 0.0, ticks_per_rev: int = 0, noise_seed: int = 0
                   ) -> Path:
    """Write a bag of ``excitation`` played on the bridge physics with ``overlay``.

    ``lead_s`` of states before the first command (the robot holding ``start_pose``, default
    home) and ``tail_s`` after the last one. ``extra_torque(q, qdot)`` (N·m per joint), when
    given, is applied in every physics step (:meth:`SimBackend.apply_torque`): a known reality
    term no overlay can express, for the residual's tests. ``encoder_noise_rad`` (Gaussian,
    seeded by ``noise_seed``) and ``ticks_per_rev`` (quantization; 0: none) change the recorded
    positions only, as a servo's encoder would. Returns the bag directory.
    """
    sim = make_sim(robot, overlay=overlay)
    if start_pose is not None:
        sim.set_joint_state(np.asarray(start_pose, float), np.zeros(robot.n))
        sim.set_target(JointTarget.hold(np.asarray(start_pose, float)))
        sim.step(max(sim.delay_steps, 1))
    exc = Excitation(robot, excitation)
    dt_ns = sim.dt_ns
    cmd_every = int(round(1e9 / command_rate_hz / dt_ns))
    st_every = int(round(1e9 / state_rate_hz / dt_ns))
    lead = int(round(lead_s * 1e9 / dt_ns))
    n_cmd_steps = int(round(exc.duration_s * 1e9 / dt_ns))
    total = lead + n_cmd_steps + int(round(tail_s * 1e9 / dt_ns))
    names = robot.joint_names
    types = TypeRegistry()
    custom = {'backend': 'sim', 'robot_spec.argument': robot.name,
              'recorded_topics': f'{command_topic},/joint_states'}
    t_base = T0_NS - sim.time_ns
    rng = np.random.default_rng(noise_seed)
    with BagWriter(path, custom_data=custom, types=types) as w:
        h_cmd = w.add_topic(command_topic, JOINT_STATE)
        h_st = w.add_topic('/joint_states', JOINT_STATE)
        for k in range(total + 1):
            now = t_base + sim.time_ns
            if k % st_every == 0:
                obs = sim.observe()
                pos = obs.position
                if encoder_noise_rad > 0:
                    pos = pos + rng.normal(0.0, encoder_noise_rad, pos.shape)
                if ticks_per_rev > 0:
                    tick = 2 * np.pi / ticks_per_rev
                    pos = np.round(pos / tick) * tick
                w.write(h_st, now, _msg(types, now, names, pos, obs.velocity, obs.effort))
            if lead <= k <= lead + n_cmd_steps and (k - lead) % cmd_every == 0:
                q, v = exc.sample((k - lead) * dt_ns / 1e9)
                sim.set_target(JointTarget(q, v, np.zeros(robot.n)))
                w.write(h_cmd, now, _msg(types, now, names, q, v))
            if k < total:
                if extra_torque is not None:
                    q_now, v_now, _ = sim.joint_state()
                    sim.apply_torque(np.asarray(extra_torque(q_now, v_now), float))
                sim.step(1)
    return Path(path)


def record_servo_bag(path: str | Path, robot: RobotSpec, overlay: Overlay | None,
                     excitation: ExcitationConfig, *, cycle_hz: float = 250.0,
                     command_rate_hz: float = 100.0, sample_to_stamp_ns: int = 0,
                     stamp_to_write_ns: int = 0, lead_s: float = 0.5, tail_s: float = 0.5,
                     seed: int = 0, trace: str | Path | None = None) -> Path:
    """Write a servo-bus bag: the virtual bus's arm driven as the driver does, in lockstep.

    The arm is the emulator's :class:`~simreal_ros.hardware.emulator.reality.VirtualArm` with
    ``overlay`` as its hidden reality (its servo law, command delay, encoder ticks and
    imperfections), its registers written as the driver's configure writes them (current-based
    position, the spec's gains, no profile). Every ``1 / cycle_hz`` (the driver's bus cycle)
    the present position and velocity are read; the state is stamped ``sample_to_stamp_ns``
    after the arm was in it (the read on the wire), and the goal (the last command received
    by the stamp, moved toward by at most ``velocity limit / cycle_hz`` as the driver's
    ``goal_rate_limit`` does) reaches the servos ``stamp_to_write_ns`` after the stamp. Commands
    come at ``command_rate_hz``, received when produced. With both latencies 0 the bag is what
    a servo-bus replay models exactly (but for the encoder); with the latencies measured on
    the virtual bus (:mod:`simreal_ros.sysid.pipeline`) it has their timing without any
    host's jitter. ``custom_data.backend`` is ``real``. ``trace``: also write the reads and
    goal writes as the emulator's ``--trace`` does (times on the bag's clock; Dynamixel only).
    A Feetech robot (``bus.family: feetech``, the SO-101) runs the STS emulator's arm
    (:class:`~simreal_ros.hardware.emulator.sts_servo.StsArm`) with the registers the Feetech
    driver's configure writes (P, D, I = 0, the effort limit as torque limit, no speed limit).
    Returns the bag directory.
    """
    from simreal_ros.hardware.dynamixel import control_table as ct

    feetech = robot.bus_family == 'feetech'
    if feetech and trace is not None:
        raise ValueError('record_servo_bag writes a bus trace for Dynamixel robots only')
    arm, vel_unit = _sts_arm(robot, overlay, seed) if feetech else \
        _dynamixel_arm(robot, overlay, seed)
    goal_item = _feetech_item('goal_position') if feetech else ct.BY_NAME['goal_position']
    exc = Excitation(robot, excitation)
    dt_ns = int(round(arm.dt * 1e9))
    cycle_ns = int(round(1e9 / cycle_hz))
    cmd_ns = int(round(1e9 / command_rate_hz))
    lead_ns = int(round(lead_s * 1e9))
    end_ns = lead_ns + int(round(exc.duration_s * 1e9)) + int(round(tail_s * 1e9))
    max_step = robot.velocity_limit / cycle_hz
    names = robot.joint_names
    types = TypeRegistry()
    custom = {'backend': 'real', 'robot_spec.argument': robot.name,
              'recorded_topics': '/backend/joint_commands,/backend/joint_states'}
    goal = arm.sim.joint_positions().copy()
    last_cmd: np.ndarray | None = None
    writes: list[tuple[int, np.ndarray]] = []  # (arrival on the arm's clock, goal)
    cmd_end = lead_ns + int(round(exc.duration_s * 1e9))
    cmds = [(t, *exc.sample((t - lead_ns) / 1e9)) for t in range(lead_ns, cmd_end + 1, cmd_ns)]
    c_next = 0  # the next command the driver has not taken
    next_cycle = 0
    ids = [j.servo.servo_id for j in robot.joints]
    lines: list[str] = []

    def trace_line(kind: str, addr: int, t_ns: int, ticks: list[int]) -> None:
        if trace is not None:
            lines.append(f'{kind} {addr} 4 {T0_NS + t_ns} ' + ' '.join(
                f'{sid}:{ct.to_unsigned(v, 4).to_bytes(4, "little").hex()}'
                for sid, v in zip(ids, ticks, strict=True)))

    with BagWriter(path, custom_data=custom, types=types) as w:
        h_cmd = w.add_topic('/backend/joint_commands', JOINT_STATE)
        h_st = w.add_topic('/backend/joint_states', JOINT_STATE)
        for t_c, q, v in cmds:
            w.write(h_cmd, T0_NS + t_c, _msg(types, T0_NS + t_c, names, q, v))
        for k in range(end_ns // dt_ns + 1):
            t = k * dt_ns  # the arm is in its state after k steps
            if t >= next_cycle:
                arm.update_present()
                ticks = [r.get('present_position') for r in arm.servos]
                trace_line('sync_read', ct.BY_NAME['present_position'].address, t, ticks)
                pos = np.array([arm.ticks_to_q(i, v) for i, v in enumerate(ticks)])
                vel = np.array([arm.direction[i] * r.get('present_velocity') * vel_unit
                                for i, r in enumerate(arm.servos)])
                stamp = t + sample_to_stamp_ns
                w.write(h_st, T0_NS + stamp, _msg(types, T0_NS + stamp, names, pos, vel))
                while c_next < len(cmds) and cmds[c_next][0] <= stamp:
                    last_cmd = cmds[c_next][1]
                    c_next += 1
                if last_cmd is not None:
                    goal = goal + np.clip(last_cmd - goal, -max_step, max_step)
                    writes.append((stamp + stamp_to_write_ns, goal.copy()))
                next_cycle += cycle_ns
            # a goal write arriving in [t, t + dt) acts on the arm from this step on (the
            # emulator applies a write with the steps done so far)
            while writes and writes[0][0] < t + dt_ns:
                w_ns, g = writes.pop(0)
                ticks = [arm.q_to_ticks(i, g[i]) for i in range(robot.n)]
                trace_line('sync_write', ct.BY_NAME['goal_position'].address, w_ns, ticks)
                for i in range(robot.n):
                    arm.write(i, [(goal_item, ticks[i])])
            arm.step(1)
    if trace is not None:
        Path(trace).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return Path(path)


def _dynamixel_arm(robot: RobotSpec, overlay: Overlay | None, seed: int) -> tuple[Any, float]:
    """Return the Dynamixel virtual arm configured as the driver does, and its speed unit."""
    from simreal_ros.hardware.dynamixel import control_table as ct
    from simreal_ros.hardware.emulator.reality import VirtualArm

    arm = VirtualArm(robot, overlay, seed=seed)
    for i, j in enumerate(robot.joints):
        s = j.servo
        tpr, kt = s.ticks_per_rev, s.torque_per_amp
        regs = [('operating_mode', ct.MODE_CURRENT_BASED_POSITION),
                ('position_p_gain', ct.kp_to_register(j.kp, tpr, kt)),
                ('position_i_gain', 0),
                ('position_d_gain', ct.kd_to_register(j.kd, tpr, kt)),
                ('goal_current', ct.effort_to_current_register(j.limits.effort, kt)),
                ('profile_velocity', 0), ('profile_acceleration', 0),
                ('torque_enable', 1)]
        for name, value in regs:
            arm.write(i, [(ct.BY_NAME[name], int(value))])
    return arm, ct.VELOCITY_UNIT_RAD_S


def _feetech_item(name: str) -> Any:
    from simreal_ros.hardware.feetech import control_table as fct
    return fct.BY_NAME[name]


def _sts_arm(robot: RobotSpec, overlay: Overlay | None, seed: int) -> tuple[Any, float]:
    """Return the STS virtual arm configured as the Feetech driver does, and its speed unit."""
    from simreal_ros.hardware.emulator.sts_servo import StsArm
    from simreal_ros.hardware.feetech import control_table as fct

    arm = StsArm(robot, overlay, seed=seed)
    for i, j in enumerate(robot.joints):
        s = j.servo
        model = fct.find_model(s.model) or fct.MODELS['STS3215']
        torque = fct.effort_to_torque_register(j.limits.effort, model.stall_torque_nm)
        regs = [('p_coefficient', fct.kp_to_register(j.kp, s.ticks_per_rev, s.torque_per_amp)),
                ('d_coefficient', fct.kd_to_register(j.kd, s.ticks_per_rev, s.torque_per_amp)),
                ('i_coefficient', 0), ('max_torque_limit', torque), ('torque_limit', torque),
                ('goal_velocity', 0), ('acceleration', 0), ('torque_enable', 1)]
        for name, value in regs:
            arm.write(i, [(fct.BY_NAME[name], int(value))])
    return arm, fct.VELOCITY_UNIT_RAD_S
