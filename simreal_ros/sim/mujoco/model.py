"""Build the MuJoCo model of a robot: URDF + actuators + IMU + scene, via ``MjSpec``.

MuJoCo's URDF importer creates bodies, joints (with ``<dynamics>`` damping and friction) and
geoms but no actuators. Each spec joint gets two actuators here:

* ``<joint>``: a position servo ``kp * (ctrl - q) - kd * qdot`` (gains from the robot spec);
* ``<joint>_ff``: a torque motor carrying the feed-forward ``kd * v_target + tau_ff``,

and the joint's total actuator force is clamped to the spec's effort limit with
``actfrcrange``, which is how a current-limited servo saturates.

The model file is the spec's URDF or MJCF. A URDF is loaded with its mesh filenames resolved to
absolute paths first (``package://`` through ``SIMREAL_MODEL_PATH`` and the ament index, see
simreal_ros/core/model_files.py): MuJoCo itself reads ``package://pkg/m.stl`` as the relative
path ``package:/pkg/m.stl``. An MJCF is loaded as it is; actuators it declares on the spec's
joints are replaced by the two above, so that every model is driven by the same servo law.

A floating base (``base.type: floating`` in the robot spec) gets a free joint ``base_free`` on
its root link ``base_frame`` (which must be a child of the world), placed at ``base.height_m``,
level, in the home keyframe; a ground plane ``ground`` (MuJoCo's default contact bits, friction
1) is added unless the scene has a floor. The feet's bodies are kept for the contact forces.

A URDF ``<mimic>`` joint (a gripper's fingers) becomes, through MuJoCo's importer, a joint
equality ``q_follower = offset + multiplier * q_leader``. Wherever the stack puts the robot's
joints at a state (the home keyframe, a re-sync, a rollout's start) :meth:`BuiltModel.follow`
puts each follower of a robot joint there too, so that the constraint starts satisfied instead
of yanking the fingers in the first steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree import ElementTree

import mujoco
import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import DynamicsParams, JointDynamics
from simreal_ros.core.model_files import resolved_urdf
from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import ModelError
from simreal_ros.sim.floating_base import check_links, home_pose
from simreal_ros.sim.scene import Scene

HOME_KEY = 'home'
IMU_SITE = 'imu_site'
IMU_SENSORS = ('imu_quat', 'imu_gyro', 'imu_acc')
BASE_JOINT = 'base_free'
GROUND = 'ground'

IntArray = npt.NDArray[np.int64]


@dataclass
class BuiltModel:
    """A compiled model plus the index maps from robot order into MuJoCo arrays."""

    model: mujoco.MjModel
    qpos_adr: IntArray
    dof_adr: IntArray
    servo_act: IntArray
    ff_act: IntArray
    home_key: int
    imu_adr: dict[str, int] | None
    robot_bodies: list[str]
    nominal_inertia: npt.NDArray[np.float64]
    nominal_mass: npt.NDArray[np.float64]
    nominal_friction: npt.NDArray[np.float64]
    #: per mimic follower of a robot joint: (follower qpos adr, follower dof adr, robot index
    #: of the leader, multiplier, offset)
    mimics: tuple[tuple[int, int, int, float, float], ...] = ()
    #: a floating base: qpos address of its free joint (x y z qw qx qy qz), dof address
    #: (vx vy vz in the world frame, wx wy wz in the base frame), -1 for a fixed base
    base_qpos_adr: int = -1
    base_dof_adr: int = -1
    #: body ids of the robot spec's feet, in its order
    foot_bodies: tuple[int, ...] = ()
    #: body id of a floating base's ``base_frame`` (-1: a fixed base)
    base_body: int = -1

    def follow(self, qpos: npt.NDArray[np.float64],
               qvel: npt.NDArray[np.float64] | None = None) -> None:
        """Put every mimic follower at ``offset + multiplier * leader`` (in place)."""
        for qa, da, i, mult, offset in self.mimics:
            qpos[qa] = offset + mult * qpos[self.qpos_adr[i]]
            if qvel is not None:
                qvel[da] = mult * qvel[self.dof_adr[i]]

    def nominal_params(self, robot: RobotSpec) -> DynamicsParams:
        """Read the nominal dynamics from the model (URDF) and the robot spec (gains)."""
        m = self.model
        joints = {}
        for i, js in enumerate(robot.joints):
            d = int(self.dof_adr[i])
            joints[js.name] = JointDynamics(float(m.dof_damping[d]),
                                            float(m.dof_frictionloss[d]),
                                            float(m.dof_armature[d]), js.kp, js.kd)
        masses = {m.body(b).name: float(self.nominal_mass[b]) for b in range(1, m.nbody)
                  if self.nominal_mass[b] > 0}
        return DynamicsParams(joints, masses)

    def write_params(self, robot: RobotSpec, params: DynamicsParams) -> None:
        """Write ``params`` into the compiled model in place (no recompilation)."""
        m = self.model
        for i, js in enumerate(robot.joints):
            jd = params.joints[js.name]
            d = int(self.dof_adr[i])
            m.dof_damping[d] = jd.damping
            m.dof_frictionloss[d] = jd.frictionloss
            m.dof_armature[d] = jd.armature
            a = int(self.servo_act[i])
            m.actuator_gainprm[a, 0] = jd.kp
            m.actuator_biasprm[a, 1] = -jd.kp
            m.actuator_biasprm[a, 2] = -jd.kd
        for name, mass in params.body_mass.items():
            b = m.body(name).id
            scale = mass / self.nominal_mass[b]
            m.body_mass[b] = mass
            m.body_inertia[b] = self.nominal_inertia[b] * scale
        m.geom_friction[:, 0] = self.nominal_friction[:, 0] * params.friction_scale


def _add_scene(spec: mujoco.MjSpec, scene: Scene) -> None:
    world = spec.worldbody
    if scene.floor:
        world.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.05],
                       rgba=[0.82, 0.84, 0.86, 1])
    if scene.light:
        # no shadow map: in software rendering it cost 6x a frame (17 vs 100-135 ms at
        # 640x480, tabletop, load 5), see docs/camera.md
        world.add_light(name='key_light', pos=[0.5, -0.5, 1.5], dir=[-0.3, 0.3, -1],
                        castshadow=False)
    shapes = {'box': mujoco.mjtGeom.mjGEOM_BOX, 'sphere': mujoco.mjtGeom.mjGEOM_SPHERE,
              'cylinder': mujoco.mjtGeom.mjGEOM_CYLINDER,
              'capsule': mujoco.mjtGeom.mjGEOM_CAPSULE}
    for obj in scene.objects:
        size = list(obj.size) + [0.0] * (3 - len(obj.size))
        if obj.free:
            # render-only: gravity compensated and in contact with nothing, so it rests where
            # placed. Its contype is 0 and its conaffinity a bit (4) no other geom's contype
            # has: both 0 would make the URDF importer's discardvisual drop the geom (the ball
            # vanished from every frame)
            body = world.add_body(name=obj.name, pos=list(obj.pos),
                                  gravcomp=1.0 if obj.render_only else 0.0)
            body.add_freejoint(name=f'{obj.name}_free')
            body.add_geom(name=obj.name, type=shapes[obj.shape], size=size,
                          rgba=list(obj.rgba), mass=obj.mass,
                          contype=0 if obj.render_only else 1,
                          conaffinity=4 if obj.render_only else 1)
        else:
            world.add_geom(name=obj.name, type=shapes[obj.shape], size=size,
                           rgba=list(obj.rgba), pos=list(obj.pos))


def _add_stage(spec: mujoco.MjSpec, scene: Scene | None) -> None:
    """Give a robot's cameras something lit to see where the scene has no floor or light.

    Without a scene the arm was rendered under MuJoCo's dim default headlight against black:
    mean luma 0.6 of 255 in every frame of a recording, so each frame was a black frame to
    ``simreal check``. The floor added here touches nothing: its contact bits are 2, which no
    robot or scene geom has (MuJoCo's defaults are 1; bits 0 would make the URDF importer's
    ``discardvisual`` drop it), and a light has no dynamics, so the physics stay the robot's.
    """
    if scene is None or not scene.floor:
        # a plain colour: the importer's discardvisual also drops textures and materials
        spec.worldbody.add_geom(name='stage_floor', type=mujoco.mjtGeom.mjGEOM_PLANE,
                                size=[2, 2, 0.05], rgba=[0.62, 0.64, 0.67, 1], contype=2,
                                conaffinity=2)
    if scene is None or not scene.light:
        spec.worldbody.add_light(name='stage_light', pos=[0.5, -0.5, 1.5], dir=[-0.3, 0.3, -1],
                                 diffuse=[0.6, 0.6, 0.6], castshadow=False)
    spec.visual.headlight.ambient = [0.3, 0.3, 0.3]


def _add_floating_base(spec: mujoco.MjSpec, robot: RobotSpec, scene: Scene | None) -> None:
    """Free the root link at ``base.height_m`` and give it ground to stand on."""
    assert robot.base is not None
    names = {b.name for b in spec.bodies}
    parent = spec.body(robot.base_frame).parent.name if robot.base_frame in names else ''
    check_links(robot, names, robot.base_frame, parent, robot.model_format.upper())
    body = spec.body(robot.base_frame)
    position, orientation = home_pose(robot)
    body.pos = position.tolist()
    body.quat = orientation.tolist()
    body.add_freejoint(name=BASE_JOINT)
    if scene is None or not scene.floor:
        spec.worldbody.add_geom(name=GROUND, type=mujoco.mjtGeom.mjGEOM_PLANE,
                                size=[5, 5, 0.05], rgba=[0.82, 0.84, 0.86, 1])


def load_spec(robot: RobotSpec) -> mujoco.MjSpec:
    """Load the robot's model file (URDF with resolved meshes, or MJCF) as an ``MjSpec``."""
    kind = robot.model_format.upper()
    try:
        if robot.model_format == 'urdf':
            text = ElementTree.tostring(resolved_urdf(robot.urdf), encoding='unicode')
            spec = mujoco.MjSpec.from_string(text)
        else:
            spec = mujoco.MjSpec.from_file(str(robot.urdf))
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises ValueError with its parser text
        raise ModelError(f'{robot.urdf}: MuJoCo could not load the {kind}: {exc}') from None
    if robot.model_format == 'mjcf':
        spec_joints = set(robot.joint_names)
        for act in list(spec.actuators):
            if act.target in spec_joints:
                spec.delete(act)
    return spec


def _joint_range(spec: mujoco.MjSpec, j: mujoco.MjsJoint) -> tuple[float, float]:
    """Return a hinge's range in rad (an MJCF's is in degrees unless ``angle="radian"``)."""
    lo, hi = float(j.range[0]), float(j.range[1])
    if j.limited == mujoco.mjtLimited.mjLIMITED_FALSE or (
            j.limited == mujoco.mjtLimited.mjLIMITED_AUTO and not lo < hi):
        return -np.inf, np.inf
    if spec.compiler.degree:
        return float(np.radians(lo)), float(np.radians(hi))
    return lo, hi


def build_model(robot: RobotSpec, scene: Scene | None = None) -> BuiltModel:
    """Compile the robot (and scene) and return it with its index maps."""
    spec = load_spec(robot)
    spec.option.timestep = robot.timestep_s
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    joint_names = {j.name for j in spec.joints}
    for js in robot.joints:
        if js.name not in joint_names:
            raise ModelError(f'{robot.source}: joint {js.name!r} is not in {robot.urdf} '
                             f'({robot.model_format.upper()} joints: {sorted(joint_names)})')
        j = spec.joint(js.name)
        if j.type != mujoco.mjtJoint.mjJNT_HINGE:
            raise ModelError(f'{robot.urdf}: joint {js.name!r} must be revolute')
        lo, hi = _joint_range(spec, j)
        if js.limits.lower < lo - 1e-9 or js.limits.upper > hi + 1e-9:
            raise ModelError(f'{robot.source}: limits of {js.name!r} [{js.limits.lower}, '
                             f'{js.limits.upper}] exceed the {robot.model_format.upper()} '
                             f'limits [{lo}, {hi}]')
        j.armature = js.armature
        j.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        j.actfrcrange = [-js.limits.effort, js.limits.effort]
        servo = spec.add_actuator(name=js.name, target=js.name,
                                  trntype=mujoco.mjtTrn.mjTRN_JOINT)
        servo.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        servo.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        gain = np.zeros(10)
        gain[0] = js.kp
        bias = np.zeros(10)
        bias[1], bias[2] = -js.kp, -js.kd
        servo.gainprm = gain
        servo.biasprm = bias
        spec.add_actuator(name=f'{js.name}_ff', target=js.name,
                          trntype=mujoco.mjtTrn.mjTRN_JOINT)
    if robot.imu is not None:
        body_names = {b.name for b in spec.bodies}
        if robot.imu.link not in body_names:
            raise ModelError(f'{robot.source}: imu.link {robot.imu.link!r} is not a link of '
                             f'{robot.urdf} (links: {sorted(body_names - {"world"})})')
        spec.body(robot.imu.link).add_site(name=IMU_SITE, pos=list(robot.imu.position))
        spec.add_sensor(name='imu_quat', type=mujoco.mjtSensor.mjSENS_FRAMEQUAT,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname=IMU_SITE)
        spec.add_sensor(name='imu_gyro', type=mujoco.mjtSensor.mjSENS_GYRO,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname=IMU_SITE)
        spec.add_sensor(name='imu_acc', type=mujoco.mjtSensor.mjSENS_ACCELEROMETER,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname=IMU_SITE)
    robot_bodies = [b.name for b in spec.bodies if b.name != 'world']
    if robot.floating:
        _add_floating_base(spec, robot, scene)
    if scene is not None:
        _add_scene(spec, scene)
    if robot.cameras:
        _add_stage(spec, scene)
    try:
        model = spec.compile()
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f'{robot.urdf}: MuJoCo could not compile the model: {exc}') from None
    qpos_adr = np.array([model.jnt_qposadr[model.joint(n).id] for n in robot.joint_names])
    mimics = _mimics(model, robot)
    qpos = model.qpos0.copy()
    qpos[qpos_adr] = robot.home
    for qa, _da, i, mult, offset in mimics:
        qpos[qa] = offset + mult * robot.home[i]
    ctrl = np.zeros(model.nu)
    servo_act = np.array([model.actuator(n).id for n in robot.joint_names])
    ctrl[servo_act] = robot.home
    spec.add_key(name=HOME_KEY, qpos=qpos.tolist(), ctrl=ctrl.tolist())
    model = spec.compile()
    imu_adr = None
    if robot.imu is not None:
        imu_adr = {s: int(model.sensor_adr[model.sensor(s).id]) for s in IMU_SENSORS}
    base_qpos_adr = base_dof_adr = -1
    feet: tuple[int, ...] = ()
    base_body = -1
    if robot.base is not None:
        base_body = int(model.body(robot.base_frame).id)
        free = model.joint(BASE_JOINT).id
        base_qpos_adr, base_dof_adr = int(model.jnt_qposadr[free]), int(model.jnt_dofadr[free])
        feet = tuple(int(model.body(f).id) for f in robot.base.feet)
    return BuiltModel(
        model=model, qpos_adr=qpos_adr,
        dof_adr=np.array([model.jnt_dofadr[model.joint(n).id] for n in robot.joint_names]),
        servo_act=servo_act,
        ff_act=np.array([model.actuator(f'{n}_ff').id for n in robot.joint_names]),
        home_key=model.key(HOME_KEY).id, imu_adr=imu_adr, robot_bodies=robot_bodies,
        nominal_inertia=model.body_inertia.copy(), nominal_mass=model.body_mass.copy(),
        nominal_friction=model.geom_friction.copy(), mimics=mimics,
        base_qpos_adr=base_qpos_adr, base_dof_adr=base_dof_adr, foot_bodies=feet,
        base_body=base_body)


def _mimics(model: mujoco.MjModel, robot: RobotSpec
            ) -> tuple[tuple[int, int, int, float, float], ...]:
    """Return the joint equalities whose leader is a robot joint (the URDF's ``<mimic>``)."""
    out = []
    for e in range(model.neq):
        if model.eq_type[e] != mujoco.mjtEq.mjEQ_JOINT or model.eq_obj2id[e] < 0:
            continue
        follower, leader = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        name = model.joint(leader).name
        if name not in robot.joint_names:
            continue
        offset, mult = float(model.eq_data[e, 0]), float(model.eq_data[e, 1])
        out.append((int(model.jnt_qposadr[follower]), int(model.jnt_dofadr[follower]),
                    robot.index(name), mult, offset))
    return tuple(out)
