"""Shared sysid fixtures: in-process sim-bridge bags with a known overlay, fitted once.

The truth bag and its fit are used by two modules (test_sysid_recover, test_sysid_roundtrip),
which ``--dist loadfile`` may give to different xdist workers: the first worker to ask makes
them in the run's shared temporary directory under a file lock, the other reads them (the fit
is the costliest fixture of the package: 21-63 s at load average 10).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from filelock import FileLock
import pytest

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sysid.api import identify
from simreal_ros.sysid.synth import record_sim_bag

ROBOT = load_robot('simreal_arm')

#: the truth of the fast recovery test: every joint differs from nominal, the tool is heavier,
#: commands are 6 ms late (only what an overlay can express: no imperfections)
TRUTH_YAML = """robot: simreal_arm
joints:
  base_yaw:       {damping: 0.16, frictionloss: 0.045, armature: 0.015}
  shoulder_pitch: {damping: 0.22, frictionloss: 0.07, armature: 0.018}
  elbow_pitch:    {damping: 0.09, frictionloss: 0.055, armature: 0.016}
  forearm_roll:   {damping: 0.13, frictionloss: 0.014, armature: 0.008}
  wrist_pitch:    {damping: 0.05, frictionloss: 0.035, armature: 0.013}
  wrist_roll:     {damping: 0.10, frictionloss: 0.03, armature: 0.006}
bodies:
  wrist_flange_link: {mass_scale: 1.8}
command_delay_s: 0.006
"""


@pytest.fixture(scope='session')
def sysid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session directory for the shared bags and fits."""
    return tmp_path_factory.mktemp('sysid')


@pytest.fixture(scope='session')
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this run sees (the session's own without xdist)."""
    if not os.environ.get('PYTEST_XDIST_WORKER'):
        return tmp_path_factory.mktemp('sysid_shared')
    p = tmp_path_factory.getbasetemp().parent / 'sysid_shared'
    p.mkdir(exist_ok=True)
    return p


@pytest.fixture(scope='session')
def truth_overlay(shared_dir: Path) -> Path:
    """The known overlay of the recovery bag."""
    with FileLock(str(shared_dir / 'truth.lock')):
        p = shared_dir / 'truth.yaml'
        if not p.exists():
            p.write_text(TRUTH_YAML, encoding='utf-8')
    return p


@pytest.fixture(scope='session')
def truth_bag(shared_dir: Path, truth_overlay: Path) -> Path:
    """8 s of pattern:=sysid on the bridge physics with the known overlay.

    With ``holdout=0.25``: one fitting segment of 4 s (``fit.SEGMENT_NS``) and 2 s held out.
    Noise-free, so one segment recovers every parameter (measured: relative errors below
    4e-13, every one identifiable, the held-out error 1e-13 of nominal; 14 s gave 2e-12 and
    two segments, at three times the fit time: 63 s against 21 s at load average 10).
    """
    p = shared_dir / 'truth_bag'
    with FileLock(str(shared_dir / 'truth_bag.lock')):
        done = shared_dir / 'truth_bag.done'
        if not done.exists():
            record_sim_bag(p, ROBOT, load_overlay(truth_overlay),
                           ExcitationConfig(pattern='sysid', duration_s=8.0, seed=2))
            done.touch()
    return p


@pytest.fixture(scope='session')
def nominal_bag(sysid_dir: Path) -> Path:
    """6 s of pattern:=sysid on the nominal bridge physics."""
    return record_sim_bag(sysid_dir / 'nominal_bag', ROBOT, None,
                          ExcitationConfig(pattern='sysid', duration_s=6.0, seed=5))


@pytest.fixture(scope='session')
def fitted(shared_dir: Path, truth_bag: Path) -> tuple[dict, Path]:
    """The summary and overlay of one fit of every parameter kind on the truth bag.

    Made once per run: a worker that finds it made reads the summary from JSON (the summary
    is JSON-able by contract, so it reads back equal).
    """
    out = shared_dir / 'fit.yaml'
    done = shared_dir / 'fit_summary.json'
    with FileLock(str(shared_dir / 'fit.lock')):
        if not done.exists():
            summary = identify(truth_bag, 'simreal_arm',
                               ['damping', 'frictionloss', 'armature', 'command_delay', 'mass'],
                               out, holdout=0.25)
            done.write_text(json.dumps(summary), encoding='utf-8')
    return json.loads(done.read_text(encoding='utf-8')), out
