"""Recording an excitation on the virtual arm, and the window a comparison covers.

:func:`record` runs one excitation through the Dynamixel (or STS) driver and the latency
injector against a virtual arm, recorded into a bag; :func:`record_undisturbed` replaces a
recording whose comparison window holds a host stall. :func:`window_of` is the comparison
window of such a bag: from ``settle_s`` after the first command, or once the arm is back from
its start-up sag, or once the relayed commands sysid replays are recorded (the latest of the
three), to the last command. The flywheel (:mod:`simreal_ros.jobs.flywheel`), sysid's tests
and the bag array tests use them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
import signal
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from simreal_ros.errors import LaunchError, SimrealError

if TYPE_CHECKING:
    from simreal_ros.gap.episode import Episode

Log = Callable[[str], None]


class RecordingSettings(Protocol):
    """What a recording needs of the run's settings (the flywheel's ``FlywheelSettings``)."""

    @property
    def robot(self) -> str: ...  # noqa: D102 - the robot spec's name or file
    @property
    def latency(self) -> str: ...  # noqa: D102 - the latency preset between driver and policy
    @property
    def settle_s(self) -> float: ...  # noqa: D102 - see window_of

#: The arm has recovered from its start-up sag when every joint is this close to the command.
RECOVERED_RAD = 0.2
#: Shortest comparison window (ns).
MIN_WINDOW_NS = 3_000_000_000
#: Recordings a stage makes at most while the host stalls them (the last one is kept).
RECORD_TRIES = 3
#: How long an excitation waits for the driver's states and its subscribers (s).
EXCITE_WAIT_S = 90.0



class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM arrived; every child process has been stopped."""


def launch_plan(nodes: Sequence[Any], env: Mapping[str, str], log_path: Path) -> None:
    """Run a plan to completion with its output in ``log_path``; raise on failure or signal."""
    from simreal_ros.bringup.launcher import Launcher
    log_path.parent.mkdir(parents=True, exist_ok=True)
    received: list[str] = []
    with log_path.open('w', encoding='utf-8') as f:
        def echo(line: str) -> None:
            f.write(line + '\n')
            f.flush()

        launcher = Launcher(nodes, env, echo=echo)

        def handler(signum: int, _frame: object) -> None:
            received.append(signal.Signals(signum).name)
            launcher.request_stop(f'received {received[-1]}')

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT,
                                                                 signal.SIGTERM)}
        try:
            launcher.start()
            code = launcher.wait()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
    if received:
        raise Interrupted(received[0])
    if code != 0:
        tail = log_path.read_text(encoding='utf-8').splitlines()[-8:]
        raise LaunchError(f'the recording stopped with code {code} (log: {log_path}):\n'
                          + '\n'.join(tail))


def excitation_window(bag: Path, settle_s: float,
                      names: Sequence[str] | None = None) -> tuple[int, int]:
    """Return the comparison window (ns, bag clock) of an excitation bag (:func:`window_of`)."""
    return window_of(load_joint_topics(bag, names), settle_s)


def load_joint_topics(bag: Path, names: Sequence[str] | None = None) -> Episode:
    """Read every JointState topic of ``bag`` in one pass (``names``: the robot's joints)."""
    from simreal_ros.bag import BagReader
    from simreal_ros.bag.arrays import JOINT_STATE
    from simreal_ros.gap.episode import load_episode
    with BagReader(bag) as reader:
        topics = [t for t, (kind, _n) in reader.info.topics.items() if kind == JOINT_STATE]
    return load_episode(str(bag), topics=topics, names=names)


def window_of(ep: Episode, settle_s: float) -> tuple[int, int]:
    """Return the comparison window (ns, bag clock) of an excitation episode.

    It ends at the last command and starts ``settle_s`` after the first command, or later:
    when the arm is first back within :data:`RECOVERED_RAD` of the command on every joint (the
    sag recovery took 0.4 s on a quiet machine and 3 s with a load average of 13 on the
    2 cores). Times are header stamps: commands of the undelayed ``/joint_commands``, states
    of the driver's own ``/backend/joint_states``; and it starts no earlier than the first
    ``/backend/joint_commands`` (the relayed commands sysid replays) by bag time, as sysid
    reads them, so sysid's data cover exactly this window. ``ep`` holds at least those
    three topics where the bag has them (:func:`load_joint_topics`). Every stream is read by
    the rules of :mod:`simreal_ros.bag.arrays`, as sysid reads them: usable messages only, in
    time order, the first of equal times kept.
    """
    import numpy as np

    bag = ep.info.path
    # sysid reads the relayed commands by bag time (when the driver got them, the injector's
    # delay after their stamp), so the window starts at that time too: from the header stamp
    # it began 4.06 ms before sysid's data in one run where the recorder found the topic late
    relayed = ep.joints.get('/backend/joint_commands')
    first_relayed = (int(relayed.arrays.in_time_order('receive').receive_ns[0])
                     if relayed is not None and len(relayed.stamps) else None)
    cmd_stream = ep.joints.get('/joint_commands')
    st_stream = ep.joints.get('/backend/joint_states')
    if cmd_stream is None or st_stream is None:
        raise SimrealError(f'{bag}: the recording has no joint_commands or no joint_states')
    st = st_stream.arrays.in_time_order('stamp')
    try:
        cmd = cmd_stream.arrays.select(st.names).in_time_order('stamp')
    except SimrealError as exc:
        raise SimrealError(f'{bag}: {exc}') from None
    if len(cmd) < 2 or len(st) < 2:
        raise SimrealError(f'{bag}: the recording has no joint_commands or no joint_states')
    c_ns, c_pos = cmd.stamp_ns, cmd.position
    s_ns, s_pos = st.stamp_ns, st.position
    start = int(c_ns[0]) + int(round(settle_s * 1e9))
    after = s_ns >= c_ns[0]
    held = np.searchsorted(c_ns, s_ns, side='right') - 1  # command in force at each state
    err = np.max(np.abs(s_pos - c_pos[np.maximum(held, 0)]), axis=1)
    back = np.nonzero(after & (err < RECOVERED_RAD))[0]
    if back.size:
        start = max(start, int(s_ns[back[0]]))
    # sysid replays the commands the driver got (after the injector); the recorder finds that
    # topic by polling the graph once the injector has seen the excitation, 1.3 s after the
    # first command in one run at load average 6: the window starts where both are recorded
    if first_relayed is not None:
        start = max(start, first_relayed)
    end = int(c_ns[-1])
    if start >= end - MIN_WINDOW_NS:
        raise SimrealError(f'{bag}: less than {MIN_WINDOW_NS / 1e9:g} s of the excitation '
                           f'remain after the start-up; record longer (--fit-s/--holdout-s)')
    return start, end


def record(s: RecordingSettings, port: str, pattern: str, duration_s: float, seed: int,
           bag: Path, env: Mapping[str, str], log_path: Path,
           f_max_hz: float | None = None) -> None:
    """Record one excitation through driver and injector on the virtual arm into ``bag``.

    ``f_max_hz``: the excitation's highest frequency (default: the excitation's own).
    """
    from simreal_ros.bringup.planner import plan
    bag.parent.mkdir(parents=True, exist_ok=True)
    nodes = plan({'backend': 'real', 'robot': s.robot, 'port': port, 'latency': s.latency,
                  'excite': pattern, 'duration': f'{duration_s:g}', 'seed': str(seed),
                  'record': 'true', 'bag': str(bag), 'realtime': 'true'})
    # the excitation waits for the driver's states and every subscriber before its first
    # command; its default 15 s ran out once with a load average of 26 on the 2 cores (driver
    # up after 25 s) and it started blind, so the demo gives it longer
    extra: dict[str, Any] = {'wait_timeout_s': EXCITE_WAIT_S}
    if f_max_hz is not None:
        extra['f_max_hz'] = float(f_max_hz)
    nodes = [replace(n, parameters={**n.parameters, **extra})
             if n.kind == 'excite' else n for n in nodes]
    launch_plan(nodes, env, log_path)
    if not (bag / 'metadata.yaml').is_file():
        raise LaunchError(f'the recorder wrote no bag at {bag} (log: {log_path})')


def record_undisturbed(s: RecordingSettings, port: str, pattern: str, duration_s: float,
                       seed: int, bag: Path, env: Mapping[str, str], log_path: Path,
                       note: Log, f_max_hz: float | None = None
                       ) -> tuple[tuple[int, int], dict[str, Any]]:
    """Record like :func:`record`, again while the host stalled it; return (window, record).

    A recording whose comparison window holds a host stall (:mod:`simreal_ros.gap.host_stalls`)
    is replaced, up to :data:`RECORD_TRIES` recordings in all; the last one is kept either way.
    The record says how many were made (``tries``) and the stalls of each, one line per stall
    (``stalls``; the last entry is the kept recording's, empty when it is clean). ``note`` gets
    a line per stall found.
    """
    import shutil

    from simreal_ros.core.robot import load_robot
    from simreal_ros.gap.host_stalls import find_stalls
    tries: list[list[str]] = []
    while True:
        path = log_path if not tries else log_path.with_name(
            f'{log_path.stem}_{len(tries) + 1}{log_path.suffix}')
        record(s, port, pattern, duration_s, seed, bag, env, path, f_max_hz)
        ep = load_joint_topics(bag, load_robot(s.robot).joint_names)
        window = window_of(ep, s.settle_s)
        stalls = [x.text(window[0]) for x in find_stalls(ep, window)]
        tries.append(stalls)
        if not stalls or len(tries) == RECORD_TRIES:
            break
        note(f'host stall, recording again: {stalls[0]}')
        shutil.rmtree(bag)
    if stalls:
        note(f'host stall kept after {RECORD_TRIES} recordings: {"; ".join(stalls)}')
    return window, {'tries': len(tries), 'stalls': tries}
