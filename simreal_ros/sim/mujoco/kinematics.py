"""MuJoCo kinematics and colours for tasks built on a :class:`MujocoSim`'s model (no physics).

``BodyPoint(model, body)``: a body's world position at joint positions ``q`` (``position``,
with ``mj_kinematics`` + ``mj_comPos`` on its own ``MjData``) and the 3 x nv translational
Jacobian at the last position (``jacobian``); used by the visuomotor reach task's inverse
kinematics (:mod:`simreal_ros.policy.visual_task`). ``geom_id(model, name)`` finds a geom,
-1 when absent; a geom's colour is ``model.geom_rgba[id]`` (render-only).
"""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


def geom_id(model: mujoco.MjModel, name: str) -> int:
    """Return the id of geom ``name`` (-1 when the model has none)."""
    return int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name))


class BodyPoint:
    """The world position of one body's frame and its Jacobian, from joint positions."""

    def __init__(self, model: mujoco.MjModel, body: str) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.body = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body))
        if self.body < 0:
            raise ValueError(f'{body!r} is not a body of the model')
        self._jac = np.zeros((3, model.nv))

    def position(self, q: F64) -> F64:
        """Return the body's world position with the first ``len(q)`` qpos set to ``q``."""
        m, d = self.model, self.data
        d.qpos[:len(q)] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)  # the Jacobian needs the com-based frames
        out: F64 = np.array(d.xpos[self.body], dtype=np.float64)
        return out

    def jacobian(self) -> F64:
        """Return the translational Jacobian (3, nv) at the last :meth:`position`."""
        mujoco.mj_jacBody(self.model, self.data, self._jac, None, self.body)
        return self._jac
