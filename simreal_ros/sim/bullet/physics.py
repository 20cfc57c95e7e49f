"""PyBullet as a :class:`simreal_ros.sim.backend.SimBackend`: the second engine.

The same URDF, robot spec and servo law as the MuJoCo backend, built by
:mod:`simreal_ros.sim.bullet.model` (which says what PyBullet lacks and how it is
approximated). ``world`` is the robot's PyBullet client; a second client (``scratch``) serves
rollouts and probes so they never touch the robot's state.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pybullet as pb

from simreal_ros.core.dynamics import DynamicsParams, Overlay, Randomization
from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.backend import (
    Capabilities,
    FloatArray,
    Observation,
    Probe,
    RolloutFeedback,
    RolloutJob,
    SimBackend,
)
from simreal_ros.sim.bullet.model import World
from simreal_ros.sim.scene import Scene


class BulletSim(SimBackend):
    """A PyBullet robot driven by joint targets through per-joint PD servos."""

    engine = 'pybullet'
    capabilities = Capabilities(armature=True, imu=True, scene_objects=True,
                                native_rollout=False, divergence_reset=True)

    def __init__(self, robot: RobotSpec, scene: Scene | None = None,
                 overlay: Overlay | None = None, randomization: Randomization | None = None,
                 seed: int = 0) -> None:
        self.world = World(robot, scene)
        self._scene = scene
        self._scratch: World | None = None
        super().__init__(robot, int(round(robot.timestep_s * 1e9)), overlay, randomization,
                         seed)

    def __del__(self) -> None:
        for w in (getattr(self, 'world', None), getattr(self, '_scratch', None)):
            if w is not None:
                w.close()

    @property
    def scratch(self) -> World:
        """The second client, built on first use."""
        if self._scratch is None:
            self._scratch = World(self.robot, self._scene)
        return self._scratch

    def approximations(self) -> tuple[str, ...]:
        """Return what the current dynamics are approximated by (armature, when not 0)."""
        return self.world.approximations(self.params)

    def nominal_params(self) -> DynamicsParams:
        """URDF damping/friction and masses, armature and gains from the robot spec."""
        return self.world.nominal_params()

    def write_params(self, params: DynamicsParams) -> None:
        """Write ``params`` into the model (servo law, friction motors, masses)."""
        self.world.write_params(params)

    def reset_state(self) -> None:
        """Home at rest, servos holding home, no feed-forward, divergence count cleared."""
        w = self.world
        if w.floating is not None:
            w.floating.reset()
            w.floating.force = None
        w.set_state(self.robot.home, np.zeros(self.robot.n))
        w.effort = np.zeros(self.robot.n)
        w.applied = np.zeros(self.robot.n)
        w.divergences = 0
        self.actuate(self.robot.home, np.zeros(self.robot.n))

    def actuate(self, position: FloatArray, feedforward: FloatArray) -> None:
        """Set the servo law's targets and feed-forward (used from the next step)."""
        self.world.actuate(position, feedforward)

    def apply_torque(self, torque: FloatArray) -> None:
        """Add ``torque`` to the torque-control forces of every step (cleared by a reset)."""
        w = self.world
        w.applied = np.array(torque, dtype=np.float64)
        w.push_servo()  # Bullet's PD motor cannot add it: the law runs in Python meanwhile

    def apply_base_force(self, force_world_n: FloatArray) -> None:
        """Apply the force at the base's COM before every step (Bullet clears it each step)."""
        assert self.world.floating is not None
        self.world.floating.force = (None if not np.any(force_world_n)
                                     else [float(x) for x in force_world_n])

    def set_servo(self, joint: int, kp: float, kd: float, effort_limit: float) -> None:
        """Change one joint's servo gains and effort limit."""
        w = self.world
        w.kp[joint], w.kd[joint], w.effort_limit[joint] = kp, kd, effort_limit
        w.push_servo()

    def set_joint_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Snap the joints to a measured state (twin re-sync); targets and delays are kept."""
        self.world.set_state(position, velocity)

    def advance(self, n: int) -> None:
        """``n`` steps of the servo law and ``stepSimulation``."""
        self.world.step(n)

    def observe(self) -> Observation:
        """Return the joint state, the IMU when the robot has one, a floating base's state."""
        w = self.world
        if self.robot.imu is None:
            return Observation(self.time_ns, w.q.copy(), w.qd.copy(), w.effort.copy())
        quat, gyro, acc = w.imu()
        base, feet = ((w.floating.state(), w.floating.foot_forces()) if w.floating is not None
                      else (None, None))
        return Observation(self.time_ns, w.q.copy(), w.qd.copy(), w.effort.copy(), quat,
                           gyro, acc, base, feet)

    def joint_positions(self) -> FloatArray:
        """Return the joint angles (a copy)."""
        q: FloatArray = self.world.q.copy()
        return q

    def joint_state(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return angles, velocities and the servo torques the last step applied."""
        w = self.world
        return w.q.copy(), w.qd.copy(), w.effort.copy()

    def divergences(self) -> int:
        """How often a non-finite state was reset to home since the last reset."""
        return self.world.divergences

    def probe(self, position: FloatArray) -> Probe:
        """Contacts and inverse-dynamics gravity torque at ``position`` on the scratch client."""
        s = self.scratch
        s.write_params(self.params)
        if s.floating is not None:  # at its home pose, as MuJoCo's probe (qpos0) has it
            s.floating.reset()
        s.set_state(position, np.zeros(self.robot.n))
        return Probe(s.contacts(), s.gravity_torque(position))

    def moving_bodies(self) -> list[str]:
        """Links with mass below the fixed base (every link with mass of a floating one)."""
        w = self.world
        return [b for b in self.nominal.body_mass if w.links[b] >= 0 or w.floating is not None]

    def rollout(self, params: Sequence[DynamicsParams], jobs: Sequence[RolloutJob],
                nthread: int = 1, feedback: RolloutFeedback | None = None) -> FloatArray:
        """Replay every job on the scratch client, one after another (``nthread`` unused)."""
        if feedback is not None:
            raise NotImplementedError('the pybullet engine replays its jobs one after another '
                                      'and cannot feed back between them (backlash): use mujoco')
        n, s = self.robot.n, self.scratch
        out = np.empty((len(jobs), jobs[0].targets.shape[0] if jobs else 0, n))
        for k, job in enumerate(jobs):
            p = params[job.params]
            s.write_params(p)
            if s.floating is not None:  # every job from the home pose, as MuJoCo's (qpos0)
                s.floating.reset()
                s.floating.force = None
            s.set_state(job.position, job.velocity)
            s.divergences = 0
            kd = np.array([p.joints[j].kd for j in self.robot.joint_names])
            for t, row in enumerate(job.targets):
                s.actuate(row[:n], kd * row[n:2 * n] + row[2 * n:])
                s.step(1)
                out[k, t] = s.q
        return out

    def raw_step_rate(self, steps: int = 5000) -> float:
        """Bare ``stepSimulation`` steps/s on the scratch client (benchmarks)."""
        s = self.scratch
        s.write_params(self.params)  # the same friction motors as the robot's client
        s.set_state(self.world.q, self.world.qd)
        t0 = time.perf_counter()
        for _ in range(steps):
            pb.stepSimulation(physicsClientId=s.client)
        return steps / (time.perf_counter() - t0)
