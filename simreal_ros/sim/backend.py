"""The physics engine protocol: what the stack needs from an engine, and the engine-neutral part.

Every user of the simulation (the sim bridge, the virtual servo bus's reality, training, goal
sampling, the sysid replay) holds a :class:`SimBackend` made by
:func:`simreal_ros.sim.engines.make_sim`, and nothing else of the engine. The engine-neutral
part lives here, once for every engine:

* **time**: an integer number of physics steps of ``dt_ns``, monotonic across resets;
* **the actuator law's command side**: :meth:`SimBackend.set_target` queues a
  :class:`JointTarget` on the **command delay line** (``command_delay_s`` of the dynamics,
  rounded to whole steps) and :meth:`SimBackend.step` releases it at its step; a released
  target becomes the servo set-point ``q_target`` and the feed-forward torque
  ``kd * v_target + tau_ff`` (handed to the engine's :meth:`SimBackend.actuate`);
* **dynamics**: nominal (read from the model) -> base (+ overlay) -> drawn per reset from the
  randomization with the backend's seeded generator;
* **the learned residual** an overlay names (``residual: RES.pt``,
  :mod:`simreal_ros.core.residual_model`): with one, :meth:`SimBackend.step` runs one physics
  step at a time and before each evaluates the residual on the joint state and the released target,
  then adds its torque through the engine's applied-force primitive
  (:meth:`SimBackend.apply_torque`; ``kind: torque``) or offsets the servo set-point by it
  (``kind: delta_action``), the same on every engine. ``residual.stats`` counts the calls,
  the out-of-distribution ones and the compute time.

An engine subclasses :class:`SimBackend` and implements its abstract methods, the engine
primitives. Its servo law, per joint, is ``kp * (q_target - q) - kd * qdot + ff``, the sum
clamped to the joint's effort limit (a current-limited servo saturating), integrated by the
engine (MuJoCo: implicitly). ``engine`` names the engine and ``capabilities`` says which of
the optional model features it honours, so a caller can refuse what an engine cannot model
(an overlay's armature on an engine without reflected rotor inertia) instead of silently
simulating something else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import DynamicsParams, Overlay, Randomization
from simreal_ros.core.residual_model import ResidualModel
from simreal_ros.core.robot import CameraSpec, RobotSpec

if TYPE_CHECKING:
    from simreal_ros.sim.render_thread import CameraRenderer

FloatArray = npt.NDArray[np.float64]


def rotate(quat_wxyz: FloatArray, v: FloatArray, inverse: bool = False) -> FloatArray:
    """Rotate ``v`` by the unit quaternion ``quat_wxyz`` (by its inverse with ``inverse``)."""
    w = float(quat_wxyz[0])
    u = np.asarray(quat_wxyz[1:4], dtype=np.float64)
    if inverse:
        u = -u
    t = 2.0 * np.cross(u, v)
    out: FloatArray = v + w * t + np.cross(u, t)
    return out


@dataclass(frozen=True)
class BaseState:
    """The ground-truth state of a floating base (its ``base_frame``'s origin).

    ``position`` (m) and ``orientation_wxyz`` are in the world frame (z up, the ground at
    z = 0); ``linear_velocity`` (m/s) is in the world frame, ``angular_velocity`` (rad/s) in
    the base frame.
    """

    position: FloatArray
    orientation_wxyz: FloatArray
    linear_velocity: FloatArray
    angular_velocity: FloatArray

    def linear_velocity_in_base(self) -> FloatArray:
        """Return the linear velocity in the base frame (nav_msgs/Odometry's twist frame)."""
        return rotate(self.orientation_wxyz, self.linear_velocity, inverse=True)


@dataclass(frozen=True)
class Observation:
    """Joint state (robot order) and IMU reading at ``stamp_ns`` of sim time.

    A floating-base robot also has ``base`` (ground truth) and ``foot_force``: per foot of the
    robot spec, in its order, the summed normal force of the foot's contacts (N, >= 0; 0 = in
    the air).
    """

    stamp_ns: int
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    imu_quat_wxyz: FloatArray | None = None
    imu_gyro: FloatArray | None = None
    imu_acc: FloatArray | None = None
    base: BaseState | None = None
    foot_force: FloatArray | None = None


@dataclass(frozen=True)
class Capabilities:
    """Which optional model features an engine honours (False: it ignores or lacks them)."""

    armature: bool          # reflected rotor inertia per joint (overlay ``armature``)
    imu: bool               # an IMU site: orientation, gyro, accelerometer
    scene_objects: bool     # scene primitives, free bodies included
    native_rollout: bool    # :meth:`SimBackend.rollout` runs batched in native threads
    divergence_reset: bool  # a NaN/diverged state is reset and counted (``divergences``)
    cameras: bool = False   # :meth:`SimBackend.camera_renderer` renders the spec's cameras


@dataclass(frozen=True)
class Probe:
    """A static query at one pose: contacts there and the gravity torque to hold it."""

    contacts: int
    gravity: FloatArray     # N·m per joint, robot order


@dataclass(frozen=True)
class RolloutJob:
    """One open-loop replay: a start state and one control row per physics step.

    ``targets`` is (steps, 3 n): servo position target | velocity feed-forward | effort
    feed-forward, robot order; the feed-forward torque is ``kd * velocity + effort`` with the
    ``kd`` of parameter set ``params``.
    """

    params: int
    position: FloatArray
    velocity: FloatArray
    targets: FloatArray


#: ``feedback(step, joint angles (jobs, n)) -> extra feed-forward torque (jobs, n)``
RolloutFeedback = Callable[[int, FloatArray], FloatArray]


class SimBackend(ABC):
    """A robot in a physics engine, driven by joint targets through per-joint servos.

    Subclasses build their model, then call ``super().__init__``. Runs are deterministic:
    same seed, same commands at the same steps -> same states.
    """

    engine: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def __init__(self, robot: RobotSpec, dt_ns: int, overlay: Overlay | None = None,
                 randomization: Randomization | None = None, seed: int = 0) -> None:
        self.robot = robot
        self.dt_ns = dt_ns
        self.nominal = self.nominal_params()
        self.base = overlay.apply(self.nominal, robot.name) if overlay else self.nominal
        self.randomization = randomization
        if randomization is not None:
            randomization.check_targets(robot.joint_names, list(self.nominal.body_mass))
            randomization.check_pushes(robot.name, robot.floating)
        self.rng = np.random.default_rng(seed)
        self.params = self.base
        self.step_count = 0
        self._pending: deque[tuple[int, JointTarget]] = deque()
        self.target = JointTarget.hold(robot.home)
        self._ff = np.zeros(robot.n)
        self.residual: ResidualModel | None = None
        if overlay is not None and overlay.residual is not None:
            r = overlay.residual
            r.check(robot.name, overlay.physics_sha256)
            # a copy per backend: its stats are this backend's alone
            self.residual = ResidualModel(r.source, r.header, r.layers)
        self.reset(randomize=False)

    # ---- engine-neutral ------------------------------------------------------------------
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
        self.write_params(self.params)
        self.reset_state()
        if self.residual is not None:
            self.residual.reset_history()  # a history feature starts over with the state
        self._pending.clear()
        self.target = JointTarget.hold(self.robot.home)
        self._apply(self.target)
        return self.params

    def set_target(self, target: JointTarget) -> None:
        """Queue ``target``; it reaches the servos after the command delay."""
        delay = self.delay_steps
        if delay == 0:
            self._apply(target)
        else:
            self._pending.append((self.step_count + delay, target))

    def _apply(self, target: JointTarget) -> None:
        """Make ``target`` the servos' set-point, feed-forward ``kd * v_target + tau_ff``."""
        self.target = target
        kd = np.fromiter((self.params.joints[n].kd for n in self.robot.joint_names), float,
                         self.robot.n)
        self._ff = kd * target.velocity + target.effort
        self.actuate(target.position, self._ff)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps, releasing delayed commands at their step."""
        pending = self._pending
        if self.residual is not None:
            for _ in range(n):
                while pending and pending[0][0] <= self.step_count:
                    self._apply(pending.popleft()[1])
                self._residual_step()
                self.step_count += 1
            while pending and pending[0][0] <= self.step_count:
                self._apply(pending.popleft()[1])
            return
        while n > 0:
            while pending and pending[0][0] <= self.step_count:
                self._apply(pending.popleft()[1])
            k = n if not pending else min(n, pending[0][0] - self.step_count)
            self.advance(k)
            self.step_count += k
            n -= k
        while pending and pending[0][0] <= self.step_count:
            self._apply(pending.popleft()[1])

    def _residual_step(self) -> None:
        """One physics step with the residual's output applied (see the module docstring)."""
        r = self.residual
        assert r is not None
        q, qd, _ = self.joint_state()
        t = self.target
        y = r(r.features(q, qd, t.position, t.velocity))
        if r.kind == 'torque':
            self.apply_torque(y)
        else:
            self.actuate(t.position + y, self._ff)
        self.advance(1)

    def approximations(self) -> tuple[str, ...]:
        """Return what the engine approximates of the current dynamics, one line each."""
        return ()

    def push_base(self, force_world_n: Sequence[float] | FloatArray) -> None:
        """Push a floating base: ``force_world_n`` (N, world frame) at its centre of mass.

        From the next physics step until changed (zeros: no push); a reset clears it. A
        fixed-base robot or a force that is not 3 finite numbers is a ValueError.
        """
        f = np.asarray(force_world_n, dtype=np.float64)
        if not self.robot.floating:
            raise ValueError(f'{self.robot.name} has a fixed base: nothing to push')
        if f.shape != (3,) or not np.all(np.isfinite(f)):
            raise ValueError(f'a push is 3 finite numbers (N, world frame), got {f.tolist()}')
        self.apply_base_force(f)

    def apply_base_force(self, force_world_n: FloatArray) -> None:
        """Engine primitive of :meth:`push_base` (checked there)."""
        raise NotImplementedError(f'the {self.engine} engine cannot push a floating base')

    # ---- engine primitives -----------------------------------------------------------------
    @abstractmethod
    def nominal_params(self) -> DynamicsParams:
        """Read the nominal dynamics from the model (URDF) and the robot spec (gains)."""

    @abstractmethod
    def write_params(self, params: DynamicsParams) -> None:
        """Write joint damping/friction/armature, servo gains, masses, contact friction."""

    @abstractmethod
    def reset_state(self) -> None:
        """Put the state at the home keyframe at rest, servos holding home, no feed-forward."""

    @abstractmethod
    def actuate(self, position: FloatArray, feedforward: FloatArray) -> None:
        """Set the servo set-points (rad) and feed-forward torques (N·m), effective now."""

    @abstractmethod
    def apply_torque(self, torque: FloatArray) -> None:
        """Apply ``torque`` (N·m per joint) outside the servo and its clamp until changed.

        The engine's applied-force primitive (MuJoCo ``qfrc_applied``); a reset clears it.
        """

    @abstractmethod
    def set_servo(self, joint: int, kp: float, kd: float, effort_limit: float) -> None:
        """Change one servo's gains and effort limit now (a servo's registers being written)."""

    @abstractmethod
    def set_joint_state(self, position: FloatArray, velocity: FloatArray) -> None:
        """Snap the joints to a measured state (twin re-sync); targets and delays are kept."""

    @abstractmethod
    def advance(self, n: int) -> None:
        """Integrate ``n`` physics steps with the actuation as it is (no delay line, no time)."""

    @abstractmethod
    def observe(self) -> Observation:
        """Measure the current state, sensors consistent with it, stamped ``time_ns``."""

    @abstractmethod
    def joint_positions(self) -> FloatArray:
        """Return a copy of the joint angles now (cheap: no sensor update)."""

    @abstractmethod
    def joint_state(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return copies of (angles, velocities, actuator torques as the last step applied)."""

    @abstractmethod
    def divergences(self) -> int:
        """Return how often the engine reset a NaN or diverged state since the last reset."""

    @abstractmethod
    def probe(self, position: FloatArray) -> Probe:
        """Contacts and gravity torque at ``position`` at rest, leaving the state untouched."""

    @abstractmethod
    def moving_bodies(self) -> list[str]:
        """Bodies with mass that are not welded to the world (their mass can be identified)."""

    @abstractmethod
    def rollout(self, params: Sequence[DynamicsParams], jobs: Sequence[RolloutJob],
                nthread: int = 1, feedback: RolloutFeedback | None = None) -> FloatArray:
        """Replay ``jobs`` open loop; return joint angles after each step, (jobs, steps, n).

        The backend's own state is untouched; all jobs have the same number of steps.
        ``feedback(k, q)``, if given, is called before step ``k`` with the joint angles of
        every job (jobs, n) and returns a torque (jobs, n) added to that step's feed-forward
        (a servo that closes its loop on something else than the link, e.g. the backlash of
        :mod:`simreal_ros.hardware.emulator.backlash`); an engine that cannot step its jobs
        together raises NotImplementedError.
        """

    @abstractmethod
    def raw_step_rate(self, steps: int = 5000) -> float:
        """Measure the engine's bare steps/s on a copy of the state (benchmarks)."""

    # -- cameras (optional: ``capabilities.cameras``) -----------------------------------------

    def render_state(self) -> FloatArray:
        """Return what a camera renderer needs of the current state.

        A view, valid until the next step: the render thread copies it when a frame is due.
        """
        raise NotImplementedError(f'the {self.engine} engine does not render cameras')

    def object_position_index(self, name: str) -> int:
        """Index in :meth:`render_state` of free scene object ``name``'s x (then y, z).

        Writing a snapshot there places the object for a render (the physics is untouched);
        ValueError when the scene has no free object of that name.
        """
        raise NotImplementedError(f'the {self.engine} engine does not render cameras')

    def place_object(self, name: str, xyz: Sequence[float]) -> None:
        """Put free scene object ``name`` at ``xyz`` (world, m), upright and at rest.

        ValueError when the scene has no free object of that name (:mod:`simreal_ros.sim.
        placement` checks the request first).
        """
        raise NotImplementedError(f'the {self.engine} engine does not place scene objects')

    def camera_renderer(self, cameras: Sequence[CameraSpec]) -> CameraRenderer:
        """Return a renderer of ``cameras`` for :meth:`render_state` snapshots.

        It has its own engine data; call this on the thread that will render (GL contexts are
        per thread).
        """
        raise NotImplementedError(f'the {self.engine} engine does not render cameras')
