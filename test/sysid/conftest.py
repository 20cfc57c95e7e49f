"""Shared sysid fixtures: in-process sim-bridge bags with a known overlay, fitted once."""

from __future__ import annotations

from pathlib import Path

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
def truth_overlay(sysid_dir: Path) -> Path:
    """The known overlay of the recovery bag."""
    p = sysid_dir / 'truth.yaml'
    p.write_text(TRUTH_YAML, encoding='utf-8')
    return p


@pytest.fixture(scope='session')
def truth_bag(sysid_dir: Path, truth_overlay: Path) -> Path:
    """14 s of pattern:=sysid on the bridge physics with the known overlay."""
    return record_sim_bag(sysid_dir / 'truth_bag', ROBOT, load_overlay(truth_overlay),
                          ExcitationConfig(pattern='sysid', duration_s=14.0, seed=2))


@pytest.fixture(scope='session')
def nominal_bag(sysid_dir: Path) -> Path:
    """6 s of pattern:=sysid on the nominal bridge physics."""
    return record_sim_bag(sysid_dir / 'nominal_bag', ROBOT, None,
                          ExcitationConfig(pattern='sysid', duration_s=6.0, seed=5))


@pytest.fixture(scope='session')
def fitted(sysid_dir: Path, truth_bag: Path) -> tuple[dict, Path]:
    """The summary and overlay of one fit of every parameter kind on the truth bag."""
    out = sysid_dir / 'fit.yaml'
    summary = identify(truth_bag, 'simreal_arm',
                       ['damping', 'frictionloss', 'armature', 'command_delay', 'mass'], out,
                       holdout=0.25)
    return summary, out
