"""Build the PyBullet model of a robot: the same URDF, the servo law, IMU and scene.

PyBullet (``DIRECT`` mode: no GUI, no server process) loads the URDF with its inertias
(``URDF_USE_INERTIA_FROM_FILE``) on a fixed base. What differs from MuJoCo's import, and what
:class:`World` does about it:

* **servo law**: PyBullet's ``POSITION_CONTROL`` motor is a constraint whose gains are not
  N·m/rad, so the joints' motors carry no servo; each step :meth:`World.step` computes
  ``clip(kp (q_target - q) - kd qdot + ff, ±effort)`` from the state before the step and
  applies it with ``TORQUE_CONTROL`` (explicit, where MuJoCo's ``implicitfast`` integrates the
  ``kd`` term implicitly);
* **joint damping** (URDF ``<dynamics damping>``): PyBullet reads it but applies it through
  its own velocity damping; it is zeroed there and applied as ``-damping * qdot`` next to the
  servo torque (not part of the reported effort, as MuJoCo's passive force is not);
* **joint friction** (``frictionloss``): a ``VELOCITY_CONTROL`` motor with target 0 and
  maximum force ``frictionloss``, a constraint like MuJoCo's friction loss;
* **armature**: PyBullet has no reflected rotor inertia. It is **approximated** by adding it
  to the child link's principal inertia about the joint axis: that adds ``armature`` to the
  joint's own diagonal of the mass matrix, as MuJoCo does, but also to the joints above it
  whose axes are parallel (shoulder and elbow pitch both see the wrist's rotor). Reported by
  :meth:`World.approximations`. Without it the links' own inertia (5e-5 kg m² at the
  shoulder) makes the explicit ``kd`` term unstable at 1 ms (``kd dt / I`` = 14 > 2);
* **defaults that are not MuJoCo's**: PyBullet damps every link's velocity by 0.04 and
  gives links 0.5 contact friction (MuJoCo: no damping, friction 1); both are set to
  MuJoCo's. A link without ``<inertial>`` (``tool0``) gets PyBullet's mass 1 kg: it is set
  to 0 as MuJoCo has it.
"""

from __future__ import annotations

from contextlib import contextmanager
import math
import os
import sys
from typing import Any, Iterator
from xml.etree import ElementTree

import numpy as np
import numpy.typing as npt
import pybullet as pb

from simreal_ros.core.dynamics import DynamicsParams, JointDynamics
from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import ModelError
from simreal_ros.sim.scene import Scene

FloatArray = npt.NDArray[np.float64]
GRAVITY = (0.0, 0.0, -9.81)          # MuJoCo's default
CONTACT_FRICTION = 1.0               # MuJoCo's default geom friction (PyBullet's: 0.5)
ARMATURE_NOTE = ('armature: added to the child link inertia about the joint axis '
                 '(PyBullet has no rotor inertia; it also loads parallel joints above)')


def urdf_masses(robot: RobotSpec) -> dict[str, float]:
    """Link masses of the URDF (links with an ``<inertial>`` mass > 0), in file order."""
    root = ElementTree.parse(robot.urdf).getroot()
    out = {}
    for link in root.iter('link'):
        mass = link.find('inertial/mass')
        if mass is not None and float(mass.get('value', '0')) > 0:
            out[str(link.get('name'))] = float(mass.get('value', '0'))
    return out


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence the C library's stdout for a while.

    Its URDF importer prints a warning for ``tool0``, a link without ``<inertial>``, which
    :class:`World` handles.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _add_scene(client: int, scene: Scene) -> None:
    if scene.floor:
        plane = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=client)
        floor = pb.createMultiBody(0, plane, physicsClientId=client)
        pb.changeDynamics(floor, -1, lateralFriction=CONTACT_FRICTION, physicsClientId=client)
    for obj in scene.objects:
        s = obj.size
        if obj.shape == 'box':
            shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=list(s),
                                            physicsClientId=client)
        elif obj.shape == 'sphere':
            shape = pb.createCollisionShape(pb.GEOM_SPHERE, radius=s[0], physicsClientId=client)
        else:  # MuJoCo's cylinder/capsule size: radius, half-length; PyBullet's: full height
            kind = pb.GEOM_CYLINDER if obj.shape == 'cylinder' else pb.GEOM_CAPSULE
            shape = pb.createCollisionShape(kind, radius=s[0], height=2 * s[1],
                                            physicsClientId=client)
        body = pb.createMultiBody(obj.mass if obj.free else 0.0, shape,
                                  basePosition=list(obj.pos), physicsClientId=client)
        pb.changeDynamics(body, -1, lateralFriction=CONTACT_FRICTION, physicsClientId=client)


class World:
    """One PyBullet client holding the robot (and scene), stepped with the servo law."""

    def __init__(self, robot: RobotSpec, scene: Scene | None) -> None:
        self.robot = robot
        self.client = c = pb.connect(pb.DIRECT)
        pb.setGravity(*GRAVITY, physicsClientId=c)
        pb.setTimeStep(robot.timestep_s, physicsClientId=c)
        try:
            with _quiet_stdout():
                self.body = pb.loadURDF(str(robot.urdf), useFixedBase=True,
                                        flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c)
        except pb.error as exc:
            pb.disconnect(c)
            raise ModelError(f'{robot.urdf}: PyBullet could not load the URDF: {exc}') from None
        links: dict[str, int] = {pb.getBodyInfo(self.body, physicsClientId=c)[0].decode(): -1}
        joints: dict[str, int] = {}
        self.axes: dict[int, FloatArray] = {}
        for j in range(pb.getNumJoints(self.body, physicsClientId=c)):
            info = pb.getJointInfo(self.body, j, physicsClientId=c)
            joints[info[1].decode()] = j
            links[info[12].decode()] = j
            self.axes[j] = np.asarray(info[13], dtype=np.float64)
        masses = urdf_masses(robot)
        for name, j in links.items():
            pb.changeDynamics(self.body, j, linearDamping=0.0, angularDamping=0.0,
                              jointDamping=0.0, lateralFriction=CONTACT_FRICTION,
                              physicsClientId=c)
            if j >= 0 and name not in masses:  # no <inertial>: PyBullet made it 1 kg
                pb.changeDynamics(self.body, j, mass=0.0, localInertiaDiagonal=[0, 0, 0],
                                  physicsClientId=c)
        self.links = links
        for js in robot.joints:
            if js.name not in joints:
                raise ModelError(f'{robot.source}: joint {js.name!r} is not in {robot.urdf} '
                                 f'(URDF joints: {sorted(joints)})')
            info = pb.getJointInfo(self.body, joints[js.name], physicsClientId=c)
            if info[2] != pb.JOINT_REVOLUTE:
                raise ModelError(f'{robot.urdf}: joint {js.name!r} must be revolute')
        self.index = [joints[n] for n in robot.joint_names]
        self.nominal_mass = {n: m for n, m in masses.items() if n in links}
        self.nominal_inertia = {
            n: np.asarray(pb.getDynamicsInfo(self.body, links[n], physicsClientId=c)[2])
            for n in self.nominal_mass if links[n] >= 0}
        self.imu_link = -2
        if robot.imu is not None:
            if robot.imu.link not in links:
                raise ModelError(f'{robot.source}: imu.link {robot.imu.link!r} is not a link '
                                 f'of {robot.urdf} (links: {sorted(links)})')
            self.imu_link = links[robot.imu.link]
        if scene is not None:
            _add_scene(c, scene)
        n = robot.n
        self.kp, self.kd = np.zeros(n), np.zeros(n)
        self.damping = np.zeros(n)
        self.effort_limit = robot.effort_limit.copy()
        self.q_target, self.ff = robot.home.copy(), np.zeros(n)
        self.effort = np.zeros(n)
        self.applied = np.zeros(n)  # SimBackend.apply_torque: outside the servo's clamp
        self.q, self.qd = robot.home.copy(), np.zeros(n)
        self.prev_q, self.prev_qd = self.q.copy(), self.qd.copy()
        self.divergences = 0

    def close(self) -> None:
        """Disconnect the client."""
        if pb.isConnected(self.client):
            pb.disconnect(self.client)

    def nominal_params(self) -> DynamicsParams:
        """Damping and friction from the URDF, armature and gains from the robot spec."""
        joints = {}
        for js, j in zip(self.robot.joints, self.index, strict=True):
            info = pb.getJointInfo(self.body, j, physicsClientId=self.client)
            joints[js.name] = JointDynamics(float(info[6]), float(info[7]), js.armature,
                                            js.kp, js.kd)
        return DynamicsParams(joints, dict(self.nominal_mass))

    def write_params(self, params: DynamicsParams) -> None:
        """Gains and damping into the servo law; friction motors; masses and inertias."""
        c, robot = self.client, self.robot
        inertia = dict(self.nominal_inertia)
        for i, (name, j) in enumerate(zip(robot.joint_names, self.index, strict=True)):
            jd = params.joints[name]
            self.kp[i], self.kd[i], self.damping[i] = jd.kp, jd.kd, jd.damping
            pb.setJointMotorControl2(self.body, j, pb.VELOCITY_CONTROL, targetVelocity=0.0,
                                     force=jd.frictionloss, physicsClientId=c)
        for name, nominal in self.nominal_inertia.items():
            mass = params.body_mass.get(name, self.nominal_mass[name])
            inertia[name] = nominal * (mass / self.nominal_mass[name])
        for name, j in zip(robot.joint_names, self.index, strict=True):
            child = next(n for n, k in self.links.items() if k == j)
            axis = self.axes[j]
            inertia[child] = inertia.get(child, np.zeros(3)) + (
                params.joints[name].armature * axis * axis)
        for name, j in self.links.items():
            if j < 0 or name not in inertia:
                continue
            mass = params.body_mass.get(name, self.nominal_mass.get(name, 0.0))
            pb.changeDynamics(self.body, j, mass=mass, localInertiaDiagonal=list(inertia[name]),
                              lateralFriction=CONTACT_FRICTION * params.friction_scale,
                              physicsClientId=c)

    def set_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Reset the joints to ``position``/``velocity`` (PyBullet's resetJointState)."""
        for i, j in enumerate(self.index):
            pb.resetJointState(self.body, j, float(position[i]), float(velocity[i]),
                               physicsClientId=self.client)
        self.q, self.qd = np.array(position, dtype=np.float64), np.array(velocity, dtype=float)

    def read_state(self) -> None:
        """Read the joint angles and velocities (robot order) into ``q``, ``qd``."""
        states = pb.getJointStates(self.body, self.index, physicsClientId=self.client)
        self.q = np.fromiter((s[0] for s in states), float, len(states))
        self.qd = np.fromiter((s[1] for s in states), float, len(states))

    def step(self, n: int) -> None:
        """``n`` steps of the servo law (from the state before each step) + stepSimulation.

        The law runs on Python floats, not numpy: for six joints numpy's per-call overhead
        was 60 of the 120 us a step took here (the same IEEE operations, so the same bits).
        """
        c, body, index = self.client, self.body, self.index
        law = list(zip(self.kp.tolist(), self.kd.tolist(), self.q_target.tolist(),
                       self.ff.tolist(), self.effort_limit.tolist(), self.damping.tolist(),
                       strict=True))
        q, qd = self.q.tolist(), self.qd.tolist()
        applied = self.applied.tolist()
        # arrays until the first step, then the step's lists (converted back below)
        prev_q: Any = self.prev_q
        prev_qd: Any = self.prev_qd
        effort: Any = self.effort
        for _ in range(n):
            total = sum(q) + sum(qd)
            if total - total != 0.0:  # NaN or inf somewhere
                # MuJoCo resets a NaN state and warns; so does this engine, at home at rest
                self.divergences += 1
                self.set_state(self.robot.home, np.zeros(self.robot.n))
                q, qd = self.q.tolist(), self.qd.tolist()
            tau = [min(max(kp * (qt - x) - kd * v + ff, -lim), lim)
                   for (kp, kd, qt, ff, lim, _d), x, v in zip(law, q, qd, strict=True)]
            forces = [t - d * v + a for t, (*_l, d), v, a in zip(tau, law, qd, applied,
                                                                  strict=True)]
            pb.setJointMotorControlArray(body, index, pb.TORQUE_CONTROL, forces=forces,
                                         physicsClientId=c)
            pb.stepSimulation(physicsClientId=c)
            effort, prev_q, prev_qd = tau, q, qd
            states = pb.getJointStates(body, index, physicsClientId=c)
            q = [s[0] for s in states]
            qd = [s[1] for s in states]
        if n > 0:
            self.effort = np.array(effort, dtype=np.float64)
            self.prev_q = np.array(prev_q, dtype=np.float64)
            self.prev_qd = np.array(prev_qd, dtype=np.float64)
            self.q, self.qd = np.array(q, dtype=np.float64), np.array(qd, dtype=np.float64)

    def approximations(self, params: DynamicsParams) -> tuple[str, ...]:
        """Return what this model approximates of ``params`` (empty: nothing)."""
        if any(jd.armature > 0 for jd in params.joints.values()):
            return (ARMATURE_NOTE,)
        return ()

    def imu(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Site orientation (wxyz), gyro and accelerometer in the site frame.

        The acceleration is the site velocity's difference over the last step (PyBullet has
        no accelerometer), the state is put back afterwards.
        """
        assert self.robot.imu is not None
        now_v, w, rot, quat = self._site_motion()
        q, qd = self.q, self.qd
        self.set_state(self.prev_q, self.prev_qd)
        prev_v = self._site_motion()[0]
        self.set_state(q, qd)
        acc = (now_v - prev_v) / self.robot.timestep_s - np.asarray(GRAVITY)
        return quat, rot.T @ w, rot.T @ acc

    def _site_motion(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        assert self.robot.imu is not None
        st = pb.getLinkState(self.body, self.imu_link, computeLinkVelocity=1,
                             computeForwardKinematics=1, physicsClientId=self.client)
        com, frame_pos, frame_quat = np.asarray(st[0]), np.asarray(st[4]), st[5]
        rot = np.asarray(pb.getMatrixFromQuaternion(frame_quat)).reshape(3, 3)
        site = frame_pos + rot @ np.asarray(self.robot.imu.position)
        v, w = np.asarray(st[6]), np.asarray(st[7])
        quat = np.array([frame_quat[3], frame_quat[0], frame_quat[1], frame_quat[2]])
        return v + np.cross(w, site - com), w, rot, quat / math.sqrt(float(quat @ quat))

    def contacts(self) -> int:
        """Contact points at the current pose (after collision detection)."""
        pb.performCollisionDetection(physicsClientId=self.client)
        return len(pb.getContactPoints(physicsClientId=self.client))

    def gravity_torque(self, position: FloatArray) -> FloatArray:
        """Joint torques that hold ``position`` at rest (inverse dynamics, zero velocity)."""
        n = self.robot.n
        tau = pb.calculateInverseDynamics(self.body, [float(x) for x in position], [0.0] * n,
                                          [0.0] * n, physicsClientId=self.client)
        return np.asarray(tau, dtype=np.float64)
