"""A floating base in PyBullet: the free root link, its ground, state, reset and feet.

The robot is loaded with ``useFixedBase=False``: Bullet's multibody then has a free base
(6 DoF) whose state it reports **at the base's centre of mass** (``getBasePositionAndOrientation``,
``getBaseVelocity``, ``resetBasePositionAndOrientation`` all take the COM frame, the URDF's
``<inertial><origin>``), where MuJoCo's free joint is at the link origin. :class:`FloatingBase`
converts between the two, so that :class:`~simreal_ros.sim.backend.BaseState` is the same
quantity in both engines: ``base_frame``'s origin, linear velocity in the world, angular
velocity in the base frame.

* **ground**: :class:`~simreal_ros.sim.bullet.model.World` adds a plane at z = 0 with
  MuJoCo's friction 1 (unless the scene has a floor), as the MuJoCo model does;
* **reset**: ``base_frame`` at :func:`~simreal_ros.sim.floating_base.home_pose`, at rest;
* **feet**: each foot link's summed contact normal force (``getContactPoints``' normal
  force, the contact impulse of the last step over the step), N;
* **the IMU on the base**: :meth:`FloatingBase.link_state` gives the base in the layout of
  ``getLinkState`` (which refuses link -1), so the IMU of
  :mod:`simreal_ros.sim.bullet.model` reads it like any link;
* **the feet's contact** (:func:`foot_contact`): Bullet's contact is rigid (the normal
  velocity is cancelled within one step), MuJoCo's is soft (``solref`` 0.02 s, damping ratio
  1, ``solimp`` up to 0.95: the contact's reference acceleration is ``-b v - k r``, with the
  damping rate ``b = 2 / (dmax timeconst)`` = 105 1/s). Dropped 2 cm onto its four feet,
  simreal_quad's base lost 1/e of its 0.62 m/s in 12 ms in MuJoCo with a peak of 107 N on
  the feet, in 1 ms with 576 N in rigid Bullet. Each foot link therefore gets Bullet's
  spring-damper contact (``contactStiffness``, ``contactDamping``, N/m and N s/m) with
  MuJoCo's rates at the mass a foot carries in a trot (two feet hold the robot: half its
  mass, ``m``): damping ``c = m b``, stiffness ``k = c**2 / (4 m zeta**2)``
  (:data:`FOOT_CONTACT_DAMPING_RATIO`). What is approximated: MuJoCo's rates apply to each
  contact's own effective mass, Bullet's are per foot in absolute units, so with all four
  feet down (standing) a foot is 2x as damped as MuJoCo's; Bullet's spring has no impedance
  (MuJoCo holds 90-95 % of the load rigidly), so a loaded foot sinks ``m g / (2 k)`` where
  MuJoCo's sinks 0.55-0.62 mm.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pybullet as pb

from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.backend import BaseState, FloatArray
from simreal_ros.sim.floating_base import (
    check_links,
    foot_normal_forces,
    home_pose,
    origin_velocity,
)

#: MuJoCo's default contact (simreal_ros/sim/mujoco/model.py leaves it): solref's time
#: constant (s) and solimp's dmax
MUJOCO_TIMECONST_S = 0.02
MUJOCO_DMAX = 0.95
#: the feet's spring-damper in Bullet: its damping ratio at the trot's stance mass
FOOT_CONTACT_DAMPING_RATIO = 0.7


def foot_contact(robot_mass_kg: float) -> tuple[float, float]:
    """Return each foot's Bullet ``(contactStiffness N/m, contactDamping N s/m)``.

    MuJoCo's damping rate ``b = 2 / (dmax timeconst)`` at the stance mass ``m`` (half the
    robot: two feet carry it in a trot): ``c = m b``; ``k`` gives the damping ratio
    :data:`FOOT_CONTACT_DAMPING_RATIO` at ``m`` (module docstring).
    """
    m = robot_mass_kg / 2.0
    c = m * 2.0 / (MUJOCO_DMAX * MUJOCO_TIMECONST_S)
    return c * c / (4.0 * m * FOOT_CONTACT_DAMPING_RATIO ** 2), c


def _xyzw(wxyz: FloatArray) -> list[float]:
    return [float(wxyz[1]), float(wxyz[2]), float(wxyz[3]), float(wxyz[0])]


class FloatingBase:
    """The free base of ``body`` in ``client`` (see the module docstring)."""

    def __init__(self, robot: RobotSpec, client: int, body: int, links: dict[str, int],
                 parents: dict[str, str], mass_kg: float) -> None:
        assert robot.base is not None
        self.robot, self.client, self.body = robot, client, body
        root = next(n for n, j in links.items() if j == -1)
        check_links(robot, links, root, parents.get(robot.base_frame, 'world'), 'URDF')
        self.feet = [links[f] for f in robot.base.feet]
        self.contact_stiffness, self.contact_damping = foot_contact(mass_kg)
        for foot in self.feet:
            pb.changeDynamics(body, foot, contactStiffness=self.contact_stiffness,
                              contactDamping=self.contact_damping, physicsClientId=client)
        #: a push (N, world frame) at the base's COM, applied before every step; None: none
        self.force: list[float] | None = None
        info = pb.getDynamicsInfo(body, -1, physicsClientId=client)
        # the COM frame in the link frame, and its inverse (link frame in the COM frame)
        self.inertial = (tuple(info[3]), tuple(info[4]))
        self.inertial_inv = pb.invertTransform(*self.inertial)

    def reset(self) -> None:
        """Put ``base_frame`` at its home pose, at rest."""
        self.set_pose(*home_pose(self.robot))
        pb.resetBaseVelocity(self.body, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0],
                             physicsClientId=self.client)

    def set_pose(self, position: FloatArray, orientation_wxyz: FloatArray) -> None:
        """Place ``base_frame``'s origin (world) at ``position``, ``orientation_wxyz``."""
        com, orn = pb.multiplyTransforms(position.tolist(), _xyzw(orientation_wxyz),
                                         *self.inertial)
        pb.resetBasePositionAndOrientation(self.body, com, orn, physicsClientId=self.client)

    def push(self) -> None:
        """Apply ``force`` at the base's COM for the next step (Bullet clears it after each)."""
        if self.force is not None:
            com, _orn = pb.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
            pb.applyExternalForce(self.body, -1, self.force, com, pb.WORLD_FRAME,
                                  physicsClientId=self.client)

    def link_state(self) -> tuple[Any, ...]:
        """Return the base in ``getLinkState``'s layout (world frame).

        COM pose, the inertial offset, the link frame's pose, the COM's linear and angular
        velocity.
        """
        c = self.client
        com, orn = pb.getBasePositionAndOrientation(self.body, physicsClientId=c)
        pos, frame = pb.multiplyTransforms(com, orn, *self.inertial_inv)
        v, w = pb.getBaseVelocity(self.body, physicsClientId=c)
        return (com, orn, self.inertial[0], self.inertial[1], pos, frame, v, w)

    def state(self) -> BaseState:
        """``base_frame``'s origin: pose and velocity (linear world, angular base frame)."""
        com, _orn, _lp, _lo, pos, frame, v, w = self.link_state()
        rot = np.array(pb.getMatrixFromQuaternion(frame)).reshape(3, 3)
        w_world = np.array(w)
        p = np.array(pos)
        vel = origin_velocity(np.array(v), w_world, np.array(com), p)
        quat = np.array([frame[3], frame[0], frame[1], frame[2]])
        return BaseState(p, quat / np.linalg.norm(quat), vel, rot.T @ w_world)

    def foot_forces(self) -> FloatArray:
        """Per foot (robot spec order): the summed normal force of its contacts, N."""
        b = self.body
        pairs = []
        for cp in pb.getContactPoints(physicsClientId=self.client):
            if cp[1] == b:
                pairs.append((int(cp[3]), float(cp[9])))
            elif cp[2] == b:
                pairs.append((int(cp[4]), float(cp[9])))
        return foot_normal_forces(self.feet, pairs)

