"""Shared by the timing benchmarks: ``--load N`` CPU hogs and the ``--rt`` harness.

:func:`cpu_load` starts N CPU-bound processes for the duration of a ``with`` block and stops
them after; each is put on the default scheduler in the child before it runs (a child inherits
its parent's policy: FIFO busy loops would take the machine, not load it). :func:`variants` is
what every timing benchmark measures: ``default`` (the nodes on the default scheduler), and
with ``rt`` also ``rt`` (the nodes' ``rt_priority`` set), side by side in the same run under
the same load.

With ``--rt`` the benchmark's source process raises only its publishing thread to
SCHED_FIFO :data:`HARNESS_PRIORITY` (below every node), after rclpy has started its own
threads, so no other thread of it inherits the priority (:func:`helper_rt_from_env`). The
benchmark process itself stays on the default scheduler. (An earlier version raised the whole
benchmark process, whose load processes and node processes then inherited SCHED_FIFO.)
"""

from __future__ import annotations

from contextlib import contextmanager
import os
import subprocess
import sys
from typing import Any, Iterator

from simreal_ros.core.realtime import RtSettings, apply_to_current_thread

HARNESS_PRIORITY = 60
HOG = 'while True: pass'


def _default_scheduler() -> None:
    """In a child before exec: SCHED_OTHER whatever the parent thread runs under."""
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """Run ``n`` CPU-bound processes while the block runs."""
    procs = [subprocess.Popen([sys.executable, '-c', HOG], stdin=subprocess.DEVNULL,
                              preexec_fn=_default_scheduler)
             for _ in range(max(0, n))]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def variants(rt: bool) -> list[str]:
    """The scheduler variants a benchmark measures."""
    return ['default', 'rt'] if rt else ['default']


def harness(on: bool) -> dict[str, Any]:
    """What the measuring side runs under (reported with the figures)."""
    return {'source_publishing_thread': f'SCHED_FIFO {HARNESS_PRIORITY}' if on
            else 'SCHED_OTHER', 'benchmark_process': 'SCHED_OTHER'}


def env_rt(env: dict[str, str], on: bool) -> dict[str, str]:
    """Environment that makes a benchmark helper process run as the harness (see _source)."""
    return {**env, 'SIMREAL_BENCH_RT': str(HARNESS_PRIORITY if on else 0)}


def helper_rt_from_env() -> None:
    """In a helper process: raise the calling thread (only) to ``SIMREAL_BENCH_RT``.

    Call it after rclpy created its threads: they must not inherit the priority.
    """
    prio = int(os.environ.get('SIMREAL_BENCH_RT', '0') or 0)
    if prio > 0:
        apply_to_current_thread(RtSettings(prio), 'harness')


def context(load: int, rt: bool) -> dict[str, Any]:
    """What every timing benchmark reports about how it ran."""
    return {'load_processes': load, 'rt_compared': rt, 'cpu_count': os.cpu_count(),
            'load_average_1min_at_start': os.getloadavg()[0]}


def steal_ms() -> list[float]:
    """Time the hypervisor took each CPU away (``steal`` of /proc/stat), ms since boot.

    On a virtual machine the host can deschedule a vCPU outright; no guest scheduler can
    help then (measured here: ~100 ms bursts, 17 in a minute).
    """
    tick_ms = 1000.0 / os.sysconf('SC_CLK_TCK')
    with open('/proc/stat', encoding='ascii') as f:
        return [int(line.split()[8]) * tick_ms for line in f
                if line.startswith('cpu') and line[3].isdigit()]


def steal_since(before: list[float]) -> list[float]:
    """Steal per CPU (ms) since ``before`` (a :func:`steal_ms` reading)."""
    return [round(a - b, 1) for a, b in zip(steal_ms(), before, strict=True)]


def ratio(a: float, b: float) -> float:
    """``a / b`` (nan when b is 0)."""
    return a / b if b else float('nan')
