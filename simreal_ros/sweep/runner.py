"""Run a sweep's cells on local worker processes or on Ray; every finished cell kept at once.

Results: ``OUT/results.jsonl``, one JSON line per finished run of a cell, appended (and flushed
to disk) by the driving process the moment the cell's result arrives, so a killed sweep loses
at most the cells still running. A line holds the cell's full configuration, its seeds, its
metrics, its episodes (``episode_results``; a sysid cell: ``parameters`` and the fitted overlay
as ``overlay_yaml``) and the provenance (git commit, package version, policy spec and model
SHA-256 or the bag's SHA-256, host, worker, UTC start and end, wall time, attempt). A rerun
with the same ``OUT`` skips every cell whose ``cell_id`` has an ``ok`` line (resume) and runs
the rest.

Local (the default): ``workers`` processes started with ``spawn`` (a fork of a process that
has loaded MuJoCo or torch is not safe), at most ``workers`` cells in flight. When a worker
dies (killed, out of memory) the pool is broken: the cells that were in flight are run again,
up to ``retries`` more times each, on a fresh pool. A cell that raises is not retried (its
result would be the same): it gets a ``failed`` line with the error and the sweep goes on.

Ray (``ray_address``): the cells are Ray tasks (``max_retries=retries``: Ray reruns a task
whose worker died). ``'local'`` starts a private Ray instance for the sweep, every socket of it
on 127.0.0.1 (:func:`start_local_ray`); ``'auto'`` joins the cluster Ray finds on this machine
(``RAY_ADDRESS`` or one started with ``ray start``) and otherwise does what ``'local'`` does;
any other value is a cluster address (``HOST:PORT``), as ``ray.init(address=...)`` takes it.
A Ray instance this process already joined (``ray.is_initialized()``) is used as it is.

Workers of both kinds get ``ROS_AUTOMATIC_DISCOVERY_RANGE`` and ``ROS_DOMAIN_ID`` from the
driver (LOCALHOST and 0 when unset), though a cell starts no ROS node.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
import datetime as dt
import hashlib
import json
import multiprocessing
import os
from pathlib import Path
import socket
import subprocess
import sys
import time
from typing import IO, Any, Callable

from simreal_ros.errors import SimrealError
from simreal_ros.sweep.config import AnyCell, ReplayCell, Sweep, SysidCell

RESULTS = 'results.jsonl'
#: What the driver gives every worker: the network rule of the project.
ROS_VARS = {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST', 'ROS_DOMAIN_ID': '0'}
#: Environment of a Ray instance this project starts: no usage statistics sent anywhere, and
#: ``ENABLE_RAY_CLUSTER`` off, without which Ray 2.58 turns ``_node_ip_address='127.0.0.1'``
#: into the machine's address and binds its gRPC servers to every interface (measured with
#: ``ss -ltnp``: gcs_server, raylet and workers on ``*``, the runtime-env agent on the
#: machine's address; with it, all of them on 127.0.0.1).
#: And ``RAY_worker_niceness=0``: Ray runs its workers at nice 15 by default, and a cell of 1-4 s
#: (3.6 and 1.2 s on a local worker) took 75 and 88 s on Ray next to two busy loops on the 2
#: cores; the sweep's local workers run at the caller's priority, so do the Ray workers.
RAY_LOCAL_ENV = {'RAY_USAGE_STATS_ENABLED': '0', 'RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER': '0',
                 'RAY_worker_niceness': '0'}


def worker_env() -> dict[str, str]:
    """Return the ROS variables of this process (their defaults when unset) for the workers."""
    return {k: os.environ.get(k) or v for k, v in ROS_VARS.items()}


def _sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def git_commit() -> str:
    """Return the commit of the source checkout this package runs from ('' when not a checkout)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(['git', '-C', str(here), 'rev-parse', 'HEAD'], capture_output=True,
                             text=True, timeout=10, check=False)
    except OSError:
        return ''
    commit = out.stdout.strip() if out.returncode == 0 else ''
    if commit:
        dirty = subprocess.run(['git', '-C', str(here), 'status', '--porcelain', '--',
                                str(here.parent)], capture_output=True, text=True, timeout=10,
                               check=False).stdout.strip()
        commit += '-dirty' if dirty else ''
    return commit


def _utc(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isoformat(timespec='milliseconds')


def _run_kind(cell: AnyCell) -> dict[str, Any]:
    """Run the cell by its kind; return what its result line adds."""
    if isinstance(cell, SysidCell):
        from simreal_ros.sweep.fit_cells import run_sysid_cell
        return run_sysid_cell(cell)
    if isinstance(cell, ReplayCell):
        from simreal_ros.sweep.fit_cells import run_replay_cell
        return run_replay_cell(cell)
    from simreal_ros.policy.spec import load_policy_spec
    from simreal_ros.sweep.evaluate import run_eval_cell
    spec = load_policy_spec(cell.policy)
    return {'policy_spec_sha256': _sha256(spec.source),
            'policy_model_sha256': _sha256(spec.model), **run_eval_cell(cell)}


def run_cell(cell: AnyCell, env: dict[str, str], provenance: dict[str, str],
             worker_kind: str = 'local') -> dict[str, Any]:
    """Run one cell in this process; return its result line (without ``attempt``).

    The entry point of both worker kinds. A cell that raises returns a ``failed`` line.
    """
    os.environ.update(env)
    # the cell's own modules are imported before the clock starts
    if cell.kind == 'eval':
        import simreal_ros.sweep.evaluate  # noqa: F401
    else:
        import simreal_ros.sysid.api  # noqa: F401
    start_ns, t0 = time.time_ns(), time.monotonic()
    row: dict[str, Any] = {'cell_id': cell.cell_id, **cell.config, **cell.seeds}
    try:
        row.update(_run_kind(cell), status='ok', error='')
    except Exception as exc:  # noqa: BLE001 - the sweep goes on; the line says what failed
        row.update(status='failed', error=f'{type(exc).__name__}: {exc}')
    end_ns = time.time_ns()
    row.update(provenance, host=socket.gethostname(),
               worker=f'{worker_kind}:{socket.gethostname()}:{os.getpid()}',
               start_utc=_utc(start_ns), end_utc=_utc(end_ns),
               wall_time_s=round(time.monotonic() - t0, 3))
    return row


def read_results(out_dir: Path) -> list[dict[str, Any]]:
    """Every line of ``results.jsonl`` (a torn last line, from a kill mid-write, skipped)."""
    path = out_dir / RESULTS
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding='utf-8').splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def finished_ids(out_dir: Path) -> set[str]:
    """Return the cells with an ``ok`` line in ``results.jsonl``."""
    return {r['cell_id'] for r in read_results(out_dir) if r.get('status') == 'ok'}


class Progress:
    """``sweep: 3/8 cells, 1 failed, 12 s, ETA 20 s`` on stderr; one line each on a non-TTY."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.total, self.done, self.failed, self.retried = total, 0, 0, 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, 'isatty', lambda: False)())
        self.t0 = time.monotonic()

    def line(self) -> str:
        """Return the current progress line."""
        el = time.monotonic() - self.t0
        eta = f'{el / self.done * (self.total - self.done):.0f} s' if self.done else '?'
        extra = f', {self.failed} failed' if self.failed else ''
        extra += f', {self.retried} retried' if self.retried else ''
        return f'sweep: {self.done}/{self.total} cells{extra}, {el:.0f} s, ETA {eta}'

    def update(self, row: dict[str, Any] | None = None) -> None:
        """Count a finished cell (``row``) or just redraw."""
        if row is not None:
            self.done += 1
            self.failed += row['status'] != 'ok'
        text = self.line()
        if self.tty:
            self.stream.write('\r' + text + ('\n' if self.done == self.total else ''))
        else:
            self.stream.write(text + '\n')
        self.stream.flush()

    def note(self, text: str) -> None:
        """Write a message on a line of its own (a retry)."""
        self.stream.write(('\n' if self.tty else '') + text + '\n')
        self.stream.flush()


@dataclass
class Outcome:
    """What a run did: the cells it ran, skipped (finished before) and their lines."""

    ran: int = 0
    skipped: int = 0
    failed: int = 0
    retries: int = 0
    wall_time_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)


class _Sink:
    """Appends result lines to ``results.jsonl``, each on disk before the next is taken."""

    def __init__(self, out_dir: Path, progress: Progress, outcome: Outcome) -> None:
        path = out_dir / RESULTS
        torn = False
        if path.is_file() and path.stat().st_size:
            with open(path, 'rb') as f:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b'\n'
        self.f = open(path, 'a', encoding='utf-8')  # noqa: SIM115 - closed below
        if torn:  # a line cut by a kill: end it, so the next line is whole (it is skipped)
            self.f.write('\n')
        self.progress, self.outcome = progress, outcome

    def add(self, row: dict[str, Any], attempt: int) -> None:
        row['attempt'] = attempt
        self.f.write(json.dumps(row, allow_nan=True) + '\n')
        self.f.flush()
        os.fsync(self.f.fileno())
        self.outcome.ran += 1
        self.outcome.failed += row['status'] != 'ok'
        self.outcome.rows.append(row)
        self.progress.update(row)

    def close(self) -> None:
        self.f.close()


def _run_local(cells: list[AnyCell], workers: int, retries: int, sink: _Sink,
               provenance: dict[str, str]) -> None:
    env = worker_env()
    ctx = multiprocessing.get_context('spawn')
    pending = list(reversed(cells))  # popped from the end: file order
    attempts = {c.cell_id: 1 for c in cells}
    inflight: dict[Future[dict[str, Any]], AnyCell] = {}
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    broken = False
    try:
        while pending or inflight:
            while pending and len(inflight) < workers and not broken:
                cell = pending.pop()
                inflight[pool.submit(run_cell, cell, env, provenance, 'local')] = cell
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                cell = inflight.pop(fut)
                try:
                    row = fut.result()
                except BrokenProcessPool:
                    broken = True
                    if attempts[cell.cell_id] > retries:
                        sink.add(_lost(cell, provenance, retries), attempts[cell.cell_id])
                        continue
                    attempts[cell.cell_id] += 1
                    sink.outcome.retries += 1
                    sink.progress.retried += 1
                    sink.progress.note(f'sweep: a worker died; cell {cell.cell_id} '
                                       f'({cell.label()}) runs again (attempt '
                                       f'{attempts[cell.cell_id]} of {retries + 1})')
                    pending.append(cell)
                    continue
                sink.add(row, attempts[cell.cell_id])
            if broken and not inflight:  # every cell of the dead pool is back: a fresh one
                pool.shutdown(wait=True, cancel_futures=True)
                pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
                broken = False
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _lost(cell: AnyCell, provenance: dict[str, str], retries: int) -> dict[str, Any]:
    now = _utc(time.time_ns())
    return {'cell_id': cell.cell_id, **cell.config, **cell.seeds, 'status': 'failed',
            'error': f'its worker died on all {retries + 1} attempts', **provenance,
            'host': '', 'worker': '', 'start_utc': now, 'end_utc': now, 'wall_time_s': 0.0}


def start_local_ray(num_cpus: int) -> None:
    """Start a private Ray instance whose every socket is on 127.0.0.1; no usage stats.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` when ``ray`` is first imported: the
    environment is set before the import (Ray's own processes inherit it) and, where this
    process imported ``ray`` before, the constant read from it is set too. Refuses (stops the
    instance, raises) when Ray chose any node address but 127.0.0.1.
    """
    os.environ.update(RAY_LOCAL_ENV)
    import ray
    from ray._private import ray_constants
    ray_constants.ENABLE_RAY_CLUSTER = False  # what the variable gives at import
    ray.init(address='local', include_dashboard=False, _node_ip_address='127.0.0.1',
             num_cpus=num_cpus, log_to_driver=False, configure_logging=False,
             object_store_memory=100 * 1024 * 1024)
    ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    if ip != '127.0.0.1':
        ray.shutdown()
        raise SimrealError(f'the local Ray instance took node address {ip}, not 127.0.0.1: '
                           f'stopped (it would listen on the network)')


def _cluster_here() -> bool:
    """Whether Ray's ``address='auto'`` would find a cluster: ``RAY_ADDRESS`` or ``ray start``.

    Read without importing ``ray`` (the import fixes Ray's network settings, see
    :func:`start_local_ray`): ``ray start`` writes ``<temp dir>/ray_current_cluster``.
    """
    if os.environ.get('RAY_ADDRESS'):
        return True
    import tempfile
    tmp = Path(os.environ.get('RAY_TMPDIR') or ('/tmp' if os.name == 'posix'
                                                 else tempfile.gettempdir()))
    return (tmp / 'ray' / 'ray_current_cluster').is_file()


#: How long ``check_ray_address`` waits for a cluster's port to accept a connection.
REACH_TIMEOUT_S = 5.0


def check_ray_address(address: str) -> None:
    """Raise SimrealError unless ``address`` is auto, local or a ``HOST:PORT`` that answers.

    A TCP connection to the cluster's port, before anything runs or is written: ``ray.init``
    on an address where nothing listens (``127.0.0.1:1``) was still waiting after 120 s,
    logging GCS time-outs.
    """
    if address in ('auto', 'local'):
        return
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SimrealError(f'--ray {address!r}: expected auto, local or a cluster address '
                           f'HOST:PORT')
    try:
        socket.create_connection((host.strip('[]'), int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise SimrealError(f'--ray {address}: no Ray cluster answers there '
                           f'({exc.strerror or exc}); start one with `ray start --head` '
                           f'(docs/sweeps.md, Ray) or use --ray local') from None


def _connect_ray(address: str, workers: int) -> bool:
    """Join or start Ray; return whether this call did (and so must shut it down)."""
    os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
    if address == 'auto' and _cluster_here():
        address = 'auto-found'
    elif address == 'auto':
        address = 'local'
    if address == 'local':
        os.environ.update(RAY_LOCAL_ENV)
    import ray
    if ray.is_initialized():
        return False
    if address == 'local':
        start_local_ray(workers)
    else:
        ray.init(address='auto' if address == 'auto-found' else address,
                 log_to_driver=False, configure_logging=False)
    return True


def _run_ray(cells: list[AnyCell], address: str, workers: int, retries: int, sink: _Sink,
             provenance: dict[str, str]) -> None:
    started = _connect_ray(address, workers)
    import ray
    try:
        task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(run_cell)
        env = worker_env()
        refs = {task.remote(c, env, provenance, 'ray'): c for c in cells}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                cell = refs.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError:  # its worker died on every attempt
                    row = _lost(cell, provenance, retries)
                sink.add(row, 0)  # Ray counts its own retries; 0: not known here
    finally:
        if started:
            ray.shutdown()


def run_sweep(sweep: Sweep, out_dir: Path, *, workers: int = 1, ray_address: str | None = None,
              progress_stream: IO[str] | None = None,
              log: Callable[[str], None] | None = None) -> Outcome:
    """Run the cells of ``sweep`` without an ``ok`` line in ``out_dir``; return what ran."""
    if ray_address:
        check_ray_address(ray_address)  # before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    from simreal_ros import __version__
    provenance = {'git_commit': git_commit(), 'package_version': __version__,
                  'sweep': sweep.name, 'sweep_file': str(Path(sweep.source).absolute())}
    done = finished_ids(out_dir)
    todo = [c for c in sweep.cells if c.cell_id not in done]
    outcome = Outcome(skipped=len(sweep.cells) - len(todo))
    if log is not None:
        log(f'sweep {sweep.name}: {len(sweep.cells)} cells, {outcome.skipped} finished before, '
            f'{len(todo)} to run on ' + (f'Ray ({ray_address})' if ray_address
                                         else f'{workers} local worker(s)'))
    t0 = time.monotonic()
    progress = Progress(len(todo), progress_stream)
    sink = _Sink(out_dir, progress, outcome)
    try:
        if todo and ray_address:
            _run_ray(todo, ray_address, workers, sweep.retries, sink, provenance)
        elif todo:
            _run_local(todo, workers, sweep.retries, sink, provenance)
    finally:
        sink.close()
    outcome.wall_time_s = time.monotonic() - t0
    return outcome
