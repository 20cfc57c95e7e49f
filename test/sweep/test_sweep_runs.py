"""``simreal sweep`` as a user runs it: local workers, a killed worker, a killed sweep resumed.

Each test starts the command in a process of its own (the workers are spawned processes that
import MuJoCo and torch: ~5 s each on the 2-core machine) on a sweep of small cells.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import psutil
import pytest
from startup import cli_error_line

from simreal_ros.sweep.config import load_sweep
from simreal_ros.sweep.runner import read_results

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def sweep_file(tmp_path: Path, cells: int, slow: bool = False) -> Path:
    """``cells`` cells of one policy and engine, replicates 0..cells-1, one episode each.

    ``slow``: a tolerance no arm reaches, so every episode runs its whole timeout (2 episodes
    of 4 simulated s: ~1 s of a worker's time a cell), so a kill lands between cells.
    """
    ev = ('{episodes: 2, goal_timeout_s: 4.0, tolerance_rad: 0.00001}' if slow
          else '{episodes: 1, goal_timeout_s: 2.0}')
    p = tmp_path / 'sweep.yaml'
    p.write_text(f'name: t\nretries: 2\neval: {ev}\n'
                 f'grid: {{policy: [simreal_arm_reach], seed: {list(range(cells))}}}\n',
                 encoding='utf-8')
    return p


def start(sweep: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'sweep', str(sweep), '--out',
                             str(out), *extra], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def lines(out: Path) -> list[dict]:
    """The whole lines of ``results.jsonl`` (one torn by the kill is no finished cell)."""
    return read_results(out)


def wait_for(pred, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.05)


def workers_of(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    """The pool's worker processes (spawned: ``spawn_main`` in the command line)."""
    return [c for c in psutil.Process(proc.pid).children(recursive=True)
            if 'spawn_main' in ' '.join(c.cmdline())]


def test_two_workers_a_killed_worker_and_the_table(tmp_path):
    # 3 cells: when the first finishes, the third is submitted and the second may still run,
    # so the kill breaks a pool with at least one cell in flight (the one kill the test needs)
    sweep = sweep_file(tmp_path, 3, slow=True)
    out = tmp_path / 'out'
    p = start(sweep, out, '--workers', '2')
    try:
        wait_for(lambda: len(lines(out)) >= 1, 'the first finished cell')
        victims = workers_of(p)
        assert len(victims) == 2
        for w in victims:  # the network rule reaches the workers
            env = w.environ()
            assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
            assert env['ROS_DOMAIN_ID'] == os.environ['ROS_DOMAIN_ID']
        victims[0].send_signal(signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, stdout + stderr
    assert 'a worker died; cell ' in stderr
    rows = lines(out)
    ids = [c.cell_id for c in load_sweep(sweep).cells]
    ok = [r for r in rows if r['status'] == 'ok']
    assert sorted(r['cell_id'] for r in ok) == sorted(ids)  # each cell once, none lost
    assert len(rows) == 3
    assert max(r['attempt'] for r in ok) == 2  # the cells of the dead pool ran again
    assert {r['worker'].rsplit(':', 1)[0] for r in ok} == {f'local:{ok[0]["host"]}'}
    import pyarrow.parquet as pq
    table = pq.read_table(out / 'results.parquet').to_pylist()
    assert [r['cell_id'] for r in table] == ids
    assert [(r['episodes'], r['success_rate']) for r in table] == [(2, 0.0)] * 3
    assert (out / 'results.csv').read_text(encoding='utf-8').count('\n') == 4
    assert (out / 'report.html').read_text(encoding='utf-8').count('<svg') == 2
    assert 'ran 3 cells (0 failed, ' in stdout and '0 finished before' in stdout


def test_a_killed_sweep_resumes_without_redoing_finished_cells(tmp_path):
    # 3 cells: the kill lands after the first finished one, so one or two are left to resume
    # (a slow cell after the first took 4-6 s at load average 12; the poll is 50 ms)
    sweep = sweep_file(tmp_path, 3, slow=True)
    out = tmp_path / 'out'
    p = start(sweep, out, '--workers', '1')
    try:
        wait_for(lambda: len(lines(out)) >= 1, 'the first finished cell')
        os.killpg(p.pid, signal.SIGKILL)  # the sweep and its worker, mid-way
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    before = lines(out)
    assert 1 <= len(before) < 3, before
    assert all(r['status'] == 'ok' for r in before)
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'sweep', str(sweep), '--out',
                        str(out), '--workers', '1'], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f'ran {3 - len(before)} cells (0 failed, 0 retried), {len(before)} finished before' \
        in r.stdout
    after = lines(out)
    assert len(after) == 3  # every cell ran exactly once over both runs
    assert sorted(x['cell_id'] for x in after) == sorted(c.cell_id
                                                         for c in load_sweep(sweep).cells)


def test_a_bad_sweep_file_in_a_real_process(tmp_path):
    """The one bad-input case outside the in-process ``simreal_cli`` fixture."""
    p = tmp_path / 'sweep.yaml'
    p.write_text('grid: {policy: [simreal_arm_reach], engine: [mujoco, gazebo]}\n',
                 encoding='utf-8')
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'sweep', str(p), '--out',
                        str(tmp_path / 'out')], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert f'{p}: grid.engine[1]: ' in cli_error_line(r)
    assert not (tmp_path / 'out').exists()
