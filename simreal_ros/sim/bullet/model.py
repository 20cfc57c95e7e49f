"""Build the PyBullet model of a robot: the same URDF, the servo law, IMU and scene.

PyBullet (``DIRECT`` mode: no GUI, no server process) loads the URDF with its inertias
(``URDF_USE_INERTIA_FROM_FILE``) on a fixed base. What differs from MuJoCo's import, and what
:class:`World` does about it:

* **servo law**: PyBullet's ``POSITION_CONTROL`` motor is a constraint whose gains are not
  N·m/rad, so the servo is Bullet's ``PD_CONTROL`` instead: ``clip(kp (q_target - q) +
  kd (v_target - qdot), ±effort)`` with ``v_target = ff / kd``, evaluated in C from the state
  before each step and applied as a joint torque (explicit, where MuJoCo's ``implicitfast``
  integrates the ``kd`` term implicitly). A feed-forward on a joint with ``kd = 0`` (which
  ``PD_CONTROL`` cannot carry) falls back to the same law in Python with ``TORQUE_CONTROL``;
* **joint damping** (URDF ``<dynamics damping>``): Bullet's ``jointDamping``, which applies
  ``-damping * qdot`` from the state before each step beside the servo torque (not part of
  the reported effort, as MuJoCo's passive force is not);
* **joint friction** (``frictionloss``): a ``VELOCITY_CONTROL`` motor with target 0 and
  maximum force ``frictionloss``, a constraint like MuJoCo's friction loss;
* **armature** (reflected rotor inertia): PyBullet has none. Each joint gets a **rotor**: a
  link ``<joint>__rotor`` on a continuous joint at the joint's origin and axis, child of the
  joint's parent, with isotropic inertia ``armature / GEAR_RATIO**2``, tied to the joint by a
  gear constraint (rotor speed = ``GEAR_RATIO`` x joint speed). Its kinetic energy is
  ``armature qdot**2 / 2`` (MuJoCo's armature, its limit of an infinite ratio) plus a
  gyroscopic coupling to the parent's rotation of ``armature / GEAR_RATIO`` (1 %) and an
  inertia of ``armature / GEAR_RATIO**2`` carried by the parent (1e-4): what is approximated,
  reported by :meth:`World.approximations`. The ratio is 100: over 20, 50, 100 and 353.5 (the
  XM430-W350's gearbox) the 6 s chirp's worst joint gap to MuJoCo was 0.52, 0.33, 0.28 and
  0.29 mrad (the constraint solver's residual grows with the ratio). The former
  approximation, the armature added to the child link's inertia about the joint axis, also
  loaded every parent joint with a parallel axis (the shoulder carried the elbow's and
  wrist's rotors: 0.034 instead of 0.012 kg m²) and left 6-13 mrad of gap. Armature cannot
  be left out: the links' own inertia (5e-5 kg m² at the shoulder) makes the explicit ``kd``
  term unstable at 1 ms (``kd dt / I`` = 14 > 2); an armature of 0 gets ``MIN_ARMATURE``;
* **mimic joints** (URDF ``<mimic>``, a gripper's fingers): PyBullet's importer ignores them,
  MuJoCo's makes a joint equality (the follower moves with the leader's angle, and its inertia
  loads the leader). Here each follower gets a position motor to ``multiplier * q_target +
  offset`` of its leader's servo set-point, at most ``|multiplier|`` x the leader's velocity
  limit, and :meth:`World.set_state` puts it at ``multiplier * q + offset``: the fingers
  follow the set-point, not the measured angle, and do not load the servo (reported by
  :meth:`World.approximations`). A gear constraint (``JOINT_GEAR``) between the revolute
  gripper and a prismatic finger was tried first: in pybullet 3.2.7 it threw the gripper to
  -12 rad within 20 steps of a command, whatever the ratio's sign, ``erp`` and force;
* **contact**: Bullet's is rigid, MuJoCo's soft; a floating base's feet get a spring-damper
  contact at MuJoCo's contact damping rate (:func:`simreal_ros.sim.bullet.floating.foot_contact`,
  which says what it approximates); every other link keeps the rigid contact;
* **defaults that are not MuJoCo's**: PyBullet damps every link's velocity by 0.04 and
  gives links 0.5 contact friction (MuJoCo: no damping, friction 1); both are set to
  MuJoCo's. A link without ``<inertial>`` (``tool0``) gets PyBullet's mass 1 kg: it is set
  to 0 as MuJoCo has it;
* **model files**: the URDF's mesh filenames are resolved to absolute paths first (PyBullet
  drops ``package://`` and looks beside the URDF only; simreal_ros/core/model_files.py). An
  MJCF model is refused: PyBullet's ``loadMJCF`` was measured unusable for a robot spec on a
  2-DoF arm (test/robot_files.py): it dropped both hinges' ranges (lower 1.0 > upper 0.0,
  Bullet's "no limit"), left the base free (it fell 4.6 m in 1 s), replaced each body's
  ``<inertial>`` by one computed from its geoms (4e-4 kg m² became 1.4e-3) and added a fixed
  joint per geom.
"""

from __future__ import annotations

from contextlib import contextmanager
import math
import os
import sys
import tempfile
from typing import Any, Iterator
from xml.etree import ElementTree

import numpy as np
import numpy.typing as npt
import pybullet as pb

from simreal_ros.core.dynamics import DynamicsParams, JointDynamics
from simreal_ros.core.model_files import ModelFileError, pybullet_mjcf_refusal, resolved_urdf
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.tf_tree import parse_urdf
from simreal_ros.errors import ConfigError, ModelError
from simreal_ros.sim.bullet.floating import FloatingBase
from simreal_ros.sim.scene import Scene

FloatArray = npt.NDArray[np.float64]
GRAVITY = (0.0, 0.0, -9.81)          # MuJoCo's default
CONTACT_FRICTION = 1.0               # MuJoCo's default geom friction (PyBullet's: 0.5)
MIMIC_NOTE = ("mimic joints: position motors to the leader servo's set-point (the "
              'followers neither lag the measured angle nor load the servo)')
ARMATURE_NOTE = ('armature: a rotor link per joint geared 100:1 to it (PyBullet has no '
                 'rotor inertia; its gyroscopic coupling to the parent link, armature/100, '
                 'is extra)')


ROTOR_SUFFIX = '__rotor'
GEAR_RATIO = 100.0      # rotor speed / joint speed (see the module docstring for the choice)
ROTOR_MASS = 1e-6       # kg, on the joint axis: Bullet needs a mass; its weight is 1e-5 N
MIMIC_FORCE = 100.0     # N or N*m, a mimic follower's position motor (stiff: it has no load)
MIN_ARMATURE = 1e-6     # kg m², the rotor of a joint whose armature is 0 (Bullet needs one)


@contextmanager
def _urdf_with_rotors(robot: RobotSpec) -> Iterator[str]:
    """Write the robot's URDF with one rotor link per joint to a temporary file.

    The rotor of joint ``J`` is link ``J__rotor`` on joint ``J__rotor`` (continuous), child
    of ``J``'s parent at ``J``'s origin and axis; its inertia is written by
    :meth:`World.write_params` and a gear constraint ties its speed to ``J``'s.
    """
    if robot.model_format != 'urdf':
        raise ModelError(pybullet_mjcf_refusal(robot.source, robot.urdf))
    try:
        root = resolved_urdf(robot.urdf)
    except ModelFileError as exc:
        raise ModelError(f'{robot.urdf}: PyBullet could not load the URDF: {exc}') from None
    for name in robot.joint_names:
        joint = root.find(f"joint[@name='{name}']")
        if joint is None:
            continue  # World names the missing joint
        parent = joint.find('parent')
        link = ElementTree.SubElement(root, 'link', name=name + ROTOR_SUFFIX)
        inertial = ElementTree.SubElement(link, 'inertial')
        ElementTree.SubElement(inertial, 'mass', value=repr(ROTOR_MASS))
        ElementTree.SubElement(inertial, 'inertia', ixx='1e-9', iyy='1e-9', izz='1e-9',
                               ixy='0', ixz='0', iyz='0')
        rotor = ElementTree.SubElement(root, 'joint', name=name + ROTOR_SUFFIX,
                                       type='continuous')
        ElementTree.SubElement(rotor, 'parent',
                               link=parent.get('link', '') if parent is not None else '')
        ElementTree.SubElement(rotor, 'child', link=name + ROTOR_SUFFIX)
        for tag in ('origin', 'axis'):
            el = joint.find(tag)
            if el is not None:
                rotor.append(el)
    fd, path = tempfile.mkstemp(suffix='.urdf', prefix=f'{robot.name}_rotors_')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(ElementTree.tostring(root))
        yield path
    finally:
        os.unlink(path)


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


def _add_plane(client: int) -> None:
    """Add a ground plane at z = 0 with MuJoCo's contact friction."""
    plane = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=client)
    floor = pb.createMultiBody(0, plane, physicsClientId=client)
    pb.changeDynamics(floor, -1, lateralFriction=CONTACT_FRICTION, physicsClientId=client)


def _add_scene(client: int, scene: Scene) -> None:
    if scene.floor:
        _add_plane(client)
    for obj in scene.objects:
        if obj.render_only:  # seen by cameras only, and PyBullet renders none here
            continue
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
            with _quiet_stdout(), _urdf_with_rotors(robot) as path:
                self.body = pb.loadURDF(path, useFixedBase=not robot.floating,
                                        flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c)
        except pb.error as exc:
            pb.disconnect(c)
            raise ModelError(f'{robot.urdf}: PyBullet could not load the URDF: {exc}') from None
        except ModelError:
            pb.disconnect(c)
            raise
        links: dict[str, int] = {pb.getBodyInfo(self.body, physicsClientId=c)[0].decode(): -1}
        joints: dict[str, int] = {}
        parents: dict[str, str] = {}
        for j in range(pb.getNumJoints(self.body, physicsClientId=c)):
            info = pb.getJointInfo(self.body, j, physicsClientId=c)
            joints[info[1].decode()] = j
            links[info[12].decode()] = j
            parents[info[12].decode()] = next(n for n, k in links.items() if k == info[16])
        masses = urdf_masses(robot)
        for name, j in links.items():
            pb.changeDynamics(self.body, j, linearDamping=0.0, angularDamping=0.0,
                              jointDamping=0.0, lateralFriction=CONTACT_FRICTION,
                              physicsClientId=c)
            if j >= 0 and name not in masses and not name.endswith(ROTOR_SUFFIX):
                # no <inertial>: PyBullet made it 1 kg
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
        self.rotor_index = [joints[n + ROTOR_SUFFIX] for n in robot.joint_names]
        pb.setJointMotorControlArray(self.body, self.rotor_index, pb.VELOCITY_CONTROL,
                                     forces=[0.0] * robot.n, physicsClientId=c)
        for j, r in zip(self.index, self.rotor_index, strict=True):
            gear = pb.createConstraint(self.body, j, self.body, r, pb.JOINT_GEAR, [0, 0, 1],
                                       [0, 0, 0], [0, 0, 0], physicsClientId=c)
            pb.changeConstraint(gear, gearRatio=-1.0 / GEAR_RATIO, maxForce=1e6, erp=0.0,
                                physicsClientId=c)
        self.mimics = self._mimics(joints)
        self.dofs = [j for j in range(pb.getNumJoints(self.body, physicsClientId=c))
                     if pb.getJointInfo(self.body, j, physicsClientId=c)[2] != pb.JOINT_FIXED]
        self.nominal_mass = {n: m for n, m in masses.items() if n in links}
        self.nominal_inertia = {
            n: np.asarray(pb.getDynamicsInfo(self.body, links[n], physicsClientId=c)[2])
            for n in self.nominal_mass if links[n] >= 0 or robot.floating}
        self.floating: FloatingBase | None = None
        if robot.floating:
            self.floating = FloatingBase(robot, c, self.body, links, parents,
                                         sum(self.nominal_mass.values()))
            self.floating.reset()  # loadURDF put the base's origin at the world's
            if scene is None or not scene.floor:
                _add_plane(c)
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
        self._prev_states: Any = ()
        self._prev_site: tuple[Any, ...] | None = None
        self.native = True
        self.python_law = False  # True: the Python law always (the tests' check of the C one)
        self.divergences = 0

    def _mimics(self, joints: dict[str, int]) -> list[tuple[int, int, float, float]]:
        """Each ``<mimic>`` joint of a robot joint: ``(follower, leader, mult, offset)``."""
        c = self.client
        try:
            urdf = parse_urdf(self.robot.urdf.read_text(encoding='utf-8'), self.robot.urdf)
        except ConfigError as exc:
            raise ModelError(str(exc)) from None
        out = []
        for j in urdf:
            if (j.mimic is None or j.name not in joints
                    or j.mimic[0] not in self.robot.joint_names):
                continue
            leader, mult, offset = j.mimic
            f, lead = joints[j.name], joints[leader]
            # the URDF's velocity limit bounds the follower's motor below, not Bullet's clamp
            pb.changeDynamics(self.body, f, maxJointVelocity=1e6, physicsClientId=c)
            out.append((f, lead, mult, offset))
        return out

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
            # -damping * qdot from the state before each step, beside the servo torque
            pb.changeDynamics(self.body, j, jointDamping=jd.damping, physicsClientId=c)
        for name, nominal in self.nominal_inertia.items():
            mass = params.body_mass.get(name, self.nominal_mass[name])
            inertia[name] = nominal * (mass / self.nominal_mass[name])
        for name, r in zip(robot.joint_names, self.rotor_index, strict=True):
            rotor = max(params.joints[name].armature, MIN_ARMATURE) / GEAR_RATIO ** 2
            pb.changeDynamics(self.body, r, mass=ROTOR_MASS, localInertiaDiagonal=[rotor] * 3,
                              physicsClientId=c)
            # separately: with maxJointVelocity in the same call the inertia is not written
            # (pybullet 3.2.7); Bullet's default limit of 100 rad/s would stall the rotor
            pb.changeDynamics(self.body, r, maxJointVelocity=1e6, physicsClientId=c)
        for name, j in self.links.items():
            if (j < 0 and self.floating is None) or name not in inertia:
                continue
            mass = params.body_mass.get(name, self.nominal_mass.get(name, 0.0))
            pb.changeDynamics(self.body, j, mass=mass, localInertiaDiagonal=list(inertia[name]),
                              lateralFriction=CONTACT_FRICTION * params.friction_scale,
                              physicsClientId=c)
        self.push_servo()

    def set_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Reset the joints to ``position``/``velocity`` (one ``resetJointStatesMultiDof``).

        The state before the last step becomes this one (an accelerometer at rest reads -g).
        """
        q = np.array(position, dtype=np.float64)
        qd = np.array(velocity, dtype=np.float64)
        pb.resetJointStatesMultiDof(
            self.body, self.index + self.rotor_index,
            [[x] for x in q.tolist()] + [[GEAR_RATIO * x] for x in q.tolist()],
            [[x] for x in qd.tolist()] + [[GEAR_RATIO * x] for x in qd.tolist()],
            physicsClientId=self.client)
        if self.mimics:
            at = dict(zip(self.index, zip(q.tolist(), qd.tolist(), strict=True), strict=True))
            follow = [(f, at[lead], m, off) for f, lead, m, off in self.mimics if lead in at]
            pb.resetJointStatesMultiDof(
                self.body, [f for f, *_ in follow],
                [[m * s[0] + off] for _, s, m, off in follow],
                [[m * s[1]] for _, s, m, _off in follow], physicsClientId=self.client)
        self.q, self.qd = q, qd
        self._prev_site = None

    def read_state(self) -> None:
        """Read the joint angles and velocities (robot order) into ``q``, ``qd``."""
        states = pb.getJointStates(self.body, self.index, physicsClientId=self.client)
        self.q = np.array([s[0] for s in states], dtype=np.float64)
        self.qd = np.array([s[1] for s in states], dtype=np.float64)

    def actuate(self, position: FloatArray, feedforward: FloatArray) -> None:
        """Set the servo law's set-points and feed-forward, effective from the next step."""
        self.q_target = np.array(position, dtype=np.float64)
        self.ff = np.array(feedforward, dtype=np.float64)
        self.push_servo()

    def push_servo(self) -> None:
        """Hand the servo law to Bullet: one ``PD_CONTROL`` call for every joint.

        Bullet's PD motor evaluates ``clip(kp (q_target - q) + kd (v_target - qdot), ±force)``
        from the state before every step, in C; with ``v_target = ff / kd`` that is this
        stack's law (the same bits but for the rounding of ``kd * (ff / kd)``, measured 1e-17
        rad over 300 steps against the law in Python). It cannot carry a feed-forward on a
        joint with ``kd = 0``, nor an added torque (``applied``, a learned residual's): then
        :meth:`step` runs the law in Python, ``TORQUE_CONTROL`` every step (4x slower).
        """
        kd = self.kd
        self.native = (not self.python_law and not np.any(self.applied)
                       and bool(np.all((kd > 0) | (self.ff == 0))))
        if self.native:
            vt = np.divide(self.ff, kd, out=np.zeros_like(self.ff), where=kd > 0)
            law = (self.q_target.tolist(), vt.tolist(), self.kp.tolist(), kd.tolist(),
                   self.effort_limit.tolist())
        else:  # a PD motor stays on until zeroed, beside any TORQUE_CONTROL torque
            law = ([0.0] * self.robot.n,) * 5
        pb.setJointMotorControlArray(
            self.body, self.index, pb.PD_CONTROL, targetPositions=law[0],
            targetVelocities=law[1], positionGains=law[2], velocityGains=law[3],
            forces=law[4], physicsClientId=self.client)
        at = {j: i for i, j in enumerate(self.index)}
        for f, lead, mult, offset in self.mimics:
            i = at[lead]
            pb.setJointMotorControl2(
                self.body, f, pb.POSITION_CONTROL,
                targetPosition=mult * float(self.q_target[i]) + offset,
                maxVelocity=abs(mult) * float(self.robot.velocity_limit[i]),
                force=MIMIC_FORCE, physicsClientId=self.client)

    def step(self, n: int) -> None:
        """``n`` steps of the servo law (from the state before each step) + stepSimulation.

        The joint state is read twice per call, not per step: before the last step (the
        effort the last step applied, the IMU's previous site velocity) and after it. A
        non-finite state is reset to home at rest at the end of the call and counted.
        """
        if n <= 0:
            return
        if not self.native:
            self._step_python(n)
            return
        c = self.client
        fb = self.floating
        if fb is not None and fb.force is not None:  # a push, applied before every step
            for _ in range(n - 1):
                fb.push()
                pb.stepSimulation(physicsClientId=c)
            self._before_last_step()
            fb.push()
        else:
            for _ in range(n - 1):
                pb.stepSimulation(physicsClientId=c)
            self._before_last_step()
        pb.stepSimulation(physicsClientId=c)
        self._after_steps()

    def _before_last_step(self) -> None:
        states = pb.getJointStates(self.body, self.index, physicsClientId=self.client)
        self._prev_states = states
        self._prev_site = self._link_state() if self.imu_link > -2 else None

    def _link_state(self) -> tuple[Any, ...]:
        """Return the IMU link's state now: COM, frame pose, velocities (``getLinkState``)."""
        if self.imu_link == -1:
            assert self.floating is not None  # a fixed base's link -1 does not move
            return self.floating.link_state()
        st: tuple[Any, ...] = pb.getLinkState(self.body, self.imu_link, computeLinkVelocity=1,
                                              computeForwardKinematics=1,
                                              physicsClientId=self.client)
        return st

    def _after_steps(self) -> None:
        # Python floats, not numpy: numpy's per-call overhead made this a third of the
        # physics of a five-step batch
        lim = self.effort_limit.tolist()
        tau = [min(max(kp * (qt - s[0]) - kd * s[1] + ff, -e), e)
               for kp, kd, qt, ff, e, s in zip(self.kp.tolist(), self.kd.tolist(),
                                               self.q_target.tolist(), self.ff.tolist(), lim,
                                               self._prev_states, strict=True)]
        self.effort = np.array(tau, dtype=np.float64)
        states = pb.getJointStates(self.body, self.index, physicsClientId=self.client)
        q = [s[0] for s in states]
        qd = [s[1] for s in states]
        total = sum(q) + sum(qd)
        if total - total != 0.0:  # NaN or inf somewhere
            # MuJoCo resets a NaN state and warns; so does this engine, at home at rest
            self.divergences += 1
            self.set_state(self.robot.home, np.zeros(self.robot.n))
            if self.floating is not None:
                self.floating.reset()
                self.floating.force = None
            return
        self.q = np.array(q, dtype=np.float64)
        self.qd = np.array(qd, dtype=np.float64)

    def _step_python(self, n: int) -> None:
        """Run the servo law in Python, ``TORQUE_CONTROL`` each step (feed-forward, kd 0).

        On Python floats, not numpy: for six joints numpy's per-call overhead was half of
        each step. Joint damping stays Bullet's (``jointDamping``), as on the native path.
        """
        c, body, index = self.client, self.body, self.index
        law = list(zip(self.kp.tolist(), self.kd.tolist(), self.q_target.tolist(),
                       self.ff.tolist(), self.effort_limit.tolist(), strict=True))
        applied = self.applied.tolist()  # SimBackend.apply_torque, outside the clamp
        for k in range(n):
            states = pb.getJointStates(body, index, physicsClientId=c)
            forces = [min(max(kp * (qt - s[0]) - kd * s[1] + ff, -lim), lim) + a
                      for (kp, kd, qt, ff, lim), s, a in zip(law, states, applied,
                                                             strict=True)]
            pb.setJointMotorControlArray(body, index, pb.TORQUE_CONTROL, forces=forces,
                                         physicsClientId=c)
            if k == n - 1:
                self._before_last_step()
            if self.floating is not None:
                self.floating.push()
            pb.stepSimulation(physicsClientId=c)
        self._after_steps()

    def approximations(self, params: DynamicsParams) -> tuple[str, ...]:
        """Return what this model approximates of ``params`` (empty: nothing)."""
        notes = (MIMIC_NOTE,) if self.mimics else ()
        if any(jd.armature > 0 for jd in params.joints.values()):
            return (ARMATURE_NOTE,) + notes
        return notes

    def imu(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Site orientation (wxyz), gyro and accelerometer in the site frame.

        The acceleration is the site velocity's difference over the last step (PyBullet has
        no accelerometer); the site's velocity before that step was read by :meth:`step`.
        Computed on Python floats: numpy's per-call overhead made this 160 us, three times
        the physics of the five steps between two published states.
        """
        assert self.robot.imu is not None
        now_v, w, rot, quat = self._site_motion(self._link_state())
        prev_v = now_v if self._prev_site is None else self._site_motion(self._prev_site)[0]
        dt = self.robot.timestep_s
        acc = [(a - b) / dt - g for a, b, g in zip(now_v, prev_v, GRAVITY, strict=True)]
        r0, r1, r2 = rot[0:3], rot[3:6], rot[6:9]  # rows of the frame's rotation
        columns = list(zip(r0, r1, r2, strict=True))  # R^T's rows are R's columns
        gyro = [col[0] * w[0] + col[1] * w[1] + col[2] * w[2] for col in columns]
        acc_site = [col[0] * acc[0] + col[1] * acc[1] + col[2] * acc[2] for col in columns]
        return (np.array(quat, dtype=np.float64), np.array(gyro, dtype=np.float64),
                np.array(acc_site, dtype=np.float64))

    def _site_motion(self, st: tuple[Any, ...]
                     ) -> tuple[list[float], tuple[float, ...], tuple[float, ...], list[float]]:
        """Site velocity (world), link angular velocity, frame rotation (row-major), quat."""
        assert self.robot.imu is not None
        com, pos, fq = st[0], st[4], st[5]
        rot = pb.getMatrixFromQuaternion(fq)
        px, py, pz = self.robot.imu.position
        site = [pos[i] + rot[3 * i] * px + rot[3 * i + 1] * py + rot[3 * i + 2] * pz
                for i in range(3)]
        v, w = st[6], st[7]
        r = [site[i] - com[i] for i in range(3)]
        vel = [v[0] + w[1] * r[2] - w[2] * r[1], v[1] + w[2] * r[0] - w[0] * r[2],
               v[2] + w[0] * r[1] - w[1] * r[0]]
        norm = math.sqrt(fq[0] ** 2 + fq[1] ** 2 + fq[2] ** 2 + fq[3] ** 2)
        quat = [fq[3] / norm, fq[0] / norm, fq[1] / norm, fq[2] / norm]
        return vel, w, rot, quat

    def contacts(self) -> int:
        """Contact points at the current pose (after collision detection)."""
        pb.performCollisionDetection(physicsClientId=self.client)
        return len(pb.getContactPoints(physicsClientId=self.client))

    def gravity_torque(self, position: FloatArray) -> FloatArray:
        """Joint torques that hold ``position`` at rest (inverse dynamics, zero velocity).

        A floating base is held level and unaccelerated (as MuJoCo's ``qfrc_bias`` has it).
        """
        full = dict.fromkeys(self.dofs, 0.0)
        full.update(zip(self.index, (float(x) for x in position), strict=True))
        base_q, base_v = [], []
        if self.floating is not None:  # the base's pose (xyz, quat xyzw) and 6 velocities
            base_q, base_v = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0.0] * 6
        zero = base_v + [0.0] * len(full)
        tau = pb.calculateInverseDynamics(self.body, base_q + list(full.values()), zero, zero,
                                          physicsClientId=self.client)
        at = {j: k + len(base_v) for k, j in enumerate(self.dofs)}
        return np.array([tau[at[j]] for j in self.index], dtype=np.float64)
