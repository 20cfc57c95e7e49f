"""The Ray path: the same results as local workers, and a local Ray on 127.0.0.1 only.

One private Ray instance for the module (its start-up takes ~5 s), started the way
``simreal sweep --ray local`` starts it, and shut down at the end.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from simreal_ros.sweep.config import load_sweep
from simreal_ros.sweep.runner import read_results, run_sweep, start_local_ray

pytestmark = pytest.mark.e2e
#: Columns that say where and when a cell ran, not what it gave.
WHERE_WHEN = {'host', 'worker', 'start_utc', 'end_utc', 'wall_time_s', 'attempt'}
LOOPBACK = {'127.0.0.1', '::ffff:127.0.0.1'}


@pytest.fixture(scope='module')
def ray_local():
    saved = dict(os.environ)
    start_local_ray(num_cpus=2)
    import ray
    yield ray
    ray.shutdown()
    os.environ.clear()
    os.environ.update(saved)


def test_ray_gives_the_results_of_local_workers(ray_local, tmp_path: Path):
    # a randomized, delayed cell (seeded draws, latency routes) and the other engine
    p = tmp_path / 'sweep.yaml'
    p.write_text('name: t\neval: {episodes: 2, goal_timeout_s: 2.0}\ncells:\n'
                 '  - {policy: simreal_arm_reach, latency: wifi, randomization: default}\n'
                 '  - {policy: so101_reach, engine: pybullet, seed: 3}\n', encoding='utf-8')
    sweep = load_sweep(p)
    local = run_sweep(sweep, tmp_path / 'local', workers=1)
    on_ray = run_sweep(sweep, tmp_path / 'ray', workers=2, ray_address='local')
    assert (local.ran, local.failed, on_ray.ran, on_ray.failed) == (2, 0, 2, 0)
    assert ray_local.is_initialized()  # the module's instance was used, and left running
    a = {r['cell_id']: r for r in read_results(tmp_path / 'local')}
    b = {r['cell_id']: r for r in read_results(tmp_path / 'ray')}
    assert sorted(a) == sorted(b) == sorted(c.cell_id for c in sweep.cells)
    for cid, row in a.items():
        assert row['worker'].startswith('local:') and b[cid]['worker'].startswith('ray:')
        assert {k: v for k, v in row.items() if k not in WHERE_WHEN} == \
            {k: v for k, v in b[cid].items() if k not in WHERE_WHEN}


def test_local_ray_listens_on_loopback_only_at_our_priority(ray_local):
    # a worker process up too, at the caller's priority (Ray's default is nice 15)
    assert ray_local.get(ray_local.remote(lambda: os.nice(0)).remote()) == os.nice(0)
    procs = [p for p in psutil.Process().children(recursive=True)
             if 'spawn_main' not in ' '.join(p.cmdline())]
    names = {p.pid: p.name() for p in procs}
    assert {'gcs_server', 'raylet'} <= set(names.values()), names
    listening = [(names[c.pid], c.laddr.ip, c.laddr.port)
                 for c in psutil.net_connections(kind='inet')
                 if c.status == psutil.CONN_LISTEN and c.pid in names]
    assert {n for n, _ip, _port in listening} >= {'gcs_server', 'raylet'}, listening
    assert [x for x in listening if x[1] not in LOOPBACK] == []
    raylet = next(p for p in procs if p.name() == 'raylet')
    assert raylet.environ().get('RAY_USAGE_STATS_ENABLED') == '0'
