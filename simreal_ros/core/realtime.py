"""Real-time scheduling of one thread: SCHED_FIFO priority, CPU affinity, locked memory.

Pure Python (``os`` and ``ctypes``), no ROS. A node calls :func:`apply_to_current_thread` at
the start of its timing-critical thread with the :class:`RtSettings` built from its
``rt_priority`` / ``cpu_affinity`` parameters; the returned :class:`ThreadRt` is what the
kernel really applied, read back per thread (``sched_getscheduler`` / ``sched_getparam`` /
``sched_getaffinity`` on the native thread id), and goes into the node's diagnostics.

Without the permission (no ``CAP_SYS_NICE`` and ``RLIMIT_RTPRIO`` 0) the thread keeps the
default scheduler and the first failure in the process carries :data:`GRANT_HINT` (one WARN per
process, naming how to grant it); the node runs on normally.

Safety rules for code that runs under SCHED_FIFO (the kernel's RT throttling, 950 ms of each
second, stays on as the last resort):

* never busy-wait without a bound: :func:`sleep_until_ns` spins at most ``spin_ns`` (capped at
  :data:`MAX_SPIN_NS`) and sleeps for the rest, so a wrong deadline costs a sleep, not a CPU;
* every RT loop beats a :class:`Heartbeat`, which the node's diagnostics (on the executor
  thread, default scheduler) turn into ERROR when the loop stops beating.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
import errno
import os
import threading
import time
from typing import Callable

from simreal_ros.errors import ConfigError

#: Highest SCHED_FIFO priority a node may ask for. 99 is left to the kernel's own threads
#: (migration, watchdog) so that a runaway node thread can never preempt them.
MAX_PRIORITY = 98
#: Longest busy-wait of one :func:`sleep_until_ns` call. A 500 Hz loop with a 0.3 ms spin uses
#: 15 % of a CPU in the spin; 2 ms would be a whole period, so the cap is well below it.
MAX_SPIN_NS = 1_000_000
PR_SET_TIMERSLACK = 29
MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT = 1, 2, 4

GRANT_HINT = (
    'grant real-time scheduling with one of: an rtprio limit (a line "<user> - rtprio 98" in '
    '/etc/security/limits.d/99-realtime.conf, then log in again; check with ulimit -r), '
    'the capability on the interpreter (sudo setcap cap_sys_nice+ep '
    '"$(readlink -f "$(command -v python3)")"), or in a container docker run '
    '--cap-add=SYS_NICE --ulimit rtprio=98')

_warned = False
_warn_lock = threading.Lock()


@dataclass(frozen=True)
class RtSettings:
    """What a timing-critical thread asks for.

    * ``priority``: SCHED_FIFO priority 1..98; 0 = keep the default scheduler (SCHED_OTHER).
    * ``cpus``: CPUs the thread may run on; () = leave the affinity as it is.
    * ``lock_memory``: ``mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)`` for the whole
      process: pages once touched are never reclaimed (no page-in on the hot path), at the
      cost of pinning the process's resident memory.
    """

    priority: int = 0
    cpus: tuple[int, ...] = ()
    lock_memory: bool = False

    @property
    def enabled(self) -> bool:
        """Whether anything is asked of the scheduler."""
        return self.priority > 0 or bool(self.cpus) or self.lock_memory


def check_priority(value: object, source: str, key: str = 'rt_priority') -> int:
    """Return ``value`` as a priority in [0, 98] or raise :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PRIORITY:
        raise ConfigError(source, key, f'an integer in [0, {MAX_PRIORITY}] (0 = default '
                          f'scheduler, 1..{MAX_PRIORITY} = SCHED_FIFO priority)', value)
    return value


def parse_cpus(value: object, source: str, key: str = 'cpu_affinity',
               cpu_count: int | None = None) -> tuple[int, ...]:
    """Parse ``''`` (no change), ``'1'``, ``'0,1'`` or ``'0-3'`` into sorted CPU numbers.

    CPUs that this machine does not have are a :class:`ConfigError` (``cpu_count`` defaults to
    ``os.cpu_count()``).
    """
    expected = 'CPU numbers such as "1", "0,1" or "0-3" ("" = no change)'
    if not isinstance(value, str):
        raise ConfigError(source, key, expected, value)
    text = value.strip()
    if not text:
        return ()
    n = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    cpus: set[int] = set()
    for part in text.split(','):
        lo, sep, hi = part.strip().partition('-')
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ConfigError(source, key, expected, value) from None
        if first < 0 or last < first:
            raise ConfigError(source, key, expected, value)
        if last >= n:
            raise ConfigError(source, key, f'CPUs in 0..{n - 1} (this machine has {n})', value)
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def settings_from(priority: object, cpus: object, source: str, lock_memory: object = False,
                  prefix: str = '') -> RtSettings:
    """Validate node parameters ``<prefix>rt_priority`` / ``<prefix>cpu_affinity``."""
    if not isinstance(lock_memory, bool):
        raise ConfigError(source, 'lock_memory', 'true or false', lock_memory)
    return RtSettings(check_priority(priority, source, f'{prefix}rt_priority'),
                      parse_cpus(cpus, source, f'{prefix}cpu_affinity'), lock_memory)


@dataclass
class ThreadRt:
    """What one thread asked for and what the kernel says it got (read back)."""

    thread: str
    tid: int
    asked: RtSettings
    policy: str = 'SCHED_OTHER'
    priority: int = 0
    cpus: tuple[int, ...] = ()
    memory_locked: bool = False
    errors: list[str] = field(default_factory=list)
    #: set on the first refusal in the process only: the node logs it as its one WARN
    warning: str = ''

    @property
    def applied(self) -> bool:
        """Whether every part of the request took effect."""
        return not self.errors

    def values(self, prefix: str = 'rt.') -> dict[str, object]:
        """Diagnostic key/values of this thread (``rt.<thread>.policy`` ...)."""
        p = f'{prefix}{self.thread}.'
        return {f'{p}tid': self.tid, f'{p}policy': self.policy, f'{p}priority': self.priority,
                f'{p}asked_priority': self.asked.priority,
                f'{p}cpus': ','.join(map(str, self.cpus)),
                f'{p}memory_locked': self.memory_locked,
                f'{p}error': '; '.join(self.errors)}


_POLICIES = {getattr(os, n): n for n in ('SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH',
                                         'SCHED_IDLE') if hasattr(os, n)}


def read_thread(tid: int) -> tuple[str, int, tuple[int, ...]]:
    """Return (policy name, priority, CPUs) of native thread ``tid`` as the kernel has them."""
    policy = os.sched_getscheduler(tid)
    return (_POLICIES.get(policy, str(policy)), os.sched_getparam(tid).sched_priority,
            tuple(sorted(os.sched_getaffinity(tid))))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def precise_sleeps() -> None:
    """Set the calling thread's timer slack to 1 ns (default 50 us): sleeps end on time."""
    try:
        _libc().prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def lock_memory() -> str:
    """Lock the process's pages in RAM; return '' or the reason it failed.

    ``MCL_ONFAULT`` (Linux >= 4.4) locks pages as they are touched instead of faulting in
    every mapping at once: measured here, the injector stays at its 74 MB resident set
    instead of growing to 327 MB (the reserved stacks and arenas faulted in), with the same
    (no measurable) effect on its lateness. Older kernels get ``MCL_CURRENT | MCL_FUTURE``.
    """
    libc = _libc()
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0:
        return ''
    if ctypes.get_errno() == errno.EINVAL and libc.mlockall(MCL_CURRENT | MCL_FUTURE) == 0:
        return ''
    return f'mlockall: {os.strerror(ctypes.get_errno())}'


def _memory_locked() -> bool:
    try:
        with open('/proc/self/status', encoding='ascii') as f:
            for line in f:
                if line.startswith('VmLck:'):
                    return int(line.split()[1]) > 0
    except OSError:
        pass
    return False


def apply_to_current_thread(settings: RtSettings, thread: str) -> ThreadRt:
    """Apply ``settings`` to the calling thread and read back what the kernel applied.

    Never raises for a refusal: each one lands in ``errors``; the first refusal for want of
    permission in the process also sets ``warning`` (with :data:`GRANT_HINT`), later ones
    do not, so a node with several RT threads warns once.
    """
    global _warned
    tid = threading.get_native_id()
    out = ThreadRt(thread, tid, settings)
    denied = False
    precise_sleeps()
    if settings.cpus:
        try:
            os.sched_setaffinity(0, settings.cpus)      # 0: the calling thread
        except OSError as exc:
            out.errors.append(f'cpu_affinity {settings.cpus}: {exc.strerror}')
    if settings.priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(settings.priority))
        except OSError as exc:
            denied |= exc.errno == errno.EPERM
            out.errors.append(f'rt_priority {settings.priority}: {exc.strerror}')
    if settings.lock_memory:
        why = lock_memory()
        if why:
            denied |= 'not permitted' in why or 'allocate memory' in why
            out.errors.append(why)
    out.policy, out.priority, out.cpus = read_thread(tid)
    out.memory_locked = _memory_locked()
    if denied:
        with _warn_lock:
            if not _warned:
                _warned = True
                out.warning = (f'{thread} thread: {"; ".join(out.errors)}; running on the '
                               f'default scheduler. To {GRANT_HINT}.')
    return out


def process_threads(pid: int | str = 'self') -> dict[int, str]:
    """Return {native thread id: name} of every thread of a process (``/proc/<pid>/task``)."""
    out: dict[int, str] = {}
    task = f'/proc/{pid}/task'
    for entry in os.listdir(task):
        try:
            with open(f'{task}/{entry}/comm', encoding='utf-8', errors='replace') as f:
                out[int(entry)] = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
    return out


def apply_to_threads(settings: RtSettings, tids: list[int], thread: str) -> ThreadRt:
    """Apply priority and affinity of ``settings`` to other threads of this process.

    For threads this code does not run, e.g. the middleware's receive threads, which rclpy
    creates before any node code runs. Read back and reported like
    :func:`apply_to_current_thread` (``tid`` is the first thread; errors name each thread).
    """
    global _warned
    out = ThreadRt(thread, tids[0] if tids else 0, settings)
    denied = False
    for tid in tids:
        try:
            if settings.cpus:
                os.sched_setaffinity(tid, settings.cpus)
            if settings.priority > 0:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(settings.priority))
        except ProcessLookupError:
            continue
        except OSError as exc:
            denied |= exc.errno == errno.EPERM
            out.errors.append(f'thread {tid}: rt_priority {settings.priority}: {exc.strerror}')
            break
    if tids:
        try:
            out.policy, out.priority, out.cpus = read_thread(tids[0])
        except OSError:
            pass
    if denied:
        with _warn_lock:
            if not _warned:
                _warned = True
                out.warning = (f'{thread} threads: {out.errors[0]}; running on the default '
                               f'scheduler. To {GRANT_HINT}.')
    return out


def sleep_until_ns(deadline_ns: int, spin_ns: int,
                   clock: Callable[[], int] = time.monotonic_ns) -> int:
    """Sleep until ``spin_ns`` before ``deadline_ns`` on ``clock``, then busy-wait to it.

    The spin is bounded: at most ``min(spin_ns, MAX_SPIN_NS)`` of busy-waiting per call, so a
    deadline far ahead (or a clock that jumped) is slept through, never spun through, and a
    SCHED_FIFO caller cannot monopolise its CPU here. Returns ``clock()`` at the end.
    """
    spin = min(max(0, spin_ns), MAX_SPIN_NS)
    while True:
        now = clock()
        ahead = deadline_ns - now
        if ahead <= 0:
            return now
        if ahead > spin:
            time.sleep((ahead - spin) / 1e9)
            continue
        limit = now + spin
        while now < deadline_ns and now <= limit:
            now = clock()
        if now >= deadline_ns:
            return now


class Heartbeat:
    """Liveness of a loop: the loop calls :meth:`beat`; a watcher asks :meth:`stalled_ns`.

    A watcher may not get to run while the loop is wedged: a wedge that holds the GIL (a C
    extension, e.g. a TorchScript call that never returns in time) blocks every thread of the
    process. So the loop also measures its own gaps: a beat after more than the timeout
    latches that gap, and the next :meth:`stalled_ns` reports it (once), after the fact.
    Thread-safe without a lock (ints written by one thread, read by others).
    """

    def __init__(self, timeout_ns: int, clock: Callable[[], int] = time.monotonic_ns) -> None:
        if timeout_ns <= 0:
            raise ValueError('timeout_ns must be > 0')
        self.timeout_ns = int(timeout_ns)
        self.clock = clock
        self.last_ns = clock()
        self.beats = 0
        self.latched_gap_ns = 0
        self.stalls = 0

    def beat(self) -> None:
        """Mark the loop alive now."""
        now = self.clock()
        gap = now - self.last_ns
        if gap > self.timeout_ns and self.beats:   # not the start-up before the first beat
            self.latched_gap_ns = max(self.latched_gap_ns, gap)
            self.stalls += 1
        self.last_ns = now
        self.beats += 1

    def age_ns(self) -> int:
        """Time since the last beat."""
        return self.clock() - self.last_ns

    def stalled_ns(self) -> int:
        """How long the loop is (or was, since the last call) silent beyond the timeout.

        0 = alive; otherwise the current silence, or the longest past one not yet reported.
        """
        age = self.age_ns()
        latched, self.latched_gap_ns = self.latched_gap_ns, 0
        return max(age if age > self.timeout_ns else 0, latched)
