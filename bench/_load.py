"""Shared by the timing benchmarks: ``--load N`` CPU hogs and the ``--rt`` harness.

:func:`cpu_load` starts N CPU-bound processes (default scheduler, nice 0) for the duration of a
``with`` block and stops them after. :func:`variants` is what every timing benchmark measures:
``default`` (the nodes on the default scheduler), and with ``rt`` also ``rt`` (the nodes'
``rt_priority`` set), side by side in the same run under the same load.
:func:`harness_client` creates the benchmark's ROS client with its threads (the middleware's,
the client's executor) under SCHED_FIFO at :data:`HARNESS_PRIORITY`, below every node, so that
under load the measuring side is not what is measured; the main thread then goes back to the
default scheduler, so the node processes it starts do not inherit SCHED_FIFO (a child of a
FIFO thread is FIFO too: an earlier version of this benchmark measured an inherited FIFO 60
injector as "default").
"""

from __future__ import annotations

from contextlib import contextmanager
import os
import subprocess
import sys
from typing import Any, Callable, Iterator, TypeVar

from simreal_ros.core.realtime import RtSettings, apply_to_current_thread

HARNESS_PRIORITY = 60
T = TypeVar('T')
HOG = 'while True: pass'


@contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """Run ``n`` CPU-bound processes while the block runs."""
    procs = [subprocess.Popen([sys.executable, '-c', HOG], stdin=subprocess.DEVNULL)
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


def harness_client(on: bool, factory: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """Return ``factory()`` built with its threads under SCHED_FIFO when ``on``."""
    if not on:
        return factory(), {'policy': 'SCHED_OTHER'}
    r = apply_to_current_thread(RtSettings(HARNESS_PRIORITY), 'harness')
    try:
        client = factory()
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return client, {'policy': r.policy, 'priority': r.priority, 'error': '; '.join(r.errors)}


def env_rt(env: dict[str, str], on: bool) -> dict[str, str]:
    """Environment that makes a benchmark helper process run as the harness (see _source)."""
    return {**env, 'SIMREAL_BENCH_RT': str(HARNESS_PRIORITY if on else 0)}


def helper_rt_from_env() -> None:
    """In a helper process: apply ``SIMREAL_BENCH_RT`` before creating any ROS thread."""
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
