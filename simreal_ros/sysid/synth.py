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
from typing import Callable

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
    return types.serialize(msg, JOINT_STATE)


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
