"""Test fixtures: every ROS process of a test run stays on loopback with its own domain id."""

from __future__ import annotations

import faulthandler
import itertools
import os
from pathlib import Path
import subprocess
import sys
import tempfile

import pytest

from simreal_ros.core.netenv import apply_loopback_profile

# Before anything imports rclpy: loopback only, a domain id of this run, a writable log dir.
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)
# SIMREAL_TEST_DOMAINS=LO-HI gives concurrent test runs on one host disjoint blocks of ids
# inside 1-200 (201-232 are the benchmarks', see core/netenv.py).
# Under pytest-xdist each worker takes its own slice of the block (gw0 the first, ...), so two
# workers never share an id; a run without workers takes the whole block. A worker that
# replaces a crashed one is named on (gw2 for gw0 of two) and takes the crashed one's slice:
# past the block its ids were 201 and up, and every ROS test of it failed at set-up (CI).
_LO, _, _HI = os.environ.get('SIMREAL_TEST_DOMAINS', '1-200').partition('-')
_DOMAIN_LO, _DOMAIN_SPAN = int(_LO), int(_HI) - int(_LO) + 1
_WORKERS = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
if _WORKERS > 1:
    _DOMAIN_SPAN //= _WORKERS
    _DOMAIN_LO += _DOMAIN_SPAN * (int(os.environ['PYTEST_XDIST_WORKER'].removeprefix('gw'))
                                  % _WORKERS)
_BASE_DOMAIN = os.getpid() % _DOMAIN_SPAN  # each test needing ROS takes the next id
os.environ['ROS_DOMAIN_ID'] = str(_DOMAIN_LO + _BASE_DOMAIN)
os.environ.setdefault('ROS_LOG_DIR', str(Path(tempfile.gettempdir()) / 'simreal_test_logs'))
os.environ.setdefault('HOME', tempfile.gettempdir())
if sys.prefix != sys.base_prefix:
    os.environ.setdefault('AMENT_PREFIX_PATH', sys.prefix)
# Every socket of this process's participants and of the nodes it starts on 127.0.0.1, as
# the launcher does (core/netenv.py, docs/architecture.md "Networking").
apply_loopback_profile(os.environ)

_domains = itertools.count(0)
#: How long a test client's close may take before its worker is ended (s): 0.1-0.3 s here,
#: plus up to the client's own CLOSE_WAIT_S for its spinning thread.
CLOSE_LIMIT_S = 60.0

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def domain_id() -> int:
    """A ROS domain id no other running test of this run uses (within SIMREAL_TEST_DOMAINS)."""
    return _DOMAIN_LO + (_BASE_DOMAIN + 1 + next(_domains)) % _DOMAIN_SPAN


@pytest.fixture
def ros_env(domain_id: int) -> dict[str, str]:
    """Environment for node subprocesses of one test: LOCALHOST discovery, own domain."""
    from simreal_ros.core.netenv import ros_env as make_env
    return make_env(discovery='localhost', domain_id=domain_id)


@pytest.fixture
def ros_client(domain_id: int, start_node):
    """A RosClient on this test's domain.

    Set up after ``start_node`` (it asks for it), so it is closed before the nodes that fixture
    started are stopped: their leaving is what starts the deadlock below in this process.
    """
    from simreal_ros.ros.client import RosClient
    client = RosClient(domain_id, 'test_client')
    yield client
    # Fast DDS 3.2's discovery deadlock (simreal_ros/ros/teardown.py) can take any participant:
    # a receive thread removing a remote writer under the discovery lock waits for the event
    # thread, whose announcement timer waits for that lock. Destroying the participant then
    # never returns, with the GIL held. Seen in test workers' clients twice: gdb, WriterProxy::
    # stop against PDP::set_next_announcement_interval (a three-worker run, the suite hung);
    # a CI run, in destroy_publisher. The remote writers removed are those of nodes that
    # leave while this participant lives, hence the order above; nodes a test stops itself
    # still leave before it. faulthandler's C watchdog thread writes the test's name and every
    # thread's stack to a file and ends the worker instead: pytest-xdist reports the crashed
    # worker's test, and the Makefile's runner ends the parallel part (tools/pytest_parts.sh);
    # a plain `pytest -n` starts a new worker (its domain ids above).
    stacks = Path(os.environ['ROS_LOG_DIR']) / f'hung_close_{os.getpid()}.txt'
    with stacks.open('w') as f:
        print(os.environ.get('PYTEST_CURRENT_TEST', ''), file=f, flush=True)
        faulthandler.dump_traceback_later(CLOSE_LIMIT_S, exit=True, file=f)
        try:
            client.close()
        finally:
            faulthandler.cancel_dump_traceback_later()
    stacks.unlink()


@pytest.fixture
def start_node(ros_env: dict[str, str], tmp_path: Path):
    """Start planner NodeSpecs as subprocesses on this test's domain; stopped at teardown."""
    procs: list = []

    def start(kind: str, name: str | None = None, namespace: str = '',
              remappings: tuple = (), **parameters: object):
        from simreal_ros.bringup.launcher import NodeProcess
        from simreal_ros.bringup.planner import NodeSpec
        spec = NodeSpec(kind, name or kind, namespace, dict(parameters), tuple(remappings))
        p = NodeProcess(spec, ros_env, tmp_path)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def simreal_cli(capfd: pytest.CaptureFixture[str]):
    """Run the ``simreal`` command in this process; returns what ``subprocess.run`` would.

    For the bad-input cases, which stop before anything starts: the same ``main(argv)`` as
    ``python -m simreal_ros``, without the 1-2 s of a fresh interpreter importing the package
    each (measured: 0.9-2.3 s a case on 2 cores). ``capfd`` takes what reaches the file
    descriptors too, as a terminal would see it; ``os.environ`` is restored after each call.
    Every command keeps at least one bad-input case in a real process somewhere.
    """
    from simreal_ros.cli import main

    def run(*argv: str) -> subprocess.CompletedProcess:
        saved = dict(os.environ)
        capfd.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(['simreal', *argv], code, out, err)

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the long tests first: e2e, then ros, then the pure ones (each in collection order).

    Under pytest-xdist (``make test``: two workers) the run ends when the last worker does;
    with the 80 s flywheel or a 20 s leader test collected last, one worker ran it alone at the
    end. Longest first leaves the sub-second pure tests to fill the tail.
    """
    def tier(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker('e2e') else 1 if item.get_closest_marker('ros') else 2
    items.sort(key=tier)
