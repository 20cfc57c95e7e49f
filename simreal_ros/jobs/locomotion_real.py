"""``simreal eval --backend real`` for a locomotion policy: the virtual legged robot over ROS.

The policy is deployed exactly as on hardware: ``simreal emulate --robot <the spec's robot>``
(:class:`~simreal_ros.hardware.emulator.virtual_bus.EmulatorProcess`: its servo bus and its
WT901 IMU on two pseudo-terminals, ``--reality`` its hidden reality) and the planner's
``backend:=real port:=<bus> imu_port:=<imu> policy:=<spec> policy_autostart:=true`` (the servo
driver, the IMU driver and the policy node, as separate processes). Once the policy runs (after
its ramp), the episodes of the in-process evaluation
(:func:`~simreal_ros.policy.locomotion_eval.command_schedule`: forward 0.4 m/s, then turning)
are sent as ``geometry_msgs/Twist`` on ``cmd_vel`` (every 0.1 s, well inside the spec's
``timeout_s``), and their pushes (:func:`~simreal_ros.policy.locomotion_eval.episode_pushes`:
the same forces at the same episode times as the MuJoCo episodes of the same seed) are applied
in the emulator's hidden world (``push`` lines, :mod:`simreal_ros.hardware.emulator.hidden_world`).

**Ground truth.** A real legged robot has no odometry: its velocity tracking cannot be
measured from its own topics. The metrics come from the emulator's hidden world instead (its
``truth`` lines at the spec's control rate: the base's pose and velocity, the servos' energy),
scored by the in-process evaluation's own
:class:`~simreal_ros.policy.locomotion_eval.EpisodeScore`, so the figures mean the same on both
backends: on hardware they would need a motion-capture system.

Episodes follow each other without a reset, as on a real floor: each starts walking where
the previous one ended (an episode's first second after a command change is not scored in
either backend). A fall ends its episode, and the robot is stood up again as a person would
(the hidden world's ``stand``: its home pose at rest where it started, the policy still
running; a policy that handed over to damping on the fall is enabled again through its
``~/enable``) before the next one; ``stand_ups`` counts them.

The result holds both backends side by side, as ``--backend sim2sim`` does: MuJoCo's
(``--engine``'s) in-process episodes of the same seed (run first, before the ROS stack
starts, so they do not share the CPU with it), the virtual robot's, and its success rate and
tracking error as ratios of MuJoCo's (``real_vs_sim``).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
import math
from pathlib import Path
import tempfile
import time
from typing import Any, Callable, Mapping

import numpy as np

from simreal_ros.errors import EmulatorError, SimrealError
from simreal_ros.policy.locomotion_eval import (
    EpisodeScore,
    command_at,
    command_schedule,
    episode_pushes,
    evaluate,
    network_policy,
    summarize,
)
from simreal_ros.policy.locomotion_task import WorldSettings
from simreal_ros.policy.spec import PolicySpec, load_policy_spec

#: how often the episode's command is re-sent on cmd_vel (s): inside the spec's timeout_s
CMD_EVERY_S = 0.1


def ratios(ref: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, float]:
    """Return ``other``'s success rate and tracking error as ratios of ``ref``'s."""
    return {'success_ratio': other['success_rate'] / ref['success_rate']
            if ref['success_rate'] else float('nan'),
            'tracking_error_ratio': other['velocity_tracking_error_mps']
            / ref['velocity_tracking_error_mps'] if ref['velocity_tracking_error_mps'] > 0
            else float('nan')}


def check_real(s: Any, robot: str) -> None:
    """Refuse what the virtual legged robot ``robot`` cannot evaluate (one line each)."""
    for key in ('port', 'imu_port'):
        if key in s.launch_args:
            raise SimrealError(f'{key}:={s.launch_args[key]}: on a real legged robot simreal '
                               f'eval has no ground truth of the base (it has no odometry); '
                               f'leave out {key}:= to evaluate on the virtual legged robot')
    for key in ('backend', 'policy', 'policy_autostart'):
        if key in s.launch_args:
            raise SimrealError(f'{key}:= is set by simreal eval itself; use '
                               f'--backend/--policy')
    if s.reality:  # before the MuJoCo reference's minutes, not when the emulator starts
        from simreal_ros.core.dynamics import load_overlay
        ov = load_overlay(s.reality)
        if ov.robot is not None and ov.robot != robot:
            raise SimrealError(f'--reality {s.reality}: a reality of {ov.robot} ({ov.source}); '
                               f'{s.policy} walks on {robot}')


def _twist(cmd: np.ndarray) -> Any:
    from geometry_msgs.msg import Twist
    m = Twist()
    m.linear.x, m.linear.y, m.angular.z = (float(x) for x in cmd)
    return m


class TruthReader:
    """The ``truth`` lines of the emulator's output, read in order from where it left off."""

    def __init__(self, emu: Any) -> None:
        self.emu = emu
        self.k = len(emu.lines)

    def new(self) -> list[tuple[int, float, Any, float]]:
        """Return the samples printed since the last call."""
        from simreal_ros.hardware.emulator.hidden_world import parse_truth
        batch = self.emu.lines[self.k:]  # one slice: atomic next to the reading thread
        self.k += len(batch)
        return [parse_truth(line) for line in batch if line.startswith('truth ')]


def real_episode(stack: Any, pub: Any, emu: Any, truth: TruthReader, spec: PolicySpec,
                 episode: int, seed: int, duration_s: float, push_force_n: float, tick_s: float
                 ) -> dict[str, Any]:
    """Run one episode on the virtual robot (``pub``: cmd_vel); its metrics from the truth."""
    schedule = command_schedule(episode, duration_s)
    world = WorldSettings(push_force_n=push_force_n)
    pushes = episode_pushes(seed + episode, duration_s, tick_s, world) \
        if push_force_n > 0 else []
    score = EpisodeScore(spec, tick_s)
    truth.new()  # samples before the episode are not its
    t0_ns = time.time_ns()
    sent: np.ndarray | None = None
    last_send = -math.inf
    p_prev: np.ndarray | None = None
    e0: float | None = None
    e_last = 0.0
    path_m = 0.0
    pushed = 0
    first: tuple[int, float] | None = None  # (stamp ns, physics s) of the first sample
    last: tuple[int, float] | None = None
    done = False
    wall_deadline = time.monotonic() + 3.0 * duration_s + 30.0
    while not done:
        now_s = (time.time_ns() - t0_ns) / 1e9
        cmd = command_at(schedule, now_s, tick_s)
        if sent is None or not np.array_equal(cmd, sent) or \
                time.monotonic() - last_send >= CMD_EVERY_S:
            pub.publish(_twist(cmd))
            sent, last_send = cmd, time.monotonic()
        while pushed < len(pushes) and pushes[pushed][0] <= now_s:
            fx, fy, fz = (float(x) for x in pushes[pushed][1])  # a numpy repr is no number
            emu.send(f'push {fx!r} {fy!r} {fz!r} {world.push_duration_s!r}', 'pushed ')
            pushed += 1
        for stamp_ns, physics_s, base, energy_j in truth.new():
            t = (stamp_ns - t0_ns) / 1e9
            if t < 0:
                continue
            first = first or (stamp_ns, physics_s)
            last = (stamp_ns, physics_s)
            if t >= duration_s - 0.5 * tick_s:
                done = True
                break
            e0 = energy_j if e0 is None else e0
            e_last = energy_j
            p = np.asarray(base.position[:2])
            if p_prev is not None:
                path_m += float(np.linalg.norm(p - p_prev))
            p_prev = p
            if not score.add(t, base, command_at(schedule, t, tick_s)):
                done = True
                break
        if emu.proc is not None and emu.proc.poll() is not None:
            raise EmulatorError(f'simreal emulate exited with code {emu.proc.returncode} '
                                f'during the evaluation: {emu.lines[-5:]}')
        stack.check_alive()
        if time.monotonic() > wall_deadline:
            raise EmulatorError(f'the emulator streamed no ground truth up to {duration_s:g} s '
                                f'of the episode within {3 * duration_s + 30:g} s')
        # 20 ms: a push starts within a control tick of its time; the truth lines wait in
        # the emulator's output meanwhile (this process shares the CPU with the stack)
        time.sleep(0.02)
    ep = score.result(path_m, e_last - (e0 or 0.0))
    ep['pushes'] = pushed
    # physics seconds per second: below 1 when the emulator fell behind on a busy CPU
    ep['realtime_factor'] = (last[1] - first[1]) / ((last[0] - first[0]) / 1e9) \
        if first and last and last[0] > first[0] else float('nan')
    return ep


def stand_up(stack: Any, emu: Any, nodes: list[Any], timeout_s: float) -> None:
    """Stand the fallen robot up in the hidden world; enable a policy that went to damping."""
    from std_srvs.srv import SetBool

    from simreal_ros.jobs.eval import policy_diag, wait_for_policy
    emu.send('stand', 'stood ')
    if policy_diag(stack.diags).get('mode') == 'running':
        return
    policy = next(n for n in nodes if n.kind == 'policy')
    req = SetBool.Request()
    req.data = True
    stack.client.call(SetBool, f'{policy.fqn}/enable', req)
    wait_for_policy(stack, timeout_s)


def run_locomotion_real(s: Any, env: Mapping[str, str], log: Callable[[str], None] = print
                        ) -> dict[str, Any]:
    """MuJoCo in-process, then the virtual legged robot over ROS; both side by side."""
    from geometry_msgs.msg import Twist

    from simreal_ros.bringup.planner import plan
    from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
    from simreal_ros.jobs.eval import DIAG_KEYS, EvalStack, plan_args, policy_diag, wait_for_policy
    spec = load_policy_spec(s.policy)
    check_real(s, spec.robot)
    plan({**plan_args(s), 'imu_port': '/dev/null'})  # the planner's refusals come first
    tick_s = 1.0 / spec.control_rate_hz
    t0 = time.monotonic()
    ref_engine = s.engine  # --engine: the in-process reference (MuJoCo unless asked)
    log(f'{spec.name} on {ref_engine} (in-process reference): {s.episodes} episodes of '
        f'{s.episode_s:g} s, pushes up to {s.push_force_n:g} N')
    ref = evaluate(spec, network_policy(spec), ref_engine, s.episodes, s.seed, s.episode_s,
                   s.push_force_n, log)
    episodes: list[dict[str, Any]] = []
    with contextlib.ExitStack() as res:
        tmp = Path(res.enter_context(tempfile.TemporaryDirectory(prefix='simreal_legged_')))
        emu = res.enter_context(EmulatorProcess(
            link=tmp / 'ttyBUS', robot=spec.robot, reality=s.reality, imu_link=tmp / 'ttyIMU',
            seed=s.seed, env=dict(env), world=True,
            # the device set to the rate imu_rate:= tells the driver, as on hardware
            imu_rate_hz=float(s.launch_args.get('imu_rate', 0) or 0)))
        nodes = plan({**plan_args(s, port=emu.port), 'imu_port': str(tmp / 'ttyIMU')})
        stack = res.enter_context(EvalStack(nodes, env, '', log))
        wait_for_policy(stack, s.start_timeout_s)
        pub = stack.client.publisher(Twist, 'cmd_vel')
        emu.send(f'truth {spec.control_rate_hz:g}', 'streaming truth ')
        truth = TruthReader(emu)
        log(f'{spec.name} running on the virtual {spec.robot} (reality '
            f'{s.reality or "nominal"}): {s.episodes} episodes of {s.episode_s:g} s')
        stand_ups = 0
        for k in range(s.episodes):
            ep = real_episode(stack, pub, emu, truth, spec, k, s.seed, s.episode_s, s.push_force_n,
                              tick_s)
            episodes.append(ep)
            log(f'  real episode {k + 1}/{s.episodes}: '
                + (f'fell at {ep["fall_time_s"]:.1f} s' if ep['fall'] else 'no fall')
                + f', tracking error {ep["velocity_tracking_error_mps"]:.3f} m/s, '
                f'{ep["distance_m"]:.1f} m, {ep["pushes"]} pushes, physics at '
                f'{ep["realtime_factor"]:.0%} of real time')
            if ep['fall'] and k + 1 < s.episodes:
                stand_up(stack, emu, nodes, s.start_timeout_s)
                stand_ups += 1
                log('  stood the virtual robot up again')
        diag = policy_diag(stack.diags)
    metrics = summarize(episodes)
    metrics['stand_ups'] = stand_ups
    rtf = [e['realtime_factor'] for e in episodes if not math.isnan(e['realtime_factor'])]
    metrics['realtime_factor'] = float(np.mean(rtf)) if rtf else float('nan')
    by = {ref_engine: ref['metrics'], 'real': metrics}
    return {'settings': asdict(s), 'metrics': metrics, 'episodes': episodes,
            'by_engine': by, 'episodes_by_engine': {ref_engine: ref['episodes'],
                                                    'real': episodes},
            'real_vs_sim': {'reference': ref_engine, 'other': 'real',
                            **ratios(ref['metrics'], metrics)},
            'ground_truth': "the emulator's hidden world (a real robot has no odometry)",
            'policy_diagnostics': {k: diag.get(k) for k in DIAG_KEYS},
            'wall_time_s': time.monotonic() - t0}
