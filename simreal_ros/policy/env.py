"""The one environment: a simulated robot wired to a policy like the running graph.

``commands in, observations out``: :class:`World` is the sim bridge's physics (a
:class:`simreal_ros.sim.backend.SimBackend` from :func:`simreal_ros.sim.engines.make_sim`, with
its command delay line) with domain randomization drawn per episode, wired to the policy like
the running graph with the latency injector in between: one latency preset
(``config/latency/*.yaml``) drawn per episode, every command and every ``joint_states`` message
(published at the bridge's rate) sent through that preset's ``command`` / ``observation`` route
with the injector's own model (:mod:`simreal_ros.policy.train_delays`), so commands arrive late, in
FIFO order, or not at all, and the policy acts on the newest observation that has arrived. When
that observation is older than the spec's stale threshold the world does what the node does:
it re-sends the last command and the step is not used for training. Observations and actions
go through the policy spec's own :class:`ObservationBuilder` and :class:`ActionProcessor`, so
what the network sees here is what it sees on the robot.

Training (:mod:`simreal_ros.policy.train`) runs many worlds; ``simreal eval`` draws its goals
from the same :class:`simreal_ros.sim.goals.GoalSampler` the worlds use.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Protocol

import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import load_overlay, load_randomization
from simreal_ros.core.robot import RobotSpec
from simreal_ros.latency.injection import JOINT_STATE_FIELDS, RouteConfig
from simreal_ros.policy.codec import ActionProcessor, ObservationBuilder
from simreal_ros.policy.spec import PolicySpec
from simreal_ros.policy.terms import ObsInputs
from simreal_ros.policy.train_delays import (
    COMMAND,
    OBSERVATION,
    LatencyPreset,
    RouteQueue,
    draw_preset,
)
from simreal_ros.sim.backend import Observation
from simreal_ros.sim.engines import DEFAULT_ENGINE, make_sim
from simreal_ros.sim.goals import GoalSampler

FloatArray = npt.NDArray[np.float64]


class EnvSettings(Protocol):
    """The settings a :class:`World` reads (a ``TrainConfig`` has them all)."""

    @property
    def randomization(self) -> str: ...  # noqa: D102
    @property
    def overlay(self) -> str: ...  # noqa: D102
    @property
    def latency_presets(self) -> tuple[LatencyPreset, ...]: ...  # noqa: D102
    @property
    def state_rate_hz(self) -> float: ...  # noqa: D102
    @property
    def noise_pos_rad(self) -> float: ...  # noqa: D102
    @property
    def noise_vel_rad_s(self) -> float: ...  # noqa: D102
    @property
    def goal_interval_s(self) -> tuple[float, float]: ...  # noqa: D102
    @property
    def goal_margin_rad(self) -> float: ...  # noqa: D102


class World:
    """One randomized world driven through the policy spec's interface.

    The graph it mirrors: sim bridge (a backend, joint_states every ``state_rate_hz``) <->
    latency injector (one preset per episode) <-> policy node (a tick every control period).
    ``preset`` forces one preset (a name or path) instead of drawing one per episode.
    Without ``randomize`` the world is nominal: no randomization, no delays, no noise.
    """

    def __init__(self, spec: PolicySpec, robot: RobotSpec, cfg: EnvSettings, seed: int,
                 randomize: bool = True, preset: str | None = None,
                 engine: str = DEFAULT_ENGINE) -> None:
        rand = load_randomization(cfg.randomization) if cfg.randomization and randomize \
            else None
        self.spec, self.robot, self.cfg = spec, robot, cfg
        self.randomize = randomize
        self.forced = LatencyPreset(preset) if preset is not None else None
        # the overlay (an identified sim, with its learned residual if it names one) is the
        # base of every world, the nominal check worlds too; randomization draws around it
        overlay = load_overlay(cfg.overlay) if cfg.overlay else None
        self.sim = make_sim(robot, overlay=overlay, randomization=rand, seed=seed,
                            engine=engine)
        self.rng = np.random.default_rng(seed + 7919)
        self.teacher = GoalSampler(robot, sim=self.sim)
        self.goals = GoalSampler(robot, margin_rad=cfg.goal_margin_rad, sim=self.sim)
        self.obs = ObservationBuilder(spec)
        self.act = ActionProcessor(spec)
        self.idx = spec.joint_index
        self.full_default = robot.home.copy()
        self.full_default[self.idx] = spec.default
        self.steps_per_tick = max(1, int(round(1.0 / (spec.control_rate_hz
                                                      * robot.timestep_s))))
        self.steps_per_state = max(1, int(round(1.0 / (cfg.state_rate_hz * robot.timestep_s))))
        self.tick_s = self.steps_per_tick * robot.timestep_s
        self.ticks = 0
        self.holds = 0
        self.reset()

    def reset(self) -> None:
        """Draw new dynamics, a latency preset and a first goal; the arm at rest at default.

        The randomization's ``command_delay_s`` stays: it is the bridge's own command delay
        line (actuation latency), after the injector's command route.
        """
        cfg, sim = self.cfg, self.sim
        params = sim.reset(randomize=self.randomize)
        if self.randomize:
            self.preset: LatencyPreset | None = self.forced or draw_preset(
                cfg.latency_presets, self.rng)
            route_seed = int(self.rng.integers(0, 2**63 - 1))
            self.state_phase = int(self.rng.integers(0, self.steps_per_state))
        else:
            sim.params = params = replace(params, command_delay_s=0.0)
            self.preset, route_seed, self.state_phase = None, 0, 0
        cmd_route = self.preset.route(COMMAND) if self.preset else RouteConfig(COMMAND)
        obs_route = self.preset.route(OBSERVATION) if self.preset else RouteConfig(OBSERVATION)
        self.commands: RouteQueue[FloatArray] = RouteQueue(cmd_route, route_seed)
        self.states: RouteQueue[Observation] = RouteQueue(obs_route, route_seed,
                                                          _perturber(obs_route))
        self.kp = np.array([params.joints[n].kp for n in self.robot.joint_names])
        self.last_target = self.full_default.copy()
        sim.set_target(JointTarget.hold(self.last_target))
        self.t = 0.0
        self.obs.reset()
        self.act.reset(self.spec.default)
        self.last_action = self.act.neutral_action()
        self.new_goal()
        self.measured = sim.observe()
        self.stale = False

    @property
    def preset_name(self) -> str:
        """The latency preset of this episode ('' for a nominal world)."""
        return self.preset.preset if self.preset else ''

    def new_goal(self, goal: FloatArray | None = None) -> None:
        """Switch to ``goal`` (robot order) or a random reachable one."""
        g = self.goals.sample(self.rng)[0] if goal is None else np.asarray(goal, float)
        self.goal = g
        self.goal_started = self.t
        self.next_switch = self.t + float(self.rng.uniform(*self.cfg.goal_interval_s))
        hold = self.teacher.holding_command(g, self.kp)[self.idx]
        a = self.spec.action
        base = self.spec.default if a.mode == 'offset' else 0.0
        label = (hold - base) / a.scale
        self.teacher_action = label if a.clip is None else np.clip(label, -a.clip, a.clip)

    def observation(self, noisy: bool = True) -> FloatArray:
        """Return the policy's observation of the newest joint_states that has arrived.

        While :attr:`stale` the node builds no observation (it holds); zeros are returned, and
        :meth:`apply` ignores the action.
        """
        if self.stale:
            return np.zeros(self.spec.obs_dim)
        m = self.measured
        q, v = m.position.copy(), m.velocity.copy()
        if noisy and self.randomize:
            q += self.rng.normal(0.0, self.cfg.noise_pos_rad, q.shape)
            v += self.rng.normal(0.0, self.cfg.noise_vel_rad_s, v.shape)
        return self.obs.build(ObsInputs(
            position=q[self.idx], velocity=v[self.idx], default=self.spec.default,
            last_action=self.last_action, goal=self.goal[self.idx], time_s=self.t,
            imu_gyro=m.imu_gyro, imu_quat_wxyz=m.imu_quat_wxyz))

    def apply(self, raw_action: FloatArray) -> None:
        """Publish one command (or re-send the last one if stale) and run one control period.

        The command goes through the episode's command route; joint_states are published at
        the bridge's rate through the observation route; at the end of the period the newest
        arrived one becomes :attr:`measured` and :attr:`stale` is updated like the node's check.
        """
        sim = self.sim
        self.ticks += 1
        if self.stale:
            self.holds += 1      # the node re-sends the last safe command
        else:
            res = self.act.process(raw_action)
            if res.ok:
                self.last_action = res.action
            target = self.full_default.copy()
            target[self.idx] = res.target
            self.last_target = target
        self.commands.send(self.last_target, sim.time_ns)
        end = sim.step_count + self.steps_per_tick
        per, dt = self.steps_per_state, sim.dt_ns
        while True:
            for cmd in self.commands.due(sim.time_ns):
                sim.set_target(JointTarget.hold(cmd))
            step = sim.step_count
            if step >= end:
                break
            since = (step - self.state_phase) % per
            if since == 0:
                self.states.send(sim.observe(), sim.time_ns)
            nxt = min(end, step + per - since)
            arrive = self.commands.next_ns
            if arrive is not None:
                nxt = min(nxt, max(step + 1, -(-arrive // dt)))
            sim.step(nxt - step)
        self.t += self.tick_s
        arrived = self.states.due(sim.time_ns)
        if arrived:
            self.measured = arrived[-1]
        stale = sim.time_ns - self.measured.stamp_ns > self.spec.stale_after_ns
        if self.stale and not stale:
            self.obs.reset()     # the node restarts the observation history after a hold
        self.stale = stale

    def goal_error(self) -> float:
        """Max |q - goal| over the policy joints, now (rad)."""
        q = self.sim.joint_positions()
        return float(np.max(np.abs(q[self.idx] - self.goal[self.idx])))


def _perturber(route: RouteConfig) -> Callable[[Observation, np.random.Generator],
                                               Observation] | None:
    """Return the route's value faults on joint_states fields (None: none), as the injector."""
    channels = {k: c for k, c in route.perturb.fields.items() if k in JOINT_STATE_FIELDS}
    if not channels:
        return None

    def apply(o: Observation, rng: np.random.Generator) -> Observation:
        return replace(o, **{k: c.apply(getattr(o, k), rng) for k, c in channels.items()})
    return apply
