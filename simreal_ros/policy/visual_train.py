"""Train the visuomotor reach policy: DAgger distillation from the joint-goal expert.

``python -m simreal_ros.policy.visual_train --out DIR`` trains ``simreal_arm_visual_reach``
(the spec in ``config/policies/``) on the task of :mod:`simreal_ros.policy.visual_task` and
writes ``<policy>.pt`` (TorchScript), the spec and ``<policy>.training.json``.

Method. The expert is the shipped ``simreal_arm_reach`` network fed with the privileged goal
vector (the joints that put tool0 on the ball's reach point); the student sees the joint state
and the camera image only. Both act through the same :class:`ActionProcessor` (the specs share
the action section), so the expert's raw output is the label. Round 0 executes the expert;
round r >= 1 executes the student, the expert with probability 0.5^(r+1) per step; the ball
moves to a new random position every ``ball_interval_s`` (0.8-1.5 s) so that the arm also
starts from earlier goals, and the in-process check starts every episode at home; every
visited step the node would act on is labelled and the student is refit on all data so far
(warm-started, ``epochs`` passes per round; the last round adds ``polish_epochs`` passes at
``polish_lr_factor`` times the learning rate). Worlds are
:class:`~simreal_ros.policy.visual_task.VisualReachWorld`: the training World's physics with
domain randomization and the latency injector's command/observation routes (one preset per
episode), plus the per-episode visual randomization and image delay.

Network (``forward(obs (N, 18), image (N, 3, 48, 64)) -> action (N, 6)``): three convolutions
(16, 32, 32 channels; 5x5 stride 2, 3x3 stride 2, 3x3) and a spatial soft-argmax that turns
each of the 32 feature maps into the expected (x, y) of its activation (the keypoint layer
of Levine et al., "End-to-End Training of Deep Visuomotor Policies", JMLR 2016); a head maps the
64 keypoint coordinates to an estimate of the goal (the expert's goal term, trained with an
auxiliary loss, weight ``aux_weight``), and an ELU MLP 128-128 plus a linear skip maps
[obs, goal estimate, keypoints] to the action.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
import math
import os
from pathlib import Path
import platform
import sys
import time
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.codec import ObservationBuilder
from simreal_ros.policy.env import World
from simreal_ros.policy.images import FrameHistory, image_stack, preprocess
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import PolicySpec, load_policy_spec
from simreal_ros.policy.train import (
    VISUAL_POLICY,
    TrainConfig,
    save_policy,
    seeded_torch,
    write_training_record,
)
from simreal_ros.policy.visual_task import (
    ReachTask,
    TargetCamera,
    VisualRandomization,
    VisualReachWorld,
)

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]

POLICY = VISUAL_POLICY
EXPERT = 'simreal_arm_reach'


@dataclass(frozen=True)
class VisualTrainConfig:
    """Training settings (the defaults trained the shipped weights)."""

    policy: str = POLICY
    expert: str = EXPERT
    seed: int = 0
    threads: int = 1
    envs: int = 12
    rounds: int = 12
    episode_s: float = 3.0
    ball_interval_s: tuple[float, float] = (0.8, 1.5)
    epochs: int = 4
    polish_epochs: int = 6
    polish_lr_factor: float = 0.3
    batch_size: int = 128
    learning_rate: float = 1e-3
    aux_weight: float = 1.0
    visual_randomization: bool = True
    render_size: tuple[int, int] = (128, 96)
    eval_episodes: int = 40


def build_network(obs_dim: int, act_dim: int, channels: int, height: int, width: int,
                  goal_dim: int) -> Any:
    """Build the student (module doc)."""
    import torch
    from torch import nn

    class VisualReach(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(channels, 16, 5, 2, 2), nn.ELU(),
                nn.Conv2d(16, 32, 3, 2, 1), nn.ELU(),
                nn.Conv2d(32, 32, 3, 1, 1))
            hh, ww = (height + 3) // 4, (width + 3) // 4
            xs = torch.linspace(-1.0, 1.0, ww)
            ys = torch.linspace(-1.0, 1.0, hh)
            self.register_buffer('px', xs.repeat(hh))
            self.register_buffer('py', ys.repeat_interleave(ww))
            self.goal = nn.Sequential(nn.Linear(64, 128), nn.ELU(), nn.Linear(128, goal_dim))
            z = obs_dim + goal_dim + 64
            self.mlp = nn.Sequential(nn.Linear(z, 128), nn.ELU(), nn.Linear(128, 128),
                                     nn.ELU(), nn.Linear(128, act_dim))
            self.skip = nn.Linear(obs_dim + goal_dim, act_dim, bias=False)

        def keypoints(self, image: torch.Tensor) -> torch.Tensor:
            f = self.conv(image)
            p = torch.softmax(f.flatten(2), dim=-1)
            return torch.cat([(p * self.px).sum(-1), (p * self.py).sum(-1)],  # type: ignore[operator]
                             dim=1)

        def heads(self, obs: torch.Tensor, image: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
            k = self.keypoints(image)
            g = self.goal(k)
            a = self.mlp(torch.cat([obs, g, k], dim=1)) + self.skip(torch.cat([obs, g], dim=1))
            return a, g

        def forward(self, obs: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
            return self.heads(obs, image)[0]

    return VisualReach()


def world_config(seed: int) -> TrainConfig:
    """Return the worlds' physics/latency settings: the joint-goal expert's defaults."""
    return TrainConfig(source='visual_train', policy=POLICY, seed=seed)


def make_worlds(spec: PolicySpec, expert: PolicySpec, camera: TargetCamera, task: ReachTask,
                seeds: list[int], randomize: bool, visual: bool) -> list[VisualReachWorld]:
    """Build one :class:`VisualReachWorld` per seed."""
    robot = task.robot
    cfg = world_config(0)
    vis = VisualRandomization() if visual else None
    return [VisualReachWorld(World(spec, robot, cfg, s, randomize=randomize), task, camera,
                             spec.images[0], ObservationBuilder(expert), vis, s + 1)
            for s in seeds]


def images_to_tensor(frames: U8, spec: PolicySpec) -> Any:
    """uint8 (N, H, W, 3) RGB -> float32 (N, 3, H, W) normalized as the spec's image term.

    The same arithmetic as :func:`simreal_ros.policy.images.preprocess` for an rgb8 frame
    already at the term's size (tested equal).
    """
    import torch
    term = spec.images[0]
    x = torch.as_tensor(frames).permute(0, 3, 1, 2).float() * float(term.scale)
    mean = torch.as_tensor(term.mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.as_tensor(term.std, dtype=torch.float32).view(1, -1, 1, 1)
    return (x - mean) / std


def evaluate(worlds: list[VisualReachWorld],
             act: Callable[[int, F64, U8], F64], episodes: int) -> dict[str, Any]:
    """Run ``episodes`` episodes (the worlds in turn) under ``act(world index, vec, frame)``.

    Success, time to success and final error as :class:`ReachGeometry` defines them.
    """
    geo = worlds[0].task.geo
    tick_s = worlds[0].world.tick_s
    ticks = int(math.ceil(geo.timeout_s / tick_s))
    dwell = max(1, int(math.ceil(geo.dwell_s / tick_s)))
    hits, times, errors = 0, [], []
    done = 0
    while done < episodes:
        batch = worlds[:min(len(worlds), episodes - done)]
        for w in batch:
            w.reset()
        inside = [0] * len(batch)
        reached: list[float | None] = [None] * len(batch)
        for k in range(ticks):
            for i, w in enumerate(batch):
                o = w.observe()
                w.apply(act(i, o[0], o[1]) if o is not None else np.zeros(6))
                if reached[i] is None:
                    inside[i] = inside[i] + 1 if w.error_m() <= geo.tolerance_m else 0
                    if inside[i] >= dwell:
                        reached[i] = (k + 1 - dwell) * tick_s
        for i, w in enumerate(batch):
            errors.append(w.error_m())
            t = reached[i]
            if t is not None:
                hits += 1
                times.append(t)
        done += len(batch)
    return {'episodes': episodes, 'successes': hits, 'success_rate': hits / episodes,
            'time_to_goal_mean_s': float(np.mean(times)) if times else float('nan'),
            'final_error_median_m': float(np.median(errors)),
            'final_error_p90_m': float(np.quantile(errors, 0.9))}


def node_policy(spec: PolicySpec, model_path: Path, n: int
                ) -> Callable[[int, F64, U8], F64]:
    """Return the exported network as the node runs it: preprocess, frame history, a call."""
    model = load_model(model_path, spec.obs_dim, spec.act_dim, threads=1,
                       image_shape=spec.image_shape)
    term = spec.images[0]
    histories = [FrameHistory(term) for _ in range(n)]

    def act(i: int, vec: F64, frame: U8) -> F64:
        histories[i].push(preprocess(term, frame, 'rgb8'))
        return model(vec, image_stack([histories[i]]))
    return act


def train(cfg: VisualTrainConfig, out_dir: Path, log: Callable[[str], None] = print
          ) -> dict[str, Any]:
    """Train, export, check in-process on held-out seeds; write the three files."""
    import torch

    t_start = time.monotonic()
    shuffle = seeded_torch(cfg.threads, cfg.seed)
    spec = load_policy_spec(cfg.policy)
    expert = load_policy_spec(cfg.expert)
    robot = load_robot(spec.robot)
    task = ReachTask(robot)
    camera = TargetCamera(robot, cfg.render_size)
    rng = np.random.default_rng(cfg.seed)
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=cfg.envs + 2 * cfg.eval_episodes)]
    worlds = make_worlds(spec, expert, camera, task, seeds[:cfg.envs], True,
                         cfg.visual_randomization)
    expert_net = torch.jit.load(str(expert.model), map_location='cpu')  # type: ignore[no-untyped-call]
    expert_net.eval()
    ch, h, w = spec.image_shape or (3, 48, 64)
    goal_slice = next((a, b) for name, a, b in expert.layout() if name == 'goal')
    net = build_network(spec.obs_dim, spec.act_dim, ch, h, w, goal_slice[1] - goal_slice[0])
    opt = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate)
    ticks = int(round(cfg.episode_s * spec.control_rate_hz))
    xs: list[F64] = []
    ims: list[U8] = []
    ys: list[F64] = []
    gs: list[F64] = []
    history = []
    log(f'training {spec.name}: {cfg.envs} worlds, {cfg.rounds} rounds of {cfg.episode_s:g} s, '
        f'visual randomization {cfg.visual_randomization}, seed {cfg.seed}')
    fit_s = 0.0
    for rnd in range(cfg.rounds):
        beta = 1.0 if rnd == 0 else 0.5 ** (rnd + 1)
        for wd in worlds:
            wd.reset()
        switch = [float(rng.uniform(*cfg.ball_interval_s)) for _ in worlds]
        net.eval()
        for _k in range(ticks):
            for i, wd in enumerate(worlds):
                if wd.world.t >= switch[i]:   # a new ball from wherever the arm is
                    wd.new_ball()
                    switch[i] += float(rng.uniform(*cfg.ball_interval_s))
            obs = [wd.observe() for wd in worlds]
            live = [i for i, o in enumerate(obs) if o is not None]
            seen = [i for i in live if worlds[i].shows_ball]
            actions = [np.zeros(spec.act_dim) for _ in worlds]
            if live:
                vec = np.stack([obs[i][0] for i in live])      # type: ignore[index]
                img = np.stack([obs[i][1] for i in live])      # type: ignore[index]
                evec = np.stack([obs[i][2] for i in live])     # type: ignore[index]
                with torch.no_grad():
                    label = expert_net(torch.as_tensor(evec, dtype=torch.float32)).numpy()
                    student = (net(torch.as_tensor(vec, dtype=torch.float32),
                                   images_to_tensor(img, spec)).numpy() if rnd > 0 else label)
                keep = np.array([i in seen for i in live])
                xs.append(vec[keep])
                ims.append(img[keep])
                ys.append(label[keep].astype(np.float64))
                gs.append(evec[keep, goal_slice[0]:goal_slice[1]])
                for j, i in enumerate(live):
                    use_expert = rng.random() < beta
                    actions[i] = np.asarray(label[j] if use_expert else student[j], np.float64)
            for i, wd in enumerate(worlds):
                wd.apply(actions[i])
        t_fit = time.monotonic()
        x = torch.as_tensor(np.concatenate(xs), dtype=torch.float32)
        im = torch.as_tensor(np.concatenate(ims))
        y = torch.as_tensor(np.concatenate(ys), dtype=torch.float32)
        g = torch.as_tensor(np.concatenate(gs), dtype=torch.float32)
        net.train()
        loss_sum, aux_sum, batches = 0.0, 0.0, 0
        last = rnd == cfg.rounds - 1
        if last and cfg.polish_epochs:
            for group in opt.param_groups:
                group['lr'] = cfg.learning_rate * cfg.polish_lr_factor
        for _epoch in range(cfg.epochs + (cfg.polish_epochs if last else 0)):
            perm = torch.randperm(len(x), generator=shuffle)
            for s in range(0, len(x), cfg.batch_size):
                b = perm[s:s + cfg.batch_size]
                a_hat, g_hat = net.heads(x[b], images_to_tensor(im[b].numpy(), spec))
                loss_a = torch.nn.functional.mse_loss(a_hat, y[b])
                loss_g = torch.nn.functional.mse_loss(g_hat, g[b])
                loss = loss_a + cfg.aux_weight * loss_g
                opt.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                opt.step()
                loss_sum += float(loss_a.detach())
                aux_sum += float(loss_g.detach())
                batches += 1
        fit_s += time.monotonic() - t_fit
        history.append({'round': rnd, 'samples': int(len(x)), 'beta': beta,
                        'action_loss': loss_sum / max(1, batches),
                        'goal_loss': aux_sum / max(1, batches)})
        log(f'  round {rnd + 1}/{cfg.rounds}: {len(x)} samples, action loss '
            f'{history[-1]["action_loss"]:.3g}, goal loss {history[-1]["goal_loss"]:.3g} '
            f'rad^2, {time.monotonic() - t_start:.0f} s')
    net.eval()
    train_s = time.monotonic() - t_start
    model_path, spec_path = save_policy(net, spec, out_dir)
    n_samples = int(sum(len(a) for a in xs))
    summary: dict[str, Any] = {
        'policy': spec.name, 'expert': cfg.expert, 'config': asdict(cfg), 'rounds': history,
        'samples': n_samples, 'image_bytes': int(sum(a.nbytes for a in ims)),
        'frames_rendered': camera.renders,
        'render_ms_mean': 1e3 * camera.render_s / max(1, camera.renders),
        'render_size': list(cfg.render_size), 'fit_time_s': fit_s, 'train_time_s': train_s,
        'machine': {'host_cpus': os.cpu_count(), 'platform': platform.platform(),
                    'python': sys.version.split()[0], 'torch': torch.__version__,
                    'mujoco_gl': os.environ.get('MUJOCO_GL', '')}}
    if cfg.eval_episodes:
        n = min(12, cfg.eval_episodes)
        held = seeds[cfg.envs:]
        for name, randomize, visual in (('check_nominal', False, False),
                                        ('check_randomized', True, True)):
            ws = make_worlds(spec, expert, camera, task,
                             held[:n] if randomize is False else held[n:2 * n], randomize,
                             visual)
            t0 = time.monotonic()
            summary[name] = evaluate(ws, node_policy(spec, model_path, n), cfg.eval_episodes)
            summary[name]['time_s'] = time.monotonic() - t0
            log(f'  {name}: {summary[name]["successes"]}/{cfg.eval_episodes} '
                f'({summary[name]["success_rate"]:.0%}), final error median '
                f'{summary[name]["final_error_median_m"] * 100:.1f} cm')
    camera.close()
    write_training_record(out_dir, spec.name, summary, model_path, spec_path, t_start)
    log(f'wrote {model_path} ({model_path.stat().st_size / 1024:.0f} kB) in '
        f'{summary["total_time_s"]:.0f} s')
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m simreal_ros.policy.visual_train --out DIR [--seed N] [--quick]``."""
    p = argparse.ArgumentParser(prog='python -m simreal_ros.policy.visual_train',
                                description=__doc__.splitlines()[0])
    p.add_argument('--out', required=True, type=Path)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--rounds', type=int)
    p.add_argument('--envs', type=int)
    p.add_argument('--eval-episodes', type=int)
    p.add_argument('--no-visual-randomization', action='store_true')
    a = p.parse_args(argv)
    d = VisualTrainConfig()
    cfg = VisualTrainConfig(seed=a.seed, threads=a.threads, rounds=a.rounds or d.rounds,
                            envs=a.envs or d.envs,
                            eval_episodes=(a.eval_episodes if a.eval_episodes is not None
                                           else d.eval_episodes),
                            visual_randomization=not a.no_visual_randomization)
    train(cfg, a.out)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
