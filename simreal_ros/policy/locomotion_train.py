"""Train a locomotion policy (``simreal_quad_walk``): DAgger distillation of the gait expert.

``simreal train simreal_quad_walk`` dispatches here for a training config whose policy spec
drives a floating-base robot (:func:`is_locomotion`); the settings are
``config/training/simreal_quad_walk.yaml`` (:class:`LocoTrainConfig`, every key there).

Method. The teacher is :class:`~simreal_ros.policy.locomotion_task.GaitExpert`, a trot whose
stride and turn follow the command, with feedback from the base's true velocity and
orientation (privileged). The student is an MLP (ELU, plus a linear skip; the reach trainer's
:func:`~simreal_ros.policy.train.build_network`) that sees only the spec's observation (IMU,
joint encoders, the command, the phase clock, its last action), built by the node's own
ObservationBuilder, and acts through the node's ActionProcessor: joint position offsets from
the standing pose at 50 Hz, the servos' PD at every 1 ms physics step. Round 0 executes the
teacher; round r >= 1 executes the student, the teacher with probability 0.5^(r+1) per step;
every visited step the node would act on is labelled with the teacher's action and the
student is refit on all data so far (Adam, MSE, ``epochs`` passes per round, warm-started).

Worlds (:class:`~simreal_ros.policy.locomotion_task.LocoWorld`), one episode each per round:
the dynamics randomization (``randomization``, friction, masses, servo gains, the bridge's
command delay line), motor strength, pushes, one latency preset per episode through the
injector's command and observation routes (:mod:`simreal_ros.policy.train_delays`), sensor
noise, a new random command every ``command_interval_s``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
import math
import os
from pathlib import Path
import platform
import sys
import time
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import load_randomization
from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import load_robot
from simreal_ros.core.validate import Section, check_range, load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.policy.locomotion_eval import evaluate, network_policy
from simreal_ros.policy.locomotion_task import (
    CommandSampler,
    GaitExpert,
    LocoWorld,
    WorldSettings,
    fallen,
)
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.train import (
    OVERRIDE,
    build_network,
    check_numbers,
    fit_mse,
    save_policy,
    seeded_torch,
    write_training_record,
)
from simreal_ros.policy.train_delays import LatencyPreset, parse_latency_presets

FloatArray = npt.NDArray[np.float64]

#: ``simreal train --quick`` for a locomotion config: a seconds-long smoke run
QUICK = {'rounds': 1, 'envs': 2, 'episode_s': 0.5, 'epochs': 1, 'eval_episodes': 1,
         'eval_episode_s': 1.0}


@dataclass(frozen=True)
class LocoTrainConfig:
    """A validated locomotion training config (``config/training/simreal_quad_walk.yaml``)."""

    source: str
    policy: str
    seed: int = 0
    threads: int = 1
    randomization: str = 'legged'
    latency_presets: tuple[LatencyPreset, ...] = (LatencyPreset('none'),)
    envs: int = 12
    rounds: int = 10
    episode_s: float = 8.0
    command_interval_s: tuple[float, float] = (2.0, 4.0)
    push_force_n: float = 8.0
    hidden: tuple[int, ...] = (256, 128)
    epochs: int = 8
    batch_size: int = 512
    learning_rate: float = 1e-3
    eval_episodes: int = 4
    eval_episode_s: float = 20.0

    def world_settings(self) -> WorldSettings:
        """Return the worlds' settings."""
        return WorldSettings(randomization=self.randomization,
                             latency_presets=self.latency_presets,
                             push_force_n=self.push_force_n)


#: Integer fields: (minimum, no maximum); number fields that must be > 0 (as train.py's).
_INTEGERS: dict[str, tuple[int, int | None]] = {
    'seed': (0, None), 'threads': (1, None), 'envs': (1, None), 'rounds': (1, None),
    'epochs': (1, None), 'batch_size': (1, None), 'eval_episodes': (0, None)}
_NUMBERS = {'episode_s': True, 'learning_rate': True, 'eval_episode_s': True}


def _check(cfg: LocoTrainConfig, overridden: set[str]) -> LocoTrainConfig:
    def fail(key: str, expected: str, got: Any) -> ConfigError:
        return ConfigError(OVERRIDE if key in overridden else cfg.source, key, expected, got)
    check_numbers(cfg, _INTEGERS, _NUMBERS, fail)
    if not (math.isfinite(cfg.push_force_n) and cfg.push_force_n >= 0):
        raise fail('push_force_n', 'a finite number >= 0 (N)', cfg.push_force_n)
    return cfg


def load_loco_config(name_or_path: str | Path, **overrides: Any) -> LocoTrainConfig:
    """Load a locomotion training config by name or path; ``overrides`` replace fields."""
    path = resolve_named('training', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    net = top.section('network', {})
    hidden = net.items('hidden', [256, 128])
    net.reject_unknown()
    if not hidden or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1
                             for h in hidden):
        raise ConfigError(src, 'network.hidden', 'a non-empty list of layer widths >= 1',
                          hidden)
    presets = (parse_latency_presets(top.raw('latency_presets'), src)
               if top.has('latency_presets') else (LatencyPreset('none'),))
    rand = str(top.raw('randomization', 'legged') or '')
    if rand and load_randomization(rand).pushes is not None:   # its own ConfigError
        # the world pushes as push_force_n says (and its check as well): a second source of
        # pushes would be ignored in silence
        raise ConfigError(src, 'randomization', 'a randomization without pushes: (the '
                          "training world's pushes are push_force_n's, every 2-4 s for "
                          '0.15 s)', rand)
    cfg = LocoTrainConfig(
        source=src, policy=top.string('policy'), seed=top.integer('seed', 0),
        threads=top.integer('threads', 1), randomization=rand, latency_presets=presets,
        envs=top.integer('envs', 12), rounds=top.integer('rounds', 10),
        episode_s=top.number('episode_s', 8.0),
        command_interval_s=check_range(top.raw('command_interval_s', [2.0, 4.0]), src,
                                       'command_interval_s', minimum=0.1),
        push_force_n=top.number('push_force_n', 8.0, minimum=0.0),
        hidden=tuple(hidden), epochs=top.integer('epochs', 8),
        batch_size=top.integer('batch_size', 512),
        learning_rate=top.number('learning_rate', 1e-3),
        eval_episodes=top.integer('eval_episodes', 4),
        eval_episode_s=top.number('eval_episode_s', 20.0))
    top.reject_unknown(extra_allowed=('description',))
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - {f.name for f in fields(LocoTrainConfig)} - {'source'})
    if unknown:
        raise ConfigError(OVERRIDE, unknown[0], 'a LocoTrainConfig field', given[unknown[0]])
    return _check(replace(cfg, **given), set(given))


def is_locomotion(name_or_path: str | Path) -> bool:
    """Return True when the training config's policy spec drives a floating-base robot."""
    path = resolve_named('training', str(name_or_path))
    top = Section(load_yaml_mapping(path), str(path))
    spec = load_policy_spec(top.string('policy'))
    return load_robot(spec.robot).floating


def train(cfg: LocoTrainConfig, out_dir: Path, log: Callable[[str], None] = print
          ) -> dict[str, Any]:
    """Train, export, check in-process; write the model, the spec and the training record."""
    import torch

    t_start = time.monotonic()
    shuffle = seeded_torch(cfg.threads, cfg.seed)
    spec = load_policy_spec(cfg.policy)
    robot = load_robot(spec.robot)
    rng = np.random.default_rng(cfg.seed)
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=cfg.envs)]
    settings = cfg.world_settings()
    worlds = [LocoWorld(spec, robot, settings, s) for s in seeds]
    experts = [GaitExpert(robot) for _ in worlds]
    commands = CommandSampler()
    net = build_network(spec.obs_dim, spec.act_dim, cfg.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate)
    ticks = int(round(cfg.episode_s * spec.control_rate_hz))
    xs: list[FloatArray] = []
    ys: list[FloatArray] = []
    history = []
    log(f'training {spec.name}: obs {spec.obs_dim}, act {spec.act_dim}, {cfg.envs} worlds, '
        f'{cfg.rounds} DAgger rounds of {cfg.episode_s:g} s, seed {cfg.seed}')
    fit_s = 0.0
    for rnd in range(cfg.rounds):
        beta = 1.0 if rnd == 0 else 0.5 ** (rnd + 1)
        switch = []
        for w, e in zip(worlds, experts, strict=True):
            w.reset(commands.sample(rng))
            e.reset()
            switch.append(float(rng.uniform(*cfg.command_interval_s)))
        down = [False] * len(worlds)
        falls = 0
        net.eval()
        for _k in range(ticks):
            obs = np.stack([w.observation() for w in worlds])
            labels = []
            for i, (w, e) in enumerate(zip(worlds, experts, strict=True)):
                if w.t >= switch[i]:
                    w.command = commands.sample(rng)
                    switch[i] += float(rng.uniform(*cfg.command_interval_s))
                b = w.base()
                if not down[i] and fallen(b):
                    down[i] = True      # a fallen world teaches nothing: it stops
                    falls += 1
                labels.append(w.label(e.targets(w.t + w.tick_s, w.command, b, w.tick_s)))
            lab = np.stack(labels)
            keep = np.array([not w.stale and not down[i] for i, w in enumerate(worlds)])
            xs.append(obs[keep])
            ys.append(lab[keep])
            if rnd == 0:
                executed = lab
            else:
                with torch.no_grad():
                    executed = net(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            for i, w in enumerate(worlds):
                if not down[i]:
                    w.apply(lab[i] if rng.random() < beta else executed[i])
        t_fit = time.monotonic()
        x = torch.as_tensor(np.concatenate(xs), dtype=torch.float32)
        y = torch.as_tensor(np.concatenate(ys), dtype=torch.float32)
        net.train()
        loss = fit_mse(net, opt, x, y, cfg.epochs, cfg.batch_size, shuffle)
        fit_s += time.monotonic() - t_fit
        history.append({'round': rnd, 'samples': int(len(x)), 'beta': beta,
                        'loss': loss, 'falls': falls,
                        'presets': sorted(w.preset_name for w in worlds)})
        log(f'  round {rnd + 1}/{cfg.rounds}: {len(x)} samples, loss '
            f'{history[-1]["loss"]:.3g}, {falls}/{len(worlds)} worlds fell, '
            f'{time.monotonic() - t_start:.0f} s')
    net.eval()
    train_s = time.monotonic() - t_start
    model_path, spec_path = save_policy(net, spec, out_dir)
    summary: dict[str, Any] = {
        'policy': spec.name, 'method': 'DAgger from the gait expert (locomotion_task)',
        'config': {**asdict(cfg), 'source': Path(cfg.source).name,
                   'latency_presets': [p.preset for p in cfg.latency_presets]},
        'rounds': history, 'samples': int(sum(len(a) for a in xs)), 'fit_time_s': fit_s,
        'train_time_s': train_s,
        'machine': {'host_cpus': os.cpu_count(), 'platform': platform.platform(),
                    'python': sys.version.split()[0], 'torch': torch.__version__}}
    if cfg.eval_episodes:
        trained = load_policy_spec(spec_path)
        t0 = time.monotonic()
        check = evaluate(trained, network_policy(trained), 'mujoco', cfg.eval_episodes,
                         seed=10_000 + cfg.seed, duration_s=cfg.eval_episode_s,
                         push_force_n=cfg.push_force_n, log=log)
        summary['check_mujoco'] = {**check['metrics'], 'time_s': time.monotonic() - t0}
        m = check['metrics']
        log(f'  in-process check (MuJoCo, pushes): success {m["success_rate"]:.0%}, '
            f'tracking error {m["velocity_tracking_error_mps"]:.3f} m/s')
    write_training_record(out_dir, spec.name, summary, model_path, spec_path, t_start)
    log(f'wrote {model_path} ({model_path.stat().st_size / 1024:.0f} kB) in '
        f'{summary["total_time_s"]:.0f} s')
    return summary
