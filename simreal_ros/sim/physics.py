"""The physics side of the sim bridge: stepping, the command delay line, reset, randomization.

No ROS here: the node feeds targets in and reads observations out, which keeps this testable
and makes runs deterministic (same seed, same commands at the same steps -> same states).
Sim time is an integer number of physics steps and never goes backwards, also across resets.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import DynamicsParams, Overlay, Randomization
from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.model import BuiltModel, build_model
from simreal_ros.sim.scene import Scene

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Observation:
    """Joint state (robot order) and IMU reading at ``stamp_ns`` of sim time."""

    stamp_ns: int
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    imu_quat_wxyz: FloatArray | None = None
    imu_gyro: FloatArray | None = None
    imu_acc: FloatArray | None = None


class SimRobot:
    """A MuJoCo robot driven by joint targets through per-joint PD servos."""

    def __init__(self, robot: RobotSpec, scene: Scene | None = None,
                 overlay: Overlay | None = None, randomization: Randomization | None = None,
                 seed: int = 0) -> None:
        self.robot = robot
        self.built: BuiltModel = build_model(robot, scene)
        self.model = self.built.model
        self.data = mujoco.MjData(self.model)
        self.dt_ns = int(round(self.model.opt.timestep * 1e9))
        self.nominal = self.built.nominal_params(robot)
        self.base = overlay.apply(self.nominal, robot.name) if overlay else self.nominal
        self.randomization = randomization
        if randomization is not None:
            randomization.check_targets(robot.joint_names, list(self.nominal.body_mass))
        self.rng = np.random.default_rng(seed)
        self.params = self.base
        self.step_count = 0
        self._pending: deque[tuple[int, JointTarget]] = deque()
        self.target = JointTarget.hold(robot.home)
        self.reset(randomize=False)

    @property
    def time_ns(self) -> int:
        """Sim time in integer nanoseconds (monotonic across resets)."""
        return self.step_count * self.dt_ns

    @property
    def delay_steps(self) -> int:
        """The command delay line length in physics steps."""
        return int(round(self.params.command_delay_s * 1e9 / self.dt_ns))

    def reset(self, randomize: bool = False) -> DynamicsParams:
        """Return to the home keyframe; with ``randomize``, draw new dynamics first."""
        if randomize and self.randomization is not None:
            self.params = self.randomization.sample(self.base, self.rng)
        elif not randomize:
            self.params = self.base
        self.built.write_params(self.robot, self.params)
        mujoco.mj_setConst(self.model, self.data)  # uses (and clobbers) data: before the reset
        mujoco.mj_resetDataKeyframe(self.model, self.data, self.built.home_key)
        self._pending.clear()
        self.target = JointTarget.hold(self.robot.home)
        self._apply(self.target)
        mujoco.mj_forward(self.model, self.data)
        return self.params

    def set_target(self, target: JointTarget) -> None:
        """Queue ``target``; it reaches the servos after the command delay."""
        delay = self.delay_steps
        if delay == 0:
            self._apply(target)
        else:
            self._pending.append((self.step_count + delay, target))

    def _apply(self, target: JointTarget) -> None:
        self.target = target
        ctrl = self.data.ctrl
        ctrl[self.built.servo_act] = target.position
        kd = np.fromiter((self.params.joints[n].kd for n in self.robot.joint_names), float,
                         self.robot.n)
        ctrl[self.built.ff_act] = kd * target.velocity + target.effort

    def set_joint_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Snap the joints to a measured state (twin re-sync); targets and delays are kept."""
        b = self.built
        self.data.qpos[b.qpos_adr] = position
        self.data.qvel[b.dof_adr] = velocity
        mujoco.mj_forward(self.model, self.data)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps, releasing delayed commands at their step."""
        pending = self._pending
        while n > 0:
            while pending and pending[0][0] <= self.step_count:
                self._apply(pending.popleft()[1])
            k = n if not pending else min(n, pending[0][0] - self.step_count)
            mujoco.mj_step(self.model, self.data, k)
            self.step_count += k
            n -= k
        while pending and pending[0][0] <= self.step_count:
            self._apply(pending.popleft()[1])

    def observe(self) -> Observation:
        """Measure the current state (runs ``mj_forward`` so sensors match the state)."""
        m, d, b = self.model, self.data, self.built
        mujoco.mj_forward(m, d)
        imu: dict[str, FloatArray | None] = {'q': None, 'g': None, 'a': None}
        if b.imu_adr is not None:
            s = d.sensordata
            qa, ga, aa = b.imu_adr['imu_quat'], b.imu_adr['imu_gyro'], b.imu_adr['imu_acc']
            imu = {'q': s[qa:qa + 4].copy(), 'g': s[ga:ga + 3].copy(), 'a': s[aa:aa + 3].copy()}
        return Observation(self.time_ns, d.qpos[b.qpos_adr].copy(), d.qvel[b.dof_adr].copy(),
                           d.qfrc_actuator[b.dof_adr].copy(), imu['q'], imu['g'], imu['a'])

    def raw_step_rate(self, steps: int = 5000) -> float:
        """Measure raw ``mj_step`` steps/s on a copy of this model's data (benchmarks)."""
        import time
        d = mujoco.MjData(self.model)
        d.qpos[:] = self.data.qpos
        d.ctrl[:] = self.data.ctrl
        t0 = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(self.model, d)
        return steps / (time.perf_counter() - t0)
