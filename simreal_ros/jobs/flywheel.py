"""``simreal demo``: the sim-to-real flywheel, end to end, on the virtual servo bus.

One run, no hardware, no arguments; every output under one run folder::

    1 fit data       virtual servo bus (hidden reality) + Dynamixel driver + latency injector,
                     ``pattern:=sysid`` excitation recorded to ``bags/fit``
    2 held-out data  a second, different excitation (``multisine``, another seed) on the same
                     virtual arm, recorded to ``bags/holdout``
    3 identify       ``simreal sysid`` on the fit bag -> ``identified.yaml`` (a model overlay)
    4 replay gap     the held-out commands replayed open loop on the nominal sim and on the
                     identified sim from the measured initial state, against the virtual arm:
                     RMSE per joint, before (nominal) and after (identified)
    5 policy gap     the example policy on the nominal sim, the identified sim
                     (``overlay:=identified.yaml``) and the virtual arm, same seeded episodes:
                     success, time to goal, final error; the gap before and after
    6 residual       ``simreal residual fit`` on the fit bag against ``identified.yaml`` ->
                     ``residual.pt`` and ``identified_residual.yaml`` (the overlay naming it),
                     scored on the held-out bag: k-step (0.2 s) and open-loop RMSE, identified
                     sim against identified sim + residual. It **pays off** when the k-step
                     RMSE is at most ``RESIDUAL_KSTEP_MAX`` (70 %) of the identified sim's and
                     the open loop is not worse; then the policy also runs on the corrected sim
                     and the summary recommends ``identified_residual.yaml``, otherwise
                     ``identified.yaml``
    7 summary        ``summary.json``, ``summary.html`` (one page, PNGs embedded) and a
                     terminal table of at most 100 columns

Robots (``--robot``, :data:`ROBOT_DEFAULTS`): simreal_arm on the Dynamixel bus (default), and
so101 on the Feetech STS bus with its own reality (``so101_reality``), kp identified too, no
tool mass, and stage 5 skipped with its reason (no policy for it yet).

Comparison window. The virtual arm is unpowered until the driver enables torque and sags under
gravity meanwhile (measured: the shoulder at 1.80 rad against 0.40 rad at home), and the first
command of an excitation pulls it back to home within ~0.5 s (measured: shoulder error 1.31 rad
at 0.1 s, 0.08 rad at 0.4 s after the first command). Comparing from a sim started at home
turns that start-up into a fake dynamics gap. So the replay starts from the *measured* state
and covers the excitation window only: from ``settle_s`` (default 1.0 s, the excitation's
fade-in) after the first command to the last command, on the ``joint_commands`` header stamps.
The window (ns, bag clock, :func:`simreal_ros.jobs.excitation.window_of`) is written into every
report.

Ctrl-C (or SIGTERM) at any stage stops every child process (the emulator, the nodes) and
exits 130; the run folder keeps what was written so far. The run folder must not exist or be
empty: the demo never overwrites.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
import json
import math
from pathlib import Path
import signal
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Mapping

from simreal_ros.bringup.plan_realtime import EMULATOR_RT_PRIORITY
from simreal_ros.core.realtime import read_thread
from simreal_ros.errors import SimrealError
from simreal_ros.jobs.excitation import Interrupted, record_undisturbed

if TYPE_CHECKING:
    pass

Log = Callable[[str], None]

#: The parameters the demo identifies (names of the ``simreal sysid --fit`` list) and the
#: bodies whose mass it fits: the tool flange, where a heavier tool is the common real case.
#: The backlash too: the virtual arm has one, and unmodelled it biased the damping (SO-101:
#: median damping error 36 % without it in the fit, docs/demo.md).
FIT_PARAMETERS = ('damping', 'frictionloss', 'armature', 'command_delay', 'mass', 'backlash')
FIT_BODIES = ('wrist_flange_link',)

#: What the demo runs per robot (``simreal demo --robot``): the hidden reality, the parameters
#: it identifies, the bodies whose mass it fits and the policy of stage 5 ('' = none, the stage
#: is skipped with the reason). The SO-101's set is MuJoCo Playground's for that arm: damping,
#: frictionloss, armature and kp per joint plus the command delay (no tool to weigh), and the
#: backlash of its reality (one play for all joints).
ROBOT_DEFAULTS: dict[str, dict[str, Any]] = {
    'simreal_arm': {},
    'so101': {'reality': 'so101_reality',
              'fit': ('damping', 'frictionloss', 'armature', 'kp', 'command_delay',
                      'backlash'),
              'bodies': (), 'policy': 'so101_reach'},
}
#: Why stage 5 is skipped for a robot without a policy.
NO_POLICY = 'no reach policy for {robot} yet'

#: Layout of a run folder (relative paths), written into summary.json.
LAYOUT = {
    'fit_bag': 'bags/fit', 'holdout_bag': 'bags/holdout', 'overlay': 'identified.yaml',
    'identify': 'reports/identify.json', 'replay_nominal': 'reports/replay_nominal.json',
    'replay_identified': 'reports/replay_identified.json',
    'eval_nominal': 'reports/eval_nominal_sim.json',
    'eval_identified': 'reports/eval_identified_sim.json',
    'eval_real': 'reports/eval_virtual_arm.json', 'residual': 'residual.pt',
    'residual_overlay': 'identified_residual.yaml', 'residual_fit': 'reports/residual_fit.json',
    'replay_residual': 'reports/replay_residual.json',
    'eval_residual': 'reports/eval_residual_sim.json', 'summary': 'summary.json',
    'html': 'summary.html', 'logs': 'logs', 'bus_trace': 'logs/bus_trace.txt',
}
#: What a run folder lacks when the residual does not pay off (the policy does not run on it).
ONLY_IF_RESIDUAL_PAYS_OFF = ('eval_residual',)

STAGES = 7
def _write_line(f: IO[str], line: str) -> None:
    """Append ``line`` to a log file and flush it (a killed run keeps what it logged)."""
    f.write(line + '\n')
    f.flush()


def _both(a: Log, b: Log, line: str) -> None:
    a(line)
    b(line)


def _positive(name: str, v: object, integer: bool = False) -> None:
    ok = not isinstance(v, bool) and isinstance(v, int if integer else (int, float)) \
        and math.isfinite(float(v)) and float(v) > 0  # type: ignore[arg-type,unused-ignore]
    if not ok:
        raise SimrealError(f'--{name.replace("_", "-")} {v!r}: expected '
                           + ('an integer >= 1' if integer else 'a finite number > 0'))


@dataclass(frozen=True)
class FlywheelSettings:
    """What ``simreal demo`` runs; validated on construction (errors name the option)."""

    robot: str = 'simreal_arm'
    reality: str = 'sysid_reality'
    latency: str = 'usb_serial'
    fit_pattern: str = 'sysid'
    fit_s: float = 30.0
    # 6 Hz, not the excitation's 2 Hz default: below the servo's bandwidth a damping error
    # and a delay error are the same phase lag (1 ms of delay = kp * 1 ms of damping, 20 %
    # on base_yaw), and at 2 Hz the fit traded 2 ms of delay for 20-39 % more damping at
    # equal cost; at 6 Hz every damping came back within 4 % (docs/sysid.md, what the fit
    # absorbs)
    fit_f_max_hz: float = 6.0
    holdout_pattern: str = 'multisine'
    holdout_s: float = 15.0
    fit: tuple[str, ...] = FIT_PARAMETERS
    bodies: tuple[str, ...] = FIT_BODIES
    policy: str = 'simreal_arm_reach'  # '': no policy, stage 5 is skipped
    episodes: int = 8
    seed: int = 0
    settle_s: float = 1.0

    def __post_init__(self) -> None:
        """Reject values no stage can use, before anything starts."""
        _positive('fit_s', self.fit_s)
        _positive('holdout_s', self.holdout_s)
        _positive('fit_f_max_hz', self.fit_f_max_hz)
        _positive('episodes', self.episodes, integer=True)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SimrealError(f'--seed {self.seed!r}: expected an integer >= 0')
        if not (isinstance(self.settle_s, (int, float)) and math.isfinite(self.settle_s)
                and 0 <= self.settle_s < self.holdout_s and self.settle_s < self.fit_s):
            raise SimrealError(f'--settle {self.settle_s!r}: expected a number >= 0 and '
                               f'shorter than both excitations')
        from simreal_ros.bringup.planner import EXCITE_PATTERNS
        for flag, pattern in (('--fit-pattern', self.fit_pattern),
                              ('--holdout-pattern', self.holdout_pattern)):
            if pattern not in EXCITE_PATTERNS:
                raise SimrealError(f'{flag} {pattern!r}: expected one of {EXCITE_PATTERNS}')
        if not self.fit:
            raise SimrealError('--fit: expected at least one parameter')

    @property
    def holdout_seed(self) -> int:
        """Seed of the held-out excitation: never the fit's."""
        return self.seed + 1


def default_settings(**overrides: Any) -> FlywheelSettings:
    """Return the embedded defaults, with the sysid excitation only if this version has it.

    ``robot`` (default simreal_arm) picks the robot's defaults (:data:`ROBOT_DEFAULTS`); the
    other overrides win over them.
    """
    from simreal_ros.bringup.planner import EXCITE_PATTERNS
    robot = overrides.get('robot') or 'simreal_arm'
    if robot not in ROBOT_DEFAULTS:
        raise SimrealError(f'--robot {robot!r}: expected one of {", ".join(ROBOT_DEFAULTS)} '
                           f'(the robots the demo has a hidden reality for)')
    base: dict[str, Any] = {'robot': robot, **ROBOT_DEFAULTS[robot]}
    if 'sysid' not in EXCITE_PATTERNS:  # before the identification excitation existed
        base['fit_pattern'] = 'chirp'
    return FlywheelSettings(**{**base, **{k: v for k, v in overrides.items()
                                          if v is not None}})


# -- stages -------------------------------------------------------------------------------


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM raises like Ctrl-C, so the ``with`` blocks stop the children on both."""
    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet(log_path: Path) -> Iterator[Callable[[str], None]]:
    """Send what is printed to stdout/stderr inside to ``log_path``; yield a line writer.

    The progress callback gets the real stdout through ``_Progress`` (bound at its creation).
    """
    import sys
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open('w', encoding='utf-8') as f, contextlib.redirect_stdout(f), \
            contextlib.redirect_stderr(f):
        yield lambda line: _write_line(f, line)
    sys.stdout.flush()


def _eval(s: FlywheelSettings, env: Mapping[str, str], backend: str,
          launch_args: dict[str, str], log_path: Path) -> dict[str, Any]:
    from simreal_ros.jobs.eval import EvalSettings, run_eval
    settings = EvalSettings(backend=backend, policy=s.policy, episodes=s.episodes, seed=s.seed,
                            launch_args={'latency': s.latency, **launch_args})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open('w', encoding='utf-8') as f:
        return run_eval(settings, env, log=lambda line: _write_line(f, line))


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=_json_default) + '\n', encoding='utf-8')


def _json_default(x: Any) -> Any:
    if hasattr(x, 'tolist'):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f'not JSON-able: {type(x).__name__}')


@dataclass
class _Progress:
    log: Log
    t0: float = field(default_factory=time.monotonic)

    def stage(self, k: int, text: str) -> None:
        self.log(f'[demo {k}/{STAGES} {time.monotonic() - self.t0:6.1f} s] {text}')

    def detail(self, text: str) -> None:
        self.log(f'             {text}')


def check_inputs(s: FlywheelSettings) -> None:
    """Load the reality, the robot and the policy once, so a bad name fails before a start."""
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    from simreal_ros.errors import ConfigError
    from simreal_ros.policy.spec import load_policy_spec
    for flag, load, value in (('--reality', load_overlay, s.reality),
                              ('--robot', load_robot, s.robot),
                              ('policy', load_policy_spec, s.policy)):
        if not value:  # no policy: stage 5 is skipped
            continue
        try:
            load(value)
        except ConfigError as exc:
            raise SimrealError(f'{flag} {value!r}: {exc}') from None
    robot = load_overlay(s.reality).robot
    if robot is not None and robot != s.robot:
        raise SimrealError(f'--reality {s.reality!r} is a reality of {robot}, not of '
                           f'{s.robot}; give --robot {robot} or a reality of {s.robot}')


def describe(s: FlywheelSettings) -> list[str]:
    """Return the lines of what :func:`run_flywheel` would do with ``s`` (``--dry-run``)."""
    from simreal_ros.core.robot import load_robot
    spec = load_robot(s.robot)
    band = ', '.join(f'{j.name} [{j.limits.lower:g}, {j.limits.upper:g}] rad, '
                     f'{j.limits.velocity:g} rad/s' for j in spec.joints)
    lines = [f'robot {s.robot} ({", ".join(spec.joint_names)}), hidden reality {s.reality!r}, '
             f'latency {s.latency!r}',
             f'1 fit data       {s.fit_pattern} excitation, {s.fit_s:g} s, up to '
             f"{s.fit_f_max_hz:g} Hz, within the spec's limits: {band}",
             f'2 held-out data  {s.holdout_pattern} excitation (seed {s.holdout_seed}), '
             f'{s.holdout_s:g} s',
             f'3 identify       {", ".join(s.fit)}'
             + (f' (masses of {", ".join(s.bodies)})' if s.bodies else ''),
             '4 replay gap     the held-out commands on the nominal and the identified sim',
             (f'5 policy gap     {s.policy}: {s.episodes} episodes on the nominal sim, the '
              f'identified sim and the virtual arm' if s.policy else
              f'5 policy gap     skipped: {NO_POLICY.format(robot=s.robot)}'),
             '6 residual       simreal residual fit on the fit bag, scored on the held-out bag',
             '7 summary        summary.json, summary.html, the table']
    return lines


def check_out_dir(out: Path) -> None:
    """Raise unless ``out`` is absent or an empty directory (the demo never overwrites)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SimrealError(f'--out {out} exists and is not empty; the demo never overwrites')


def write_residual_overlay(overlay: Path, residual: Path, out: Path) -> None:
    """Write ``out``: ``overlay``'s text plus ``residual:`` naming ``residual`` (same folder)."""
    text = overlay.read_text(encoding='utf-8').rstrip('\n')
    out.write_text(f'{text}\n# learned by simreal residual fit against the physics above; '
                   f'the sim adds it in every physics step\nresidual: {residual.name}\n',
                   encoding='utf-8')


def pipeline_of(trace: Path, bag: Path, s: FlywheelSettings,
                ident: Mapping[str, Any]) -> dict[str, Any]:
    """Return the fit bag's measured pipeline latency next to the fitted and servo delay.

    A servo-bus fit's delay holds the servo's own delay plus the pipeline the replay does not
    model (state sample to stamp, stamp to goal write): ``expected_delay_s`` is their sum.
    """
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    from simreal_ros.sysid.pipeline import measure
    out: dict[str, Any] = measure(trace, bag, load_robot(s.robot))
    fitted = next((float(r['estimate']) for r in ident.get('parameters', [])
                   if r['key'] == 'command_delay_s'), None)
    servo = float(load_overlay(s.reality).command_delay_s or 0.0)
    out['servo_delay_s'] = servo
    out['fitted_delay_s'] = fitted
    if 'unmodelled_ms' in out:
        out['expected_delay_s'] = servo + out['unmodelled_ms'] / 1e3
    return out


def fit_residual_stage(s: FlywheelSettings, paths: Mapping[str, Path],
                       windows: tuple[tuple[int, int], tuple[int, int]], log_path: Path,
                       p: _Progress) -> dict[str, Any]:
    """Fit the residual, write its overlay, score it on the held-out bag; return the record.

    ``windows`` are the fit bag's and the held-out bag's comparison windows (ns): the residual
    trains on the window the identification used and is scored on the replay's.

    The record is :func:`~simreal_ros.report.flywheel.residual_gap`'s; the fit's own
    summary and the held-out replay go to ``reports/``. Data the residual cannot be trained on
    (every window broken by a gap in the states) gives ``pays_off`` False and the reason, and
    the demo goes on with the identified overlay.
    """
    from simreal_ros.report import flywheel as report
    from simreal_ros.sysid import api as sysid
    from simreal_ros.sysid.data import SysidInputError
    from simreal_ros.sysid.residual_fit import fit_residual
    try:
        with _quiet(log_path) as note:
            fit = fit_residual([paths['fit_bag']], s.robot, paths['overlay'],
                               paths['residual'], seed=s.seed, window_ns=windows[0],
                               progress=lambda line: _both(note, p.detail, line))
    except SysidInputError as exc:
        p.detail(f'no residual: {exc}')
        return {'pays_off': False, 'reason': f'not fitted: {exc}'}
    _write_json(paths['residual_fit'], fit)
    write_residual_overlay(paths['overlay'], paths['residual'], paths['residual_overlay'])
    heldout = sysid.validate(paths['holdout_bag'], s.robot, str(paths['residual_overlay']),
                             horizons_s=(report.RESIDUAL_KSTEP_S,), window_ns=windows[1])
    _write_json(paths['replay_residual'], heldout)
    gap = report.residual_gap(fit, heldout)
    p.detail(report.one_line_residual(gap))
    return gap


def run_flywheel(s: FlywheelSettings, out: Path, env: Mapping[str, str],
                 log: Log | None = None) -> dict[str, Any]:
    """Run every stage; write the run folder ``out``; return the summary (also summary.json).

    ``log`` gets the progress lines (default: this process's stdout at the time of the call).
    """
    import os
    import sys
    stdout = sys.stdout
    log = log or (lambda line: print(line, file=stdout, flush=True))

    from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
    from simreal_ros.report import flywheel as report
    check_out_dir(out)
    check_inputs(s)
    os.environ.update(env)
    try:  # fails here, before anything starts
        from simreal_ros.sysid import api as sysid
    except ImportError as exc:
        raise SimrealError(f'this installation has no system identification ({exc})') from None
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / v for k, v in LAYOUT.items()}
    logs = paths['logs']
    logs.mkdir(parents=True, exist_ok=True)  # the emulator writes its trace there
    p = _Progress(log)
    summary: dict[str, Any] = {'settings': asdict(s), 'layout': LAYOUT}
    with _signals_raise(), contextlib.ExitStack() as stack:
        # the virtual arm is the demo's reality: its physics must keep up with the wall clock
        # as a real arm does (under the default scheduler, with a load average of 13 on the 2
        # cores, it slipped and the driver saw gaps of up to 2.5 s); where SCHED_FIFO is not
        # permitted the emulator warns once and runs on the default scheduler
        # the trace gives the true times of the bus's reads and goal writes: the pipeline
        # latency a servo-bus fit's delay holds (simreal_ros.sysid.pipeline)
        emu = stack.enter_context(EmulatorProcess(robot=s.robot, reality=s.reality,
                                                  seed=s.seed, env=dict(env),
                                                  rt_priority=EMULATOR_RT_PRIORITY,
                                                  trace=paths['bus_trace']))
        assert emu.proc is not None
        policy, priority, _cpus = read_thread(emu.proc.pid)
        rt = policy == 'SCHED_FIFO'
        p.stage(0, f'virtual servo bus on {emu.port} (pid {emu.proc.pid}, '
                   + (f'SCHED_FIFO {priority}' if rt else 'default scheduler')
                   + f'; nodes with realtime:=true); node output in {logs}')
        summary['emulator_sched_fifo'] = rt
        p.stage(1, f'fit data: {s.fit_pattern} excitation, {s.fit_s:g} s, on the virtual arm '
                   f'(reality {s.reality!r}, latency {s.latency!r})')
        summary['recordings'] = {}
        fit_window, summary['recordings']['fit'] = record_undisturbed(
            s, emu.port, s.fit_pattern, s.fit_s, s.seed, paths['fit_bag'], env,
            logs / 'record_fit.log', p.detail, s.fit_f_max_hz)
        summary['injector'] = report.injector_timing(paths['fit_bag'], s.latency)
        p.detail(report.one_line_injector(summary['injector']))
        p.stage(2, f'held-out data: {s.holdout_pattern} excitation (seed {s.holdout_seed}), '
                   f'{s.holdout_s:g} s')
        window, summary['recordings']['holdout'] = record_undisturbed(
            s, emu.port, s.holdout_pattern, s.holdout_s, s.holdout_seed,
            paths['holdout_bag'], env, logs / 'record_holdout.log', p.detail)
        summary['windows_ns'] = {'fit': list(fit_window), 'holdout': list(window)}
        p.stage(3, f'identify {", ".join(s.fit)} from the fit bag')
        t = time.monotonic()
        with _quiet(logs / 'identify.log') as note:  # the optimizer's own prints
            ident = sysid.identify(paths['fit_bag'], s.robot, list(s.fit), paths['overlay'],
                                   bodies=list(s.bodies) or None, window_ns=fit_window,
                                   progress=lambda line: _both(note, p.detail, line))
        summary['identify'] = {'wall_s': time.monotonic() - t, **ident}
        _write_json(paths['identify'], summary['identify'])
        summary['against_reality'] = report.against_reality(ident['parameters'], s.robot,
                                                            s.reality)
        p.detail('median error against the hidden reality: ' + ', '.join(
            f'{k} {v:.0%}' for k, v in summary['against_reality']['median_relative_error']
            .items()))
        summary['pipeline'] = pipeline_of(paths['bus_trace'], paths['fit_bag'], s, ident)
        p.detail(report.one_line_pipeline(summary['pipeline']))
        p.stage(4, 'replay the held-out commands on the nominal and the identified sim')
        before = sysid.validate(paths['holdout_bag'], s.robot, None, window_ns=window)
        _write_json(paths['replay_nominal'], before)
        after = sysid.validate(paths['holdout_bag'], s.robot, str(paths['overlay']),
                               window_ns=window)
        _write_json(paths['replay_identified'], after)
        summary['replay'] = report.replay_gap(before, after)
        p.detail(report.one_line_replay(summary['replay']))
        runs = {}
        evals: tuple[tuple[str, str, str, dict[str, str]], ...] = (
                ('eval_nominal', 'nominal sim', 'sim', {}),
                ('eval_identified', 'identified sim', 'sim',
                 {'overlay': str(paths['overlay'].resolve())}),
                ('eval_real', 'virtual arm', 'real', {'port': emu.port}))
        if not s.policy:
            p.stage(5, f'policy gap skipped: {NO_POLICY.format(robot=s.robot)}')
            evals = ()
        for key, label, backend, args in evals:
            p.stage(5, f'policy {s.policy}: {s.episodes} episodes on the {label}')
            runs[key] = _eval(s, env, backend, args, logs / f'{key}.log')
            _write_json(paths[key], runs[key])
            m = runs[key]['metrics']
            p.detail(f'{m["successes"]}/{m["episodes"]} reached, time to goal '
                     f'{m["time_to_goal_mean_s"]:.2f} s, final error '
                     f'{m["final_error_median_rad"]:.4f} rad')
        p.stage(6, 'learn a residual on the fit bag: what identified.yaml cannot express')
        summary['residual'] = fit_residual_stage(s, paths, (fit_window, window),
                                                 logs / 'residual.log', p)
        if summary['residual']['pays_off'] and s.policy:
            p.stage(6, f'policy {s.policy}: {s.episodes} episodes on the corrected sim '
                       f'(identified + residual)')
            runs['eval_residual'] = _eval(
                s, env, 'sim', {'overlay': str(paths['residual_overlay'].resolve())},
                logs / 'eval_residual.log')
            _write_json(paths['eval_residual'], runs['eval_residual'])
        summary['eval'] = (report.eval_gap(runs['eval_nominal'], runs['eval_identified'],
                                           runs['eval_real'], runs.get('eval_residual'))
                           if s.policy else {'skipped': NO_POLICY.format(robot=s.robot)})
    p.stage(7, 'summary')
    summary['wall_s'] = time.monotonic() - p.t0
    traces = report.replay_traces(
        paths['holdout_bag'], s.robot, paths['overlay'], window,
        paths['residual_overlay'] if summary['residual']['pays_off'] else None)
    summary['figures'] = report.write_html(summary, traces, paths['html'])
    _write_json(paths['summary'], summary)
    return summary
