"""MuJoCo's camera renderer: offscreen rendering of the robot spec's cameras.

:class:`MujocoCameraRenderer` renders each :class:`~simreal_ros.core.robot.CameraSpec` from a
``qpos`` snapshot with its own ``MjData``: the camera's optical frame (z forward, x right, y
down) is placed in ``world`` or on its parent body, and the OpenGL frustum is set from the
camera's intrinsics (pixel u spans [u - 0.5, u + 0.5]), so the rendered pixels agree with
``camera_info``. Nothing is added to the model: the scene camera of ``mjv_updateScene`` is
overwritten before ``mjr_render``.

Rendering uses ``MUJOCO_GL`` (default ``egl``, falling back to ``osmesa``): both render in
software where no GPU is present.
"""

from __future__ import annotations

import importlib
import os
from typing import Sequence

import mujoco
import numpy as np
import numpy.typing as npt
from transforms3d.euler import euler2mat

from simreal_ros.core.robot import CameraSpec
from simreal_ros.sim.render_thread import Image, to_encoding

FloatArray = npt.NDArray[np.float64]


def _select_gl() -> None:
    """Make MuJoCo's Renderer use EGL (then OSMesa) unless ``MUJOCO_GL`` names a backend.

    MuJoCo picks its GL backend from ``MUJOCO_GL`` when it is first imported, and without it
    uses GLFW, which needs a display. The nodes import mujoco long before they know they will
    render, so the choice is made here instead, where it is needed.
    """
    if os.environ.get('MUJOCO_GL'):
        return
    from mujoco.rendering.classic import gl_context
    for backend in ('egl', 'osmesa'):
        try:
            module = importlib.import_module(f'mujoco.{backend}')
            module.GLContext(1, 1).free()
        except Exception:  # noqa: BLE001, S112 - not available here: try the next one
            continue
        gl_context.GLContext = module.GLContext
        os.environ['MUJOCO_GL'] = backend
        return


class MujocoCameraRenderer:
    """Renders cameras of a robot spec in a MuJoCo model; use it from one thread only."""

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[CameraSpec]) -> None:
        _select_gl()
        self.model = model
        self.cameras = list(cameras)
        self.data = mujoco.MjData(model)
        self.body = [-1 if c.parent == 'world' else
                     mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, c.parent)
                     for c in self.cameras]
        for c, b in zip(self.cameras, self.body, strict=True):
            if c.parent != 'world' and b < 0:
                raise ValueError(f'camera {c.name}: parent link {c.parent!r} is not a body of '
                                 f'the model')
        self.local = [(np.asarray(c.xyz, dtype=np.float64), euler2mat(*c.rpy, axes='sxyz'))
                      for c in self.cameras]
        # one renderer per resolution; the GL context is current in the creating thread
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        for c in self.cameras:
            key = (c.height, c.width)
            if key not in self._renderers:
                self._renderers[key] = self._make_renderer(c.height, c.width)
        self._vcam = mujoco.MjvCamera()
        self._lighting: tuple[float, float, FloatArray] | None = None
        self.near = float(model.vis.map.znear * model.stat.extent)
        self.far = float(model.vis.map.zfar * model.stat.extent)

    def _make_renderer(self, height: int, width: int) -> mujoco.Renderer:
        m = self.model
        # the offscreen buffer must hold the image: grow it in the model (render-only fields)
        m.vis.global_.offwidth = max(m.vis.global_.offwidth, width)
        m.vis.global_.offheight = max(m.vis.global_.offheight, height)
        return mujoco.Renderer(m, height, width)

    def set_lighting(self, diffuse_scale: float, ambient_scale: float,
                     rotation: FloatArray) -> None:
        """Light the scene otherwise than modelled (a visual reality; render-only).

        Every light of the rendered scene (the headlight too) gets its diffuse and specular
        colours times ``diffuse_scale`` and its ambient colour times ``ambient_scale``; every
        light but the headlight has its direction turned by ``rotation`` (3x3, world frame).
        The model is untouched: the lights of ``mjvScene`` are changed after each
        ``update_scene``.
        """
        self._lighting = (diffuse_scale, ambient_scale, np.asarray(rotation, dtype=np.float64))

    def _relight(self, scene: mujoco.MjvScene) -> None:
        if self._lighting is None:
            return
        diffuse, ambient, rot = self._lighting
        for j in range(scene.nlight):
            light = scene.lights[j]
            light.diffuse[:] = np.asarray(light.diffuse) * diffuse
            light.specular[:] = np.asarray(light.specular) * diffuse
            light.ambient[:] = np.asarray(light.ambient) * ambient
            if not light.headlight:
                light.dir[:] = rot @ np.asarray(light.dir, dtype=np.float64)

    def set_camera_pose(self, i: int, xyz: Sequence[float], rpy: Sequence[float]) -> None:
        """Mount camera ``i`` at ``xyz``, ``rpy`` in its parent (render-only).

        E.g. a pose jitter drawn per training episode (:mod:`simreal_ros.policy.visual_task`).
        """
        self.local[i] = (np.asarray(xyz, dtype=np.float64), euler2mat(*rpy, axes='sxyz'))

    def pose(self, i: int) -> tuple[FloatArray, FloatArray]:
        """World position and rotation (columns x right, y down, z forward) of camera ``i``."""
        xyz, rot = self.local[i]
        b = self.body[i]
        if b < 0:
            return xyz, rot
        body_rot = self.data.xmat[b].reshape(3, 3)
        return self.data.xpos[b] + body_rot @ xyz, body_rot @ rot

    def render(self, state: FloatArray, which: Sequence[bool] | None = None
               ) -> list[Image | None]:
        """Render every camera (or those with ``which[i]``) at ``state`` (the model's qpos)."""
        m, d = self.model, self.data
        d.qpos[:] = state
        mujoco.mj_kinematics(m, d)
        # light poses are computed in mj_camlight, not mj_kinematics: without it every light
        # of the scene had direction (0, 0, 0) and lit with its ambient colour only (a plate
        # facing a 0.8 diffuse light rendered 0 instead of 184 of 255)
        mujoco.mj_camlight(m, d)
        out: list[Image | None] = []
        for i, cam in enumerate(self.cameras):
            if which is not None and not which[i]:
                out.append(None)
                continue
            r = self._renderers[(cam.height, cam.width)]
            r.update_scene(d, self._vcam)
            self._relight(r.scene)
            pos, rot = self.pose(i)
            n = self.near
            fx, fy, cx, cy = cam.intrinsics()
            # frustum at the near plane; pixel u spans [u - 0.5, u + 0.5]
            left, right = n * (-0.5 - cx) / fx, n * (cam.width - 0.5 - cx) / fx
            top, bottom = n * (cy + 0.5) / fy, -n * (cam.height - 0.5 - cy) / fy
            for gl in r.scene.camera:
                gl.pos[:] = pos
                gl.forward[:] = rot[:, 2]
                gl.up[:] = -rot[:, 1]
                gl.frustum_near, gl.frustum_far = n, self.far
                gl.frustum_center = 0.5 * (left + right)
                gl.frustum_width = 0.5 * (right - left)
                gl.frustum_top, gl.frustum_bottom = top, bottom
                gl.orthographic = 0
            out.append(to_encoding(r.render(), cam.encoding))
        return out

    def close(self) -> None:
        """Free the GL contexts."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
