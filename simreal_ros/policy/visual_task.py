"""The visuomotor reach task: an object the policy finds only through the camera.

Per episode a ball (``config/scenes/reach_target.yaml``'s ``target``, radius 2 cm, resting on
the floor) is placed at a random position that the arm can reach and the robot's camera sees;
the policy must bring the tool frame (``tool0``) to the **reach point**, ``approach_m`` (4 cm)
above the ball's centre, and hold it there. Nothing but the camera tells the policy where the
ball is: the policy's observation is the joint state and the image (no goal vector).

Geometry (:class:`ReachGeometry`), for ``simreal_arm``:

    object   polar on the floor: distance from the base axis in ``radius_m`` (0.20-0.33 m),
             bearing in ``bearing_rad`` (+-0.9 rad), centre at z = the ball's radius
    goal     the joint vector that puts tool0 on the reach point, by damped least squares
             on base_yaw, shoulder_pitch and elbow_pitch from the home pose (forearm_roll,
             wrist_pitch, wrist_roll stay at home), so the goal is a function of the ball's
             position (a network can infer it from pixels); exact to 1e-4 m
    accepted when the goal is inside the joint limits by 0.25 rad, contact-free with the floor
             and holdable (:class:`~simreal_ros.sim.goals.GoalSampler`), and the ball's
             centre projects at least ``view_margin`` (8 %) of the image inside the nominal
             camera's frame; about 80 % of draws pass
    success  ``|tool0 - reach point| <= tolerance_m`` (3 cm) for ``dwell_s`` (0.2 s) within
             ``timeout_s`` (4 s)

The privileged expert of distillation is the shipped joint-goal policy ``simreal_arm_reach``
fed with this goal vector; the student sees only what the node gives it.

Camera (:class:`TargetCamera`): the robot's camera rendered in MuJoCo (EGL/OSMesa software
rendering) at ``render_size`` (128x96, the 640x480 lens binned 5x) with the arm's joints and the
ball placed, then area-resized to the spec's image size as the node does with a real frame
(:func:`simreal_ros.policy.images.resize_area`). Frames are captured at the camera's rate
(30 Hz, random phase per episode) and delivered ``image_delay`` control periods late (0-2 per
episode, 0-40 ms), so the policy sees a frame up to ~73 ms old as behind a real camera.

Visual randomization per episode (:class:`VisualRandomization`, the keys of the virtual
camera's visual reality, ``docs/camera.md``): light diffuse and ambient scale, light direction
rotation, camera pose offset (translation in the optical frame, rotation vector), exposure gain,
white balance, shot + read noise (:func:`~simreal_ros.core.optics.sensor_noise`,
:func:`~simreal_ros.core.optics.colour_gain`, the virtual camera's own functions), and
floor / ball colour. A nominal episode draws none of them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
import time
from typing import Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.optics import (
    colour_gain,
    offset_pose,
    rotation_matrix,
    sensor_noise,
)
from simreal_ros.core.robot import CameraSpec, RobotSpec
from simreal_ros.policy.codec import ObservationBuilder
from simreal_ros.policy.env import World
from simreal_ros.policy.images import resize_area
from simreal_ros.policy.spec import ImageTerm
from simreal_ros.policy.terms import ObsInputs
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.goals import GoalSampler
from simreal_ros.sim.mujoco.kinematics import BodyPoint, geom_id
from simreal_ros.sim.mujoco.physics import MujocoSim
from simreal_ros.sim.scene import Scene, load_scene

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]

#: the scene holding the ball (``config/scenes/reach_target.yaml``) and the ball's name in it
SCENE = 'reach_target'
OBJECT = 'target'
#: the joints the reach moves (the others stay at home)
IK_JOINTS = (0, 1, 2)


@dataclass(frozen=True)
class ReachGeometry:
    """Where the ball may be and when the reach succeeds (module doc)."""

    radius_m: tuple[float, float] = (0.20, 0.33)
    bearing_rad: tuple[float, float] = (-0.9, 0.9)
    approach_m: float = 0.04
    tolerance_m: float = 0.03
    dwell_s: float = 0.2
    timeout_s: float = 4.0
    view_margin: float = 0.08
    goal_margin_rad: float = 0.25


def camera_pixel(cam: CameraSpec, point: F64) -> tuple[float, float, float]:
    """Return (u, v, depth) of world ``point`` in ``cam`` (a camera fixed in the world)."""
    from transforms3d.euler import euler2mat
    rot = euler2mat(*cam.rpy, axes='sxyz')
    x, y, z = rot.T @ (np.asarray(point, dtype=np.float64) - np.asarray(cam.xyz))
    fx, fy, cx, cy = cam.intrinsics()
    return fx * x / z + cx, fy * y / z + cy, float(z)


class ReachTask:
    """Draws ball positions and their goal joint vectors for ``robot`` (module doc)."""

    def __init__(self, robot: RobotSpec, geometry: ReachGeometry | None = None,
                 camera: str = '') -> None:
        self.robot = robot
        self.geo = geometry or ReachGeometry()
        scene = load_scene(SCENE)
        ball = next(o for o in scene.objects if o.name == OBJECT)
        self.object_radius_m = float(ball.size[0])
        floor_only = Scene(scene.source, floor=True, light=False, objects=())
        sim = make_sim(robot, scene=floor_only)
        if not isinstance(sim, MujocoSim):  # the kinematics below are MuJoCo's
            raise ValueError(f'the visual reach task needs MuJoCo, not {sim.engine}')
        self.sim = sim
        self.goals = GoalSampler(robot, margin_rad=self.geo.goal_margin_rad, sim=sim)
        self.tool = BodyPoint(sim.model, robot.tool_frame)
        cams = [c for c in robot.cameras if c.name == camera or not camera]
        if not cams or cams[0].parent != 'world':
            raise ValueError(f'{robot.name}: the task needs a camera fixed in the world')
        self.camera = cams[0]

    def tool_position(self, q: F64) -> F64:
        """Return tool0's world position at joint positions ``q`` (robot order)."""
        return self.tool.position(q)

    def inverse(self, point: F64, iterations: int = 60) -> tuple[F64, float]:
        """Return (q, residual m) putting tool0 on ``point`` from home (module doc)."""
        q = self.robot.home.copy()
        cols = list(IK_JOINTS)
        err = float('inf')
        for _ in range(iterations):
            e = point - self.tool_position(q)
            err = float(np.linalg.norm(e))
            if err < 1e-6:
                break
            jac = self.tool.jacobian()[:, cols]
            q[cols] += jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(3), e)
        return q, err

    def reach_point(self, obj: F64) -> F64:
        """Return the point tool0 must reach for a ball at ``obj``."""
        out: F64 = np.asarray(obj, dtype=np.float64) + np.array([0.0, 0.0, self.geo.approach_m])
        return out

    def in_view(self, obj: F64) -> bool:
        """Whether the ball's centre projects inside the frame by the view margin."""
        cam = self.camera
        u, v, z = camera_pixel(cam, obj)
        mu, mv = self.geo.view_margin * cam.width, self.geo.view_margin * cam.height
        return z > 0 and mu <= u <= cam.width - 1 - mu and mv <= v <= cam.height - 1 - mv

    def sample(self, rng: np.random.Generator, max_tries: int = 1000) -> tuple[F64, F64]:
        """Return (ball centre in the world, goal joints in robot order)."""
        g = self.geo
        for _ in range(max_tries):
            r = rng.uniform(*g.radius_m)
            b = rng.uniform(*g.bearing_rad)
            obj = np.array([r * math.cos(b), r * math.sin(b), self.object_radius_m])
            if not self.in_view(obj):
                continue
            q, err = self.inverse(self.reach_point(obj))
            if err < 1e-4 and self.goals.reachable(q):
                return obj, q
        raise RuntimeError('no reachable ball position in view: check the task geometry')

    def error_m(self, q: F64, obj: F64) -> float:
        """Distance of tool0 at ``q`` from the reach point of a ball at ``obj`` (m)."""
        return float(np.linalg.norm(self.tool_position(q) - self.reach_point(obj)))


@dataclass(frozen=True)
class VisualRandomization:
    """Ranges of the per-episode visual draw (uniform; +-x means [-x, x])."""

    diffuse_scale: tuple[float, float] = (0.6, 1.4)
    ambient_scale: tuple[float, float] = (0.5, 1.5)
    light_rotation_rad: float = 0.4          # rotation vector, each axis +-
    camera_translation_m: float = 0.015      # optical frame, each axis +-
    camera_rotation_rad: float = 0.03        # rotation vector, each axis +-
    gain: tuple[float, float] = (0.7, 1.4)
    white_balance: float = 0.12              # each channel x [1 - wb, 1 + wb]
    full_well_e: tuple[float, float] = (1500.0, 20000.0)
    read_noise: tuple[float, float] = (0.0, 4.0)
    floor_rgb: float = 0.15                  # each channel +-
    object_rgb: float = 0.1                  # each channel +-
    image_delay_periods: tuple[int, int] = (0, 2)


@dataclass(frozen=True)
class VisualDraw:
    """One episode's look (``None`` fields: as modelled)."""

    diffuse_scale: float = 1.0
    ambient_scale: float = 1.0
    light_rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_translation_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_rotation_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gain: float = 1.0
    white_balance: tuple[float, float, float] = (1.0, 1.0, 1.0)
    full_well_e: float = 0.0
    read_noise: float = 0.0
    floor_rgb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    object_rgb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    image_delay_periods: int = 0

    @staticmethod
    def draw(r: VisualRandomization, rng: np.random.Generator) -> 'VisualDraw':
        """Draw one episode's look from ``r``."""
        def vec(x: float) -> tuple[float, float, float]:
            a, b, c = (float(v) for v in rng.uniform(-x, x, 3))
            return a, b, c
        wb = vec(r.white_balance)
        return VisualDraw(
            float(rng.uniform(*r.diffuse_scale)), float(rng.uniform(*r.ambient_scale)),
            vec(r.light_rotation_rad), vec(r.camera_translation_m),
            vec(r.camera_rotation_rad), float(rng.uniform(*r.gain)),
            (1.0 + wb[0], 1.0 + wb[1], 1.0 + wb[2]),
            float(rng.uniform(*r.full_well_e)), float(rng.uniform(*r.read_noise)),
            vec(r.floor_rgb), vec(r.object_rgb),
            int(rng.integers(r.image_delay_periods[0], r.image_delay_periods[1] + 1)))


class TargetCamera:
    """Renders the robot's camera with the arm and the ball placed (module doc).

    One renderer (one GL context) serves many worlds: each render sets that world's look.
    """

    def __init__(self, robot: RobotSpec, render_size: tuple[int, int] = (128, 96),
                 camera: str = '') -> None:
        cams = [c for c in robot.cameras if c.name == camera or not camera]
        self.nominal = cams[0]
        self.cam = cams[0].scaled(*render_size)
        sim = make_sim(robot, scene=load_scene(SCENE))
        if not isinstance(sim, MujocoSim):  # the looks need MuJoCo's renderer
            raise ValueError(f'the visual reach task renders with MuJoCo, not {sim.engine}')
        self.sim = sim
        self.renderer = sim.camera_renderer([self.cam])
        self.base = np.array(sim.render_state(), dtype=np.float64)
        self.obj_index = sim.object_position_index(OBJECT)
        m = sim.model
        self.model = m
        self.floor_geom = geom_id(m, 'floor')
        self.ball_geom = geom_id(m, OBJECT)
        self.floor_rgba = m.geom_rgba[self.floor_geom].copy()
        self.ball_rgba = m.geom_rgba[self.ball_geom].copy()
        self.n_joints = len(robot.joint_names)
        #: applied to every rendered frame when set (the perception-gap curves' harm)
        self.harm: Callable[[U8], U8] | None = None
        #: time spent rendering (s) and frames rendered, for the training record
        self.render_s = 0.0
        self.renders = 0

    def render(self, q: F64, obj: F64, look: VisualDraw, rng: np.random.Generator) -> U8:
        """Return the rgb8 frame at ``render_size`` of the arm at ``q`` and the ball at ``obj``."""
        t0 = time.perf_counter()
        img = self._render(q, obj, look, rng)
        self.render_s += time.perf_counter() - t0
        self.renders += 1
        return img if self.harm is None else self.harm(img)

    def _render(self, q: F64, obj: F64, look: VisualDraw, rng: np.random.Generator) -> U8:
        m, r = self.model, self.renderer
        xyz, rpy = offset_pose(self.cam.xyz, self.cam.rpy, look.camera_translation_m,
                               look.camera_rotation_rad)
        r.set_camera_pose(0, xyz, rpy)
        r.set_lighting(look.diffuse_scale, look.ambient_scale,
                       rotation_matrix(look.light_rotation))
        m.geom_rgba[self.floor_geom, :3] = np.clip(self.floor_rgba[:3] + look.floor_rgb, 0, 1)
        m.geom_rgba[self.ball_geom, :3] = np.clip(self.ball_rgba[:3] + look.object_rgb, 0, 1)
        state = self.base.copy()
        state[:self.n_joints] = q
        state[self.obj_index:self.obj_index + 3] = obj
        img = r.render(state)[0]
        assert img is not None
        if look.gain == 1.0 and look.white_balance == (1.0, 1.0, 1.0) \
                and look.full_well_e <= 0 and look.read_noise <= 0:
            return img
        x = img.astype(np.float32)
        sensor_noise(x, look.full_well_e, look.read_noise, rng)
        colour_gain(x, look.gain, look.white_balance)
        out: U8 = np.clip(x + 0.5, 0, 255).astype(np.uint8)
        return out

    def close(self) -> None:
        """Free the GL context."""
        self.renderer.close()


class VisualReachWorld:
    """A :class:`World` (physics, randomization, latency routes) with a ball and a camera.

    Each :meth:`reset` draws the world's dynamics and latency preset (the World's own), a
    ball position and its goal, and the episode's look (nominal when ``visual`` is None).
    :meth:`observe` returns the student's vector, its image (uint8 (H, W, 3) at the spec's
    size) and the expert's vector from the same noisy joint state; None while the node would
    hold on stale joint states.
    """

    def __init__(self, world: World, task: ReachTask, camera: TargetCamera, term: ImageTerm,
                 expert_obs: ObservationBuilder, visual: VisualRandomization | None,
                 seed: int) -> None:
        self.world, self.task, self.camera, self.term = world, task, camera, term
        self.expert_obs = expert_obs
        self.visual = visual
        self.rng = np.random.default_rng(seed)
        self.tick = 0
        #: frames reach the policy this many more control periods late (perception-gap curves)
        self.extra_delay_periods = 0
        self.reset()

    def reset(self) -> None:
        """Draw new dynamics, preset, ball, goal and look; the arm at rest at default."""
        w = self.world
        w.reset()
        self.new_ball()
        self.look = (VisualDraw.draw(self.visual, self.rng) if self.visual is not None
                     else VisualDraw())
        self.expert_obs.reset()
        fps = self.camera.nominal.fps_hz
        self.frame_period_s = 1.0 / fps
        self.next_capture_s = float(self.rng.uniform(0.0, self.frame_period_s))
        self.frames: deque[tuple[int, U8]] = deque()
        self.tick = 0
        self.ball_tick = 0
        self._capture()

    def new_ball(self) -> None:
        """Move the ball to a new random position (seen from the next captured frame on)."""
        self.obj, goal = self.task.sample(self.rng)
        self.world.new_goal(goal)
        self.ball_tick = self.tick

    def _capture(self) -> None:
        """Render a frame when the camera captures one in this control period."""
        t = self.tick * self.world.tick_s
        if self.tick > 0 and t < self.next_capture_s:
            return
        while self.next_capture_s <= t:
            self.next_capture_s += self.frame_period_s
        raw = self.camera.render(self.world.sim.joint_positions(), self.obj, self.look,
                                 self.rng)
        self.frames.append((self.tick, resize_area(raw, self.term.height, self.term.width)))
        while len(self.frames) > 32:   # > 0.5 s of frames at 30 Hz
            self.frames.popleft()

    def _visible(self) -> tuple[int, U8]:
        due = self.tick - self.look.image_delay_periods - self.extra_delay_periods
        best = self.frames[0]
        for k, f in self.frames:
            if k <= due:
                best = (k, f)
        return best

    def image(self) -> U8:
        """Return the newest frame delivered by now (captured at least the delay ago)."""
        return self._visible()[1]

    @property
    def shows_ball(self) -> bool:
        """Whether the frame the policy sees was captured after the ball last moved.

        Training labels no step before that: the expert's label is for a ball the image
        does not show yet.
        """
        return self._visible()[0] >= self.ball_tick

    def observe(self) -> tuple[F64, U8, F64] | None:
        """Return (student vector, image, expert vector), or None while stale."""
        w = self.world
        if w.stale:
            return None
        m = w.measured
        q, v = m.position.copy(), m.velocity.copy()
        if w.randomize:
            q += w.rng.normal(0.0, w.cfg.noise_pos_rad, q.shape)
            v += w.rng.normal(0.0, w.cfg.noise_vel_rad_s, v.shape)
        idx = w.idx
        inputs = ObsInputs(position=q[idx], velocity=v[idx], default=w.spec.default,
                           last_action=w.last_action, goal=w.goal[idx], time_s=w.t,
                           imu_gyro=m.imu_gyro, imu_quat_wxyz=m.imu_quat_wxyz)
        return w.obs.build(inputs), self.image(), self.expert_obs.build(inputs)

    def apply(self, action: F64) -> None:
        """Run one control period with ``action`` (held by the world when stale)."""
        self.world.apply(action)
        self.tick += 1
        self._capture()

    def error_m(self) -> float:
        """tool0's distance from the reach point now (m)."""
        return self.task.error_m(self.world.sim.joint_positions(), self.obj)
