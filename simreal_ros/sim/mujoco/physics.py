"""MuJoCo as a :class:`simreal_ros.sim.backend.SimBackend`: the sim bridge's physics.

The servo law is the model's actuators (:mod:`simreal_ros.sim.mujoco.model`): the position
servo carries ``kp * (q_target - q) - kd * qdot`` (integrated implicitly, ``implicitfast``),
the feed-forward motor the torque, and ``actfrcrange`` clamps their sum to the effort limit.
``model``, ``data`` and ``built`` are the compiled model, its state and the index maps, for
MuJoCo-specific tools and tests; everything else goes through the protocol.
"""

from __future__ import annotations

import copy
from dataclasses import replace
import time
from typing import Sequence

import mujoco
from mujoco import rollout as mj_rollout
import numpy as np

from simreal_ros.core.dynamics import DynamicsParams, Overlay, Randomization
from simreal_ros.core.robot import CameraSpec, RobotSpec
from simreal_ros.sim.backend import (
    BaseState,
    Capabilities,
    FloatArray,
    Observation,
    Probe,
    RolloutFeedback,
    RolloutJob,
    SimBackend,
)
from simreal_ros.sim.mujoco.model import BuiltModel, build_model
from simreal_ros.sim.mujoco.renderer import MujocoCameraRenderer
from simreal_ros.sim.scene import Scene

#: the warnings after which MuJoCo resets the state (non-finite or huge qpos, qvel, qacc)
DIVERGENCE_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
                       mujoco.mjtWarning.mjWARN_BADQACC)
STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


class MujocoSim(SimBackend):
    """A MuJoCo robot driven by joint targets through per-joint PD servos."""

    engine = 'mujoco'
    capabilities = Capabilities(armature=True, imu=True, scene_objects=True,
                                native_rollout=True, divergence_reset=True, cameras=True)

    def __init__(self, robot: RobotSpec, scene: Scene | None = None,
                 overlay: Overlay | None = None, randomization: Randomization | None = None,
                 seed: int = 0) -> None:
        self.built: BuiltModel = build_model(robot, scene)
        self.model = self.built.model
        self.data = mujoco.MjData(self.model)
        self._scratch = mujoco.MjData(self.model)
        self._rollout_datas: list[mujoco.MjData] = []
        super().__init__(robot, int(round(self.model.opt.timestep * 1e9)), overlay,
                         randomization, seed)

    def nominal_params(self) -> DynamicsParams:
        """Read the nominal dynamics from the model (URDF) and the robot spec (gains)."""
        return self.built.nominal_params(self.robot)

    def write_params(self, params: DynamicsParams) -> None:
        """Write ``params`` into the compiled model in place and recompute its constants."""
        self.built.write_params(self.robot, params)
        mujoco.mj_setConst(self.model, self.data)  # uses (and clobbers) data: before a reset

    def reset_state(self) -> None:
        """Reset to the home keyframe (its ctrl holds home, no feed-forward)."""
        mujoco.mj_resetDataKeyframe(self.model, self.data, self.built.home_key)
        mujoco.mj_forward(self.model, self.data)

    def actuate(self, position: FloatArray, feedforward: FloatArray) -> None:
        """Write the servo and feed-forward actuators' controls."""
        ctrl = self.data.ctrl
        ctrl[self.built.servo_act] = position
        ctrl[self.built.ff_act] = feedforward

    def apply_torque(self, torque: FloatArray) -> None:
        """Write ``qfrc_applied`` of the robot's joints (cleared by the keyframe reset)."""
        self.data.qfrc_applied[self.built.dof_adr] = torque

    def apply_base_force(self, force_world_n: FloatArray) -> None:
        """Write ``xfrc_applied`` of the base body (at its COM; the keyframe reset clears it)."""
        self.data.xfrc_applied[self.built.base_body, :3] = force_world_n

    def set_servo(self, joint: int, kp: float, kd: float, effort_limit: float) -> None:
        """Write the servo actuator's gains and the joint's actuator force range."""
        m, b = self.model, self.built
        a = int(b.servo_act[joint])
        m.actuator_gainprm[a, 0] = kp
        m.actuator_biasprm[a, 1] = -kp
        m.actuator_biasprm[a, 2] = -kd
        m.jnt_actfrcrange[int(m.dof_jntid[int(b.dof_adr[joint])])] = [-effort_limit,
                                                                       effort_limit]

    def set_joint_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Snap the joints to a measured state (twin re-sync); targets and delays are kept."""
        b = self.built
        self.data.qpos[b.qpos_adr] = position
        self.data.qvel[b.dof_adr] = velocity
        b.follow(self.data.qpos, self.data.qvel)
        mujoco.mj_forward(self.model, self.data)

    def advance(self, n: int) -> None:
        """``mj_step`` ``n`` times (one call)."""
        mujoco.mj_step(self.model, self.data, n)

    def observe(self) -> Observation:
        """Measure the current state (runs ``mj_forward`` so sensors match the state)."""
        m, d, b = self.model, self.data, self.built
        mujoco.mj_forward(m, d)
        imu: dict[str, FloatArray | None] = {'q': None, 'g': None, 'a': None}
        if b.imu_adr is not None:
            s = d.sensordata
            qa, ga, aa = b.imu_adr['imu_quat'], b.imu_adr['imu_gyro'], b.imu_adr['imu_acc']
            imu = {'q': s[qa:qa + 4].copy(), 'g': s[ga:ga + 3].copy(), 'a': s[aa:aa + 3].copy()}
        base, feet = (self._base_state(), self.foot_forces()) if b.base_qpos_adr >= 0 else (
            None, None)
        return Observation(self.time_ns, d.qpos[b.qpos_adr].copy(), d.qvel[b.dof_adr].copy(),
                           d.qfrc_actuator[b.dof_adr].copy(), imu['q'], imu['g'], imu['a'],
                           base, feet)

    def _base_state(self) -> BaseState:
        """Return the free joint's pose and velocity (linear in world, angular in body)."""
        d, qa, da = self.data, self.built.base_qpos_adr, self.built.base_dof_adr
        return BaseState(d.qpos[qa:qa + 3].copy(), d.qpos[qa + 3:qa + 7].copy(),
                         d.qvel[da:da + 3].copy(), d.qvel[da + 3:da + 6].copy())

    def foot_forces(self) -> FloatArray:
        """Per foot (robot spec order): the summed normal force of its contacts, N."""
        m, d = self.model, self.data
        feet = self.built.foot_bodies
        out = np.zeros(len(feet))
        if d.ncon == 0:
            return out
        f6 = np.zeros(6)
        body1 = m.geom_bodyid[d.contact.geom1[:d.ncon]]
        body2 = m.geom_bodyid[d.contact.geom2[:d.ncon]]
        for k, foot in enumerate(feet):
            for i in np.flatnonzero((body1 == foot) | (body2 == foot)):
                mujoco.mj_contactForce(m, d, int(i), f6)
                out[k] += f6[0]  # the contact frame's x axis is the normal
        return out

    def joint_positions(self) -> FloatArray:
        """Return ``qpos`` of the robot joints (a copy: index arrays copy)."""
        q: FloatArray = self.data.qpos[self.built.qpos_adr]
        return q

    def joint_state(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return ``qpos``, ``qvel``, ``qfrc_actuator`` of the robot joints as they are."""
        d, b = self.data, self.built
        return d.qpos[b.qpos_adr], d.qvel[b.dof_adr], d.qfrc_actuator[b.dof_adr]

    def divergences(self) -> int:
        """Count of MuJoCo's bad-qpos/qvel/qacc resets (the counters clear at a reset)."""
        return sum(int(self.data.warning[w].number) for w in DIVERGENCE_WARNINGS)

    def probe(self, position: FloatArray) -> Probe:
        """``mj_forward`` at ``position`` on a scratch copy: ``ncon`` and ``qfrc_bias``."""
        m, d, b = self.model, self._scratch, self.built
        d.qpos[:] = m.qpos0
        d.qvel[:] = 0.0
        d.qpos[b.qpos_adr] = position
        b.follow(d.qpos)
        mujoco.mj_forward(m, d)
        return Probe(int(d.ncon), d.qfrc_bias[b.dof_adr].copy())

    def moving_bodies(self) -> list[str]:
        """Bodies of the nominal masses whose weld root is not the world."""
        m = self.model
        return [b for b in self.nominal.body_mass if int(m.body_weldid[m.body(b).id]) != 0]

    def model_for(self, params: DynamicsParams) -> mujoco.MjModel:
        """Return a copy of the model with ``params`` written as :meth:`write_params` does."""
        m = copy.copy(self.model)
        replace(self.built, model=m).write_params(self.robot, params)
        mujoco.mj_setConst(m, self._scratch)
        return m

    def _initial_state(self, model: mujoco.MjModel, job: RolloutJob) -> FloatArray:
        d = self._scratch
        mujoco.mj_resetData(model, d)
        d.qpos[self.built.qpos_adr] = job.position
        d.qvel[self.built.dof_adr] = job.velocity
        self.built.follow(d.qpos, d.qvel)
        mujoco.mj_forward(model, d)
        state = np.empty(mujoco.mj_stateSize(model, STATE_SPEC))
        mujoco.mj_getState(model, d, state, STATE_SPEC)
        return state

    def rollout(self, params: Sequence[DynamicsParams], jobs: Sequence[RolloutJob],
                nthread: int = 1, feedback: RolloutFeedback | None = None) -> FloatArray:
        """``mujoco.rollout`` of every job (C, ``nthread`` threads), from its own model copy.

        With ``feedback``, one ``mujoco.rollout`` call per physics step over all jobs (a
        persistent thread pool; the full physics state carried from step to step), the
        feedback's torque added to each step's feed-forward.
        """
        n, b = self.robot.n, self.built
        models = [self.model_for(p) for p in params]
        kds = [np.array([p.joints[j].kd for j in self.robot.joint_names]) for p in params]
        while len(self._rollout_datas) < nthread:
            self._rollout_datas.append(mujoco.MjData(self.model))
        init, ctrl = [], []
        for job in jobs:
            init.append(self._initial_state(models[job.params], job))
            t = job.targets
            c = np.zeros((t.shape[0], self.model.nu))
            c[:, b.servo_act] = t[:, :n]
            c[:, b.ff_act] = kds[job.params][None, :] * t[:, n:2 * n] + t[:, 2 * n:]
            ctrl.append(c)
        job_models = [models[j.params] for j in jobs]
        datas = self._rollout_datas[:nthread]
        if feedback is None:
            state, _ = mj_rollout.rollout(job_models, datas, np.asarray(init), np.asarray(ctrl))
            return np.asarray(state[:, :, 1 + b.qpos_adr], dtype=np.float64)
        return self._rollout_stepped(job_models, datas, np.asarray(init), np.asarray(ctrl),
                                     feedback, nthread)

    def _rollout_stepped(self, models: list[mujoco.MjModel], datas: list[mujoco.MjData],
                         init: FloatArray, ctrl: FloatArray, feedback: RolloutFeedback,
                         nthread: int) -> FloatArray:
        """Run the jobs one physics step at a time, ``feedback`` between the steps."""
        adr = 1 + self.built.qpos_adr  # the state starts with the time
        # a slice where the joints' qpos are contiguous (every fixed-base arm): no gather
        qadr: slice | np.ndarray = slice(int(adr[0]), int(adr[-1]) + 1) \
            if np.array_equal(adr, np.arange(adr[0], adr[0] + adr.size)) else adr
        ff = self.built.ff_act
        jobs, steps = ctrl.shape[0], ctrl.shape[1]
        out = np.empty((jobs, steps, self.robot.n))
        bufs = [np.ascontiguousarray(init, dtype=np.float64).copy(),
                np.empty((jobs, init.shape[1]))]
        row = np.empty((jobs, 1, ctrl.shape[2]))
        with mj_rollout.Rollout(nthread=nthread) as pool:
            for k in range(steps):
                state, nxt = bufs[k % 2], bufs[(k + 1) % 2]
                row[:, 0] = ctrl[:, k]
                row[:, 0, ff] += feedback(k, state[:, qadr])
                pool.rollout(models, datas, state, row, nstep=1, state=nxt[:, None, :],
                             skip_checks=True)
                out[:, k] = nxt[:, qadr]
        return out

    def raw_step_rate(self, steps: int = 5000) -> float:
        """Measure raw ``mj_step`` steps/s on a copy of this model's data (benchmarks)."""
        d = mujoco.MjData(self.model)
        d.qpos[:] = self.data.qpos
        d.ctrl[:] = self.data.ctrl
        t0 = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(self.model, d)
        return steps / (time.perf_counter() - t0)

    def render_state(self) -> FloatArray:
        """Return ``qpos`` (a view)."""
        qpos: FloatArray = self.data.qpos  # a view: RenderThread.offer copies it when due
        return qpos

    def object_position_index(self, name: str) -> int:
        """Index of free object ``name``'s position in ``qpos`` (its free joint's address)."""
        j = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f'{name}_free')
        if j < 0:
            raise ValueError(f'the scene has no free object {name!r}')
        return int(self.model.jnt_qposadr[j])

    def place_object(self, name: str, xyz: Sequence[float]) -> None:
        """Put free object ``name`` at ``xyz`` (world, m), upright and at rest."""
        i = self.object_position_index(name)
        j = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f'{name}_free')
        dof = int(self.model.jnt_dofadr[j])
        self.data.qpos[i:i + 7] = [*xyz, 1.0, 0.0, 0.0, 0.0]
        self.data.qvel[dof:dof + 6] = 0.0

    def camera_renderer(self, cameras: Sequence[CameraSpec]) -> MujocoCameraRenderer:
        """Return an offscreen MuJoCo renderer of ``cameras`` with its own ``MjData``."""
        return MujocoCameraRenderer(self.model, cameras)
