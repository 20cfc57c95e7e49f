"""`colcon build` and `colcon test` of simreal_ros in a throw-away workspace.

The package is copied (not symlinked: that would drag .venv, build/ and caches along) into
``<tmp>/ws/src/simreal_ros`` and built with the colcon of the running interpreter. The tests
then check the install tree ``ros2 run``/``ros2 launch`` rely on, import the package from the
install (not from this checkout) and run a small subset of the suite through ``colcon test``.
"""

from __future__ import annotations

from dataclasses import dataclass
import importlib.util
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = 'simreal_ros'
# What a source checkout of the package consists of; everything else (.venv, build/, install/,
# log/, *.egg-info, .git, caches) stays behind.
PACKAGE_ENTRIES = ('package.xml', 'setup.py', 'setup.cfg', 'resource', PACKAGE, 'launch',
                   'config', 'urdf', 'test')
COPY_IGNORE = shutil.ignore_patterns('__pycache__', '*.pyc', '.pytest_cache', '.hypothesis',
                                     '.mypy_cache', '.ruff_cache', '*.egg-info')
# Run by `colcon test`: small, pure (no ROS nodes) and not this file, so colcon's pytest does
# not recurse into another colcon build. The robot-spec tests load the shipped robots, models and
# realities, which is what an install must carry: 163 cases in 7 s there at load 15, where
# test_excitation (the subset before) took 56 s (16 s of CPU, its sysid designs).
COLCON_TEST_SUBSET = 'test/core/test_robot_spec.py'
TIMEOUT_S = 300

BIN_DIR = Path(sys.executable).parent  # not resolved: keep the venv's bin/, not the base's


def _colcon_executable() -> str | None:
    if importlib.util.find_spec('colcon_core') is None:
        return None
    exe = BIN_DIR / 'colcon'
    if exe.is_file() and os.access(exe, os.X_OK):
        return str(exe)
    return shutil.which('colcon')


COLCON = _colcon_executable()

pytestmark = [
    pytest.mark.e2e,  # builds and tests the package with colcon: once, on the default distribution
    pytest.mark.skipif(COLCON is None,
                       reason='colcon (colcon-core) is not installed for this interpreter'),
    pytest.mark.skipif(importlib.util.find_spec('colcon_ros') is None,
                       reason='colcon-ros is not installed (ament_python packages unknown)'),
]


@dataclass(frozen=True)
class Workspace:
    """A built colcon workspace and the environment it was built with."""

    root: Path          # tmp dir holding ws/ and the colcon home
    ws: Path            # colcon workspace (src/, build/, install/, log/)
    env: dict[str, str]
    build_output: str

    @property
    def prefix(self) -> Path:
        """Install prefix of the package (isolated install: ``install/<pkg>``)."""
        return self.ws / 'install' / PACKAGE

    @property
    def share(self) -> Path:
        """Installed share directory of the package."""
        return self.prefix / 'share' / PACKAGE

    def colcon(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run colcon in the workspace; stdout and stderr together in ``.stdout``."""
        assert COLCON is not None
        return _run([COLCON, '--log-base', str(self.ws / 'log'), *args], self.ws, self.env)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S, check=False)


def _tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else '...\n' + text[-n:]


def _not_the_checkout(paths: str) -> str:
    """Drop PYTHONPATH entries that point at this checkout (its sources would shadow the
    copy and the install)."""
    keep = [p for p in paths.split(os.pathsep)
            if p and Path(p).resolve() not in (REPO, REPO / PACKAGE)]
    return os.pathsep.join(keep)


def _base_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    # conftest sets both before any test runs; keep them, never widen discovery.
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env.setdefault('ROS_DOMAIN_ID', '150')
    env['PATH'] = os.pathsep.join([str(BIN_DIR), env.get('PATH', '')])
    env['COLCON_HOME'] = str(root / 'colcon_home')  # no user defaults.yaml/mixins
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    for var in ('SIMREAL_SHARE_DIR', 'PYTEST_ADDOPTS', 'COLCON_DEFAULTS_FILE',
                'COLCON_LOG_PATH'):
        env.pop(var, None)
    if 'PYTHONPATH' in env:
        env['PYTHONPATH'] = _not_the_checkout(env['PYTHONPATH'])
    return env


@pytest.fixture(scope='module')
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Copy the package into ``ws/src/simreal_ros`` and ``colcon build`` it once."""
    root = tmp_path_factory.mktemp('colcon')
    ws = root / 'ws'
    pkg = ws / 'src' / PACKAGE
    pkg.mkdir(parents=True)
    for entry in PACKAGE_ENTRIES:
        src = REPO / entry
        if src.is_dir():
            shutil.copytree(src, pkg / entry, ignore=COPY_IGNORE)
        else:
            shutil.copy2(src, pkg / entry)

    env = _base_env(root)
    assert COLCON is not None
    proc = _run([COLCON, '--log-base', str(ws / 'log'), 'build', '--base-paths', 'src',
                 '--build-base', str(ws / 'build'), '--install-base', str(ws / 'install')],
                ws, env)
    assert proc.returncode == 0, f'colcon build failed (rc {proc.returncode}):\n' \
                                 f'{_tail(proc.stdout)}'
    return Workspace(root=root, ws=ws, env=env, build_output=proc.stdout)


def _site_packages(prefix: Path) -> Path:
    found = sorted(prefix.glob('lib/python3.*/site-packages'))
    assert found, f'no lib/python3.*/site-packages under {prefix}'
    return found[0]


def test_colcon_builds_it_as_ament_python(workspace: Workspace) -> None:
    """colcon-ros built it as ros.ament_python, and setup.py installs index and manifest."""
    # Only colcon-ros's ament_python task writes the AMENT_PREFIX_PATH hook (colcon-core's
    # plain python task writes just the PYTHONPATH one).
    hooks = workspace.share / 'hook'
    assert (hooks / 'ament_prefix_path.dsv').is_file(), sorted(os.listdir(workspace.share))
    assert (hooks / 'pythonpath.dsv').is_file(), sorted(os.listdir(workspace.share))
    # colcon-ros falls back to installing these itself (with a warning) when setup.py doesn't.
    assert "doesn't explicitly install" not in workspace.build_output, workspace.build_output


def test_build_installs_share_index_and_executables(workspace: Workspace) -> None:
    """The install tree holds what ament_index, ``ros2 launch`` and ``ros2 run`` look up."""
    expected = [
        workspace.share / 'package.xml',
        workspace.share / 'launch' / 'bringup.launch.py',
        workspace.share / 'config' / 'robots' / 'simreal_arm.yaml',
        workspace.share / 'urdf' / 'simreal_arm.urdf',
        workspace.prefix / 'share' / 'ament_index' / 'resource_index' / 'packages' / PACKAGE,
    ]
    missing = [str(p.relative_to(workspace.ws)) for p in expected if not p.is_file()]
    assert not missing, f'missing from the install tree: {missing}\n' \
                        f'{_tail(workspace.build_output)}'

    for name in ('simreal_sim_bridge', 'simreal_excite'):
        exe = workspace.prefix / 'lib' / PACKAGE / name  # where `ros2 run` looks
        assert exe.is_file(), f'{exe.relative_to(workspace.ws)} not installed'
        assert os.access(exe, os.X_OK), f'{exe} is not executable'
        shebang = exe.read_text().splitlines()[0]
        assert shebang.startswith('#!') and 'python' in shebang, shebang

    site = _site_packages(workspace.prefix)
    assert (site / PACKAGE / '__init__.py').is_file()
    assert (site / PACKAGE / 'py.typed').is_file()


IMPORT_CHECK = r"""
import json
import simreal_ros
from ament_index_python.packages import get_package_share_directory
from simreal_ros.core.paths import share_dir
from simreal_ros.core.robot import load_robot
robot = load_robot('simreal_arm')
print(json.dumps({
    'file': simreal_ros.__file__,
    'share_dir': str(share_dir()),
    'ament_share': get_package_share_directory('simreal_ros'),
    'robot': robot.name,
    'joints': len(robot.joints),
    'source': str(robot.source),
    'urdf': str(robot.urdf),
}))
"""


def test_installed_package_finds_its_share_dir(workspace: Workspace) -> None:
    """Imported from the install, the package resolves data through the ament index."""
    env = dict(workspace.env)
    site = _site_packages(workspace.prefix)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(site), env.get('PYTHONPATH', '')) if p)
    env['AMENT_PREFIX_PATH'] = os.pathsep.join(
        p for p in (str(workspace.prefix), env.get('AMENT_PREFIX_PATH', '')) if p)
    # cwd outside the package copy and this checkout: nothing but the install can be imported.
    proc = _run([sys.executable, '-c', IMPORT_CHECK], workspace.root, env)
    assert proc.returncode == 0, _tail(proc.stdout)
    info = json.loads(proc.stdout.strip().splitlines()[-1])

    share = workspace.share.resolve()
    assert Path(info['file']).resolve().is_relative_to(site.resolve()), info['file']
    assert Path(info['ament_share']).resolve() == share, info
    assert Path(info['share_dir']).resolve() == share, info
    assert info['robot'] == 'simreal_arm' and info['joints'] > 0, info
    assert Path(info['source']).resolve() == share / 'config' / 'robots' / 'simreal_arm.yaml'
    assert Path(info['urdf']).resolve() == share / 'urdf' / 'simreal_arm.urdf'


def test_colcon_test_runs_a_subset_green(workspace: Workspace) -> None:
    """`colcon test` runs the subset through pytest; `colcon test-result` sees it all pass."""
    pkg = workspace.ws / 'src' / PACKAGE
    assert (pkg / COLCON_TEST_SUBSET).is_file(), f'{COLCON_TEST_SUBSET} missing from the copy'
    # colcon's pytest step puts --pytest-args into PYTEST_ADDOPTS of `python -m pytest` run in
    # the package's source dir; a path there replaces setup.cfg's testpaths.
    proc = workspace.colcon('test', '--base-paths', 'src',
                            '--build-base', str(workspace.ws / 'build'),
                            '--install-base', str(workspace.ws / 'install'),
                            '--return-code-on-test-failure',
                            '--pytest-args', COLCON_TEST_SUBSET, '-q')
    assert proc.returncode == 0, f'colcon test failed (rc {proc.returncode}):\n' \
                                 f'{_tail(proc.stdout)}'

    result = workspace.colcon('test-result', '--test-result-base',
                              str(workspace.ws / 'build'), '--verbose')
    assert result.returncode == 0, f'colcon test-result reports failures:\n' \
                                   f'{_tail(result.stdout)}\n{_tail(proc.stdout)}'
    m = re.search(r'Summary: (\d+) tests?, (\d+) errors?, (\d+) failures?, (\d+) skipped',
                  result.stdout)
    assert m, result.stdout
    tests, errors, failures, _skipped = map(int, m.groups())
    assert tests > 0 and errors == 0 and failures == 0, result.stdout

    # Only the subset ran (so no recursion into this file).
    junit = ET.parse(workspace.ws / 'build' / PACKAGE / 'pytest.xml')
    classnames = {tc.get('classname', '') for tc in junit.iter('testcase')}
    assert classnames, 'no test cases in pytest.xml'
    assert all('test_robot_spec' in c for c in classnames), sorted(classnames)
