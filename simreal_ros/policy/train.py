"""``simreal train``: train a policy spec's network in simulation, seeded and reproducible.

Method: DAgger distillation. A privileged teacher knows each world's randomized masses and
servo gains and commands the position that holds the goal exactly against gravity (a static
P-servo inverse: ``q_goal + tau_gravity(q_goal) / kp``). The student is an MLP that sees only
the policy spec's observation (built by the same ``codec.ObservationBuilder`` the node uses)
and whose outputs go through the same ``codec.ActionProcessor`` (clip, rate limit, limits).
Round 0 executes the teacher; later rounds mostly execute the student, the teacher labels
every visited observation, and the student is refit on everything collected so far.

Every world is a :class:`simreal_ros.policy.env.World`, the one environment: the sim bridge's
physics with its command delay line and domain randomization, wired to the policy through the
latency injector's routes (one preset per episode), acting on the newest observation that has
arrived and holding on stale ones as the node does (see that module).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, fields, replace
import json
import math
from pathlib import Path
import re
import time
from typing import Any, Callable, Collection, Mapping, cast

import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import load_robot
from simreal_ros.core.validate import Section, check_range, load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.policy.env import World
from simreal_ros.policy.spec import PolicySpec, load_policy_spec
from simreal_ros.policy.train_delays import LatencyPreset, parse_latency_presets

FloatArray = npt.NDArray[np.float64]

#: ``simreal train --quick``: a seconds-long smoke run of the whole pipeline.
QUICK = {'iterations': 1, 'envs': 2, 'episode_s': 0.5, 'epochs': 1, 'eval_episodes': 2}
#: ``latency_presets`` when the config has none: every shipped preset, equal weights.
DEFAULT_PRESETS = tuple(LatencyPreset(n) for n in ('none', 'usb_serial', 'ethercat', 'wifi',
                                                   'congested_wifi'))
#: Keys of older configs that the presets replaced, and what to write instead.
_REPLACED = {'action_delay_s', 'observation_delay_s'}


@dataclass(frozen=True)
class TrainConfig:
    """A validated ``config/training/<name>.yaml`` (see the shipped one for every key)."""

    source: str
    policy: str
    seed: int = 0
    threads: int = 1
    randomization: str = 'default'
    overlay: str = ''
    latency_presets: tuple[LatencyPreset, ...] = DEFAULT_PRESETS
    state_rate_hz: float = 200.0
    noise_pos_rad: float = 0.0005
    noise_vel_rad_s: float = 0.02
    envs: int = 16
    iterations: int = 14
    episode_s: float = 6.0
    goal_interval_s: tuple[float, float] = (1.2, 2.5)
    goal_margin_rad: float = 0.25
    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 30
    batch_size: int = 512
    learning_rate: float = 1e-3
    eval_episodes: int = 40
    tolerance_rad: float = 0.05
    dwell_s: float = 0.2
    goal_timeout_s: float = 4.0


#: Source name of values given as overrides (``simreal train --seed ...``) in errors.
OVERRIDE = 'override'
#: YAML keys of fields whose name differs from the key, for error messages.
_YAML_KEYS = {'noise_pos_rad': 'observation_noise.joint_pos_rad',
              'noise_vel_rad_s': 'observation_noise.joint_vel_rad_s', 'hidden': 'network.hidden'}
#: Integer fields: (minimum, maximum or None).
_INTEGERS: dict[str, tuple[int, int | None]] = {
    'seed': (0, 2**63 - 1), 'threads': (1, 64), 'envs': (1, 1024), 'iterations': (1, None),
    'epochs': (1, None), 'batch_size': (1, None), 'eval_episodes': (0, None)}
#: Number fields: True = must be > 0, False = must be >= 0.
_NUMBERS = {'noise_pos_rad': False, 'noise_vel_rad_s': False, 'episode_s': True,
            'state_rate_hz': True,
            'goal_margin_rad': False, 'learning_rate': True, 'tolerance_rad': True,
            'dwell_s': False, 'goal_timeout_s': True}
#: ``[low, high]`` fields: True = low must be > 0, False = low must be >= 0.
_RANGES = {'goal_interval_s': True}


def check_numbers(cfg: object, integers: Mapping[str, tuple[int, int | None]],
                  numbers: Mapping[str, bool],
                  fail: Callable[[str, str, Any], ConfigError]) -> None:
    """Check a training config's integer and number fields; raise ``fail(name, expected, got)``.

    ``integers`` maps a field to (minimum, maximum or None); ``numbers`` to True (must be > 0)
    or False (>= 0).
    """
    for name, (lo, hi) in integers.items():
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None
                                                                        and v > hi):
            raise fail(name, f'an integer >= {lo}' if hi is None
                       else f'an integer in [{lo}, {hi}]', v)
    for name, positive in numbers.items():
        v = getattr(cfg, name)
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) \
            and (v > 0 if positive else v >= 0)
        if not ok:
            raise fail(name, 'a finite number ' + ('> 0' if positive else '>= 0'), v)


def seeded_torch(threads: int, seed: int) -> Any:
    """Seed torch and make it deterministic on ``threads``; return the batch shuffler.

    The common start of the three trainers (reach, visual, locomotion).
    """
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    return torch.Generator().manual_seed(seed)


def fit_mse(net: Any, opt: Any, x: Any, y: Any, epochs: int, batch_size: int,
            shuffle: Any) -> float:
    """Fit ``net(x)`` to ``y`` by mean squared error over shuffled mini-batches.

    Returns the mean batch loss. The DAgger fit of the reach and the locomotion trainers.
    """
    import torch
    loss_sum, batches = 0.0, 0
    for _epoch in range(epochs):
        perm = torch.randperm(len(x), generator=shuffle)
        for s in range(0, len(x), batch_size):
            b = perm[s:s + batch_size]
            loss = torch.nn.functional.mse_loss(net(x[b]), y[b])
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            loss_sum += float(loss.detach())
            batches += 1
    return loss_sum / max(1, batches)


def validate_train_config(cfg: TrainConfig, overridden: Collection[str] = ()) -> TrainConfig:
    """Check every field of ``cfg``; return it, or raise ConfigError naming the key.

    The one place the training settings are checked: after loading the YAML and again after
    overrides (``simreal train --envs 0``). Errors about a field in ``overridden`` name
    :data:`OVERRIDE` as their source and the field as the key; others the file and YAML key.
    """
    def fail(name: str, expected: str, got: Any) -> ConfigError:
        if name in overridden:
            return ConfigError(OVERRIDE, name, expected, got)
        return ConfigError(cfg.source, _YAML_KEYS.get(name, name), expected, got)

    if not isinstance(cfg.policy, str) or not cfg.policy:
        raise fail('policy', 'a non-empty string', cfg.policy)
    if not isinstance(cfg.randomization, str):
        raise fail('randomization', "a randomization name or path ('' = none)",
                   cfg.randomization)
    if not isinstance(cfg.overlay, str):
        raise fail('overlay', "a model overlay name or path ('' = the nominal model)",
                   cfg.overlay)
    if cfg.overlay:
        load_overlay(cfg.overlay)  # its own ConfigError (a residual of another overlay too)
    check_numbers(cfg, _INTEGERS, _NUMBERS, fail)
    for name, positive in _RANGES.items():
        v = getattr(cfg, name)
        ok = isinstance(v, (tuple, list)) and len(v) == 2 and all(
            not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
            for x in v) and v[0] <= v[1] and (v[0] > 0 if positive else v[0] >= 0)
        if not ok:
            raise fail(name, '[low, high] with ' + ('0 < ' if positive else '0 <= ')
                       + 'low <= high (s)', v)
    if cfg.state_rate_hz > 10_000:
        raise fail('state_rate_hz', "a rate <= 10000 Hz (the sim bridge's limit)",
                   cfg.state_rate_hz)
    presets = cfg.latency_presets
    raw = [{'preset': p.preset, 'weight': p.weight} if isinstance(p, LatencyPreset) else p
           for p in presets] if isinstance(presets, (tuple, list)) else presets
    try:
        parse_latency_presets(raw, cfg.source)
    except ConfigError as exc:
        if 'latency_presets' not in overridden:
            raise
        raise ConfigError(OVERRIDE, 'latency_presets', exc.expected, exc.got) from None
    h = cfg.hidden
    if not isinstance(h, (tuple, list)) or not h or any(
            isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in h):
        raise fail('hidden', 'a non-empty list of layer widths >= 1', h)
    return cfg


def load_train_config(name_or_path: str | Path, **overrides: Any) -> TrainConfig:
    """Load training settings by shipped name or path; ``overrides`` replace fields.

    Overrides that are ``None`` are ignored; the result is validated after they are applied,
    so ``envs=0`` fails like ``envs: 0`` in the file, naming the override.
    """
    path = resolve_named('training', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    noise = top.section('observation_noise', {})
    net = top.section('network', {})
    hidden = net.items('hidden', [128, 128])
    net.reject_unknown()

    def pair(key: str, default: tuple[float, float]) -> tuple[float, float]:
        return check_range(top.raw(key, list(default)), src, key)

    for key in sorted(_REPLACED & set(top.data)):
        raise ConfigError(src, key, 'latency_presets: [none, usb_serial, ...] instead (the '
                          'constant per-episode delays were replaced by per-message delays of '
                          'the latency injector presets)', top.raw(key))
    presets = (parse_latency_presets(top.raw('latency_presets'), src)
               if top.has('latency_presets') else DEFAULT_PRESETS)
    cfg = TrainConfig(
        source=src, policy=top.string('policy'), seed=top.integer('seed', 0),
        threads=top.integer('threads', 1),
        randomization=str(top.raw('randomization', 'default') or ''),
        overlay=str(top.raw('overlay', '') or ''),
        latency_presets=presets,
        state_rate_hz=top.number('state_rate_hz', 200.0),
        noise_pos_rad=noise.number('joint_pos_rad', 0.0005),
        noise_vel_rad_s=noise.number('joint_vel_rad_s', 0.02),
        envs=top.integer('envs', 16), iterations=top.integer('iterations', 14),
        episode_s=top.number('episode_s', 6.0),
        goal_interval_s=pair('goal_interval_s', (1.2, 2.5)),
        goal_margin_rad=top.number('goal_margin_rad', 0.25),
        hidden=tuple(hidden), epochs=top.integer('epochs', 30),
        batch_size=top.integer('batch_size', 512),
        learning_rate=top.number('learning_rate', 1e-3),
        eval_episodes=top.integer('eval_episodes', 40),
        tolerance_rad=top.number('tolerance_rad', 0.05),
        dwell_s=top.number('dwell_s', 0.2),
        goal_timeout_s=top.number('goal_timeout_s', 4.0))
    noise.reject_unknown()
    top.reject_unknown(extra_allowed=('description',))
    validate_train_config(cfg)
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(given.get('latency_presets'), (list, tuple)) and all(
            isinstance(p, (str, dict)) for p in given['latency_presets']):
        given['latency_presets'] = parse_latency_presets(given['latency_presets'], OVERRIDE)
    unknown = sorted(set(given) - {f.name for f in fields(TrainConfig) if f.name != 'source'})
    if unknown:
        raise ConfigError(OVERRIDE, unknown[0], 'a TrainConfig field', given[unknown[0]])
    return validate_train_config(replace(cfg, **given), overridden=set(given))


def build_network(obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> Any:
    """Build the student: an ELU MLP plus a bias-free linear skip from input to output."""
    import torch
    from torch import nn

    class ReachMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            width = obs_dim
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ELU()]
                width = h
            layers.append(nn.Linear(width, act_dim))
            self.mlp = nn.Sequential(*layers)
            self.skip = nn.Linear(obs_dim, act_dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.mlp(x) + self.skip(x)
            return out

    return ReachMLP()


def _success_rates(worlds: list[World], act: Callable[[FloatArray], FloatArray],
                   goals_per_world: int) -> dict[str, Any]:
    """Chain ``goals_per_world`` random goals in each world under the student alone.

    Also reported per latency preset (``by_preset``: goals and success rate), with the
    fraction of control steps the node would have held on stale observations.
    """
    cfg = cast(TrainConfig, worlds[0].cfg)  # the worlds of train() are built from one
    ticks = int(math.ceil(cfg.goal_timeout_s / worlds[0].tick_s))
    dwell = max(1, int(math.ceil(cfg.dwell_s / worlds[0].tick_s)))
    hits = 0
    times: list[float] = []
    errors: list[float] = []
    per: dict[str, list[int]] = {}
    for w in worlds:
        w.reset()
        w.ticks = w.holds = 0
    for _ in range(goals_per_world):
        for w in worlds:
            w.new_goal()
        inside = [0] * len(worlds)
        reached: list[float | None] = [None] * len(worlds)
        for k in range(ticks):
            actions = act(np.stack([w.observation() for w in worlds]))
            for i, w in enumerate(worlds):
                w.apply(actions[i])
                if reached[i] is None:
                    inside[i] = inside[i] + 1 if w.goal_error() < cfg.tolerance_rad else 0
                    if inside[i] >= dwell:
                        reached[i] = (k + 1 - dwell) * w.tick_s
        for i, w in enumerate(worlds):
            errors.append(w.goal_error())
            counts = per.setdefault(w.preset_name or 'nominal', [0, 0])
            counts[0] += 1
            t = reached[i]
            if t is not None:
                hits += 1
                counts[1] += 1
                times.append(t)
    n = goals_per_world * len(worlds)
    ticks_all = sum(w.ticks for w in worlds)
    return {'goals': n, 'success_rate': hits / n if n else float('nan'),
            'time_to_goal_mean_s': float(np.mean(times)) if times else float('nan'),
            'final_error_median_rad': float(np.median(errors)) if errors else float('nan'),
            'stale_hold_fraction': sum(w.holds for w in worlds) / max(1, ticks_all),
            'by_preset': {k: {'goals': g, 'success_rate': h / g}
                          for k, (g, h) in sorted(per.items())}}


#: the one image spec with a trainer (:mod:`simreal_ros.policy.visual_train`)
VISUAL_POLICY = 'simreal_arm_visual_reach'


def image_terms_hint(policy: str) -> str:
    """Return what ``simreal train`` says of a spec with image terms: where it is trained."""
    if policy == VISUAL_POLICY:
        return ('vector terms only (simreal train does not train image terms); train '
                f'{VISUAL_POLICY} with `simreal train {VISUAL_POLICY}` (the visual trainer)')
    return ('vector terms only (simreal train does not train image terms; '
            f'`python -m simreal_ros.policy.visual_train` trains {VISUAL_POLICY} only)')


def train(cfg: TrainConfig, out_dir: Path, log: Callable[[str], None] = print
          ) -> dict[str, Any]:
    """Train the spec's network with ``cfg``; write ``<policy>.pt``, spec and summary."""
    import torch

    t_start = time.monotonic()
    spec = load_policy_spec(cfg.policy)
    if spec.images:  # these worlds render no cameras: the visual reach task has its trainer
        raise ConfigError(str(spec.source), 'observation', image_terms_hint(spec.name),
                          [f'image: {t.camera}' for t in spec.images])
    shuffle = seeded_torch(cfg.threads, cfg.seed)
    robot = load_robot(spec.robot)
    rng = np.random.default_rng(cfg.seed)
    seeds = rng.integers(0, 2**31 - 1, size=cfg.envs + 64)
    worlds = [World(spec, robot, cfg, int(seeds[i])) for i in range(cfg.envs)]
    net = build_network(spec.obs_dim, spec.act_dim, cfg.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate)
    ticks = int(round(cfg.episode_s * spec.control_rate_hz))
    data_x: list[FloatArray] = []
    data_y: list[FloatArray] = []

    def student(obs: FloatArray) -> FloatArray:
        with torch.no_grad():
            return np.asarray(net(torch.as_tensor(obs, dtype=torch.float32)).numpy(),
                              dtype=np.float64)

    log(f'training {spec.name}: obs {spec.obs_dim}, act {spec.act_dim}, {cfg.envs} worlds, '
        f'{cfg.iterations} DAgger rounds of {cfg.episode_s:g} s, seed {cfg.seed}')
    history = []
    for it in range(cfg.iterations):
        beta = 1.0 if it == 0 else 0.5 ** (it + 1)
        for w in worlds:
            w.reset()
        for _k in range(ticks):
            obs = np.stack([w.observation() for w in worlds])
            labels = np.stack([w.teacher_action for w in worlds])
            fresh = np.array([not w.stale for w in worlds])
            data_x.append(obs[fresh])       # the node holds on stale steps: nothing to learn
            data_y.append(labels[fresh])
            executed = labels if it == 0 else student(obs)
            for i, w in enumerate(worlds):
                if w.t >= w.next_switch:
                    w.new_goal()
                use_teacher = beta > 0 and rng.random() < beta
                w.apply(labels[i] if use_teacher else executed[i])
        x = torch.as_tensor(np.concatenate(data_x), dtype=torch.float32)
        y = torch.as_tensor(np.concatenate(data_y), dtype=torch.float32)
        loss = fit_mse(net, opt, x, y, cfg.epochs, cfg.batch_size, shuffle)
        history.append({'round': it, 'samples': int(len(x)), 'beta': beta, 'loss': loss,
                        'presets': sorted(Counter(w.preset_name for w in worlds).items())})
        log(f'  round {it + 1}/{cfg.iterations}: {len(x)} samples, loss '
            f'{history[-1]["loss"]:.3g}, {time.monotonic() - t_start:.0f} s')
    net.eval()
    settings = {**asdict(cfg), 'source': Path(cfg.source).name}
    held = sum(w.holds for w in worlds)
    summary: dict[str, Any] = {
        'policy': spec.name, 'config': settings, 'rounds': history,
        'stale_hold_fraction': held / max(1, sum(w.ticks for w in worlds)),
        'train_time_s': time.monotonic() - t_start}
    if cfg.eval_episodes:
        per = max(1, cfg.eval_episodes // max(1, min(8, cfg.envs)))
        n_eval = min(8, cfg.envs)
        nominal = [World(spec, robot, cfg, int(seeds[cfg.envs + i]), randomize=False)
                   for i in range(n_eval)]
        names = [p.preset for p in cfg.latency_presets]
        randomized = [World(spec, robot, cfg, int(seeds[cfg.envs + 32 + i]),
                            preset=names[i % len(names)]) for i in range(n_eval)]
        summary['check_nominal'] = _success_rates(nominal, student, per)
        summary['check_randomized'] = _success_rates(randomized, student, per)
        log(f'  in-process check: nominal {summary["check_nominal"]["success_rate"]:.1%}, '
            f'randomized {summary["check_randomized"]["success_rate"]:.1%} of '
            f'{summary["check_nominal"]["goals"]} goals within {cfg.tolerance_rad} rad')
        log('  by preset: ' + ', '.join(
            f'{k} {v["success_rate"]:.0%} of {v["goals"]}'
            for k, v in summary['check_randomized']['by_preset'].items()))
    model_path, spec_path = save_policy(net, spec, out_dir)
    write_training_record(out_dir, spec.name, summary, model_path, spec_path, t_start)
    log(f'wrote {model_path} ({model_path.stat().st_size / 1024:.0f} kB) and {spec_path} in '
        f'{summary["total_time_s"]:.0f} s')
    return summary


def save_policy(net: Any, spec: PolicySpec, out_dir: Path) -> tuple[Path, Path]:
    """Save ``net`` as TorchScript ``OUT/NAME.pt`` and the spec beside it naming that model.

    Returns (model path, spec path); a spec that already is ``OUT/NAME.yaml`` is left as it is.
    """
    import torch
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = out_dir / f'{spec.name}.pt'
    torch.jit.script(net).save(str(model_path))
    spec_path = out_dir / f'{spec.name}.yaml'
    if spec_path.resolve() != spec.source.resolve():
        text = spec.source.read_text(encoding='utf-8')
        spec_path.write_text(re.sub(r'^model:\s*\S+', f'model: {model_path.name}', text,
                                    count=1, flags=re.M), encoding='utf-8')
    return model_path, spec_path


def write_training_record(out_dir: Path, name: str, summary: dict[str, Any], model_path: Path,
                          spec_path: Path, t_start: float) -> None:
    """Add total time, model and spec to ``summary``; write it to ``OUT/NAME.training.json``."""
    summary['total_time_s'] = time.monotonic() - t_start
    summary['model'] = str(model_path)
    summary['spec'] = str(spec_path)
    (out_dir / f'{name}.training.json').write_text(json.dumps(summary, indent=2) + '\n',
                                                   encoding='utf-8')
