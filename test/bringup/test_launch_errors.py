"""A bad launch argument or file: one ``error:`` line before anything starts.

``simreal launch`` (real and ``--dry-run``) through the CLI's ``main`` in this process: the
planner loads every file an argument names, so each bad one is exactly one line naming the
argument, the full path, the key, what was expected and what was got, exit code 2, no
traceback and no plan printed. One real subprocess launch shows that no node starts.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

import pytest
import yaml

from simreal_ros.cli import main

REPO = Path(__file__).resolve().parents[2]
ARM = REPO / 'config' / 'robots' / 'simreal_arm.yaml'


def _missing(tmp: Path) -> tuple[list[str], str]:
    p = tmp / 'missing.yaml'
    return [f'overlay:={p}'], f"overlay:={p}: {p}: expected an existing file, got 'no such file'"


def _binary(tmp: Path) -> tuple[list[str], str]:
    p = tmp / 'policy.pt'  # a weights file (a zip: PK\x03\x04) where the policy spec belongs
    p.write_bytes(b'PK\x03\x04\x80\x00\x00')
    return [f'policy:={p}'], (f"policy:={p}: {p}: expected a UTF-8 YAML text file, got "
                              f"'binary data (byte 0x80 at offset 4 is not UTF-8)'")


def _malformed(tmp: Path) -> tuple[list[str], str]:
    p = tmp / 'overlay.yaml'
    p.write_text('robot: simreal_arm\njoints: {base_yaw: [1, 2}\n')
    return [f'overlay:={p}'], (f"overlay:={p}: {p}: expected valid YAML, got \"expected ',' "
                               f"or ']', but got '}}' at line 2, column 25\"")


def _wrong_key(tmp: Path) -> tuple[list[str], str]:
    p = tmp / 'scene.yaml'
    p.write_text('floor: true\nfloorz: 1\n')
    return [f'scene:={p}'], (f'scene:={p}: {p}: floorz: expected one of the known keys '
                             f"(description, floor, light, objects), got 'unknown key'")


def _no_limits(tmp: Path) -> tuple[list[str], str]:
    data = yaml.safe_load(ARM.read_text())
    del data['joints'][0]['limits']
    data['urdf'] = str(REPO / 'urdf' / 'simreal_arm.urdf')
    p = tmp / 'arm.yaml'
    p.write_text(yaml.safe_dump(data))
    return [f'robot:={p}'], (f'robot:={p}: {p}: joints[0].limits: expected this key to be '
                             f"present, got 'missing'")


def _misspelled(_tmp: Path) -> tuple[list[str], str]:
    return ['overlay_bb:=worn_arm'], "unknown launch argument 'overlay_bb'; did you mean " \
        "'overlay_b'?"


CASES = {'missing': _missing, 'binary': _binary, 'malformed_yaml': _malformed,
         'wrong_key': _wrong_key, 'spec_without_limits': _no_limits,
         'misspelled_argument': _misspelled}


@pytest.mark.parametrize('dry_run', [True, False], ids=['dry_run', 'launch'])
@pytest.mark.parametrize('case', sorted(CASES))
def test_one_error_line_and_exit_2(case: str, dry_run: bool, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    args, message = CASES[case](tmp_path)
    rc = main(['launch', 'backend:=sim', *args, *(['--dry-run'] if dry_run else [])])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.splitlines() == [f'simreal launch: error: {message}']
    assert out == ''  # no plan printed, no node started


def test_a_camera_calibration_the_robot_names_is_loaded(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    cal = tmp_path / 'ost.yaml'
    cal.write_bytes(b'\xff\xfe binary')
    data = yaml.safe_load(ARM.read_text())
    data['urdf'] = str(REPO / 'urdf' / 'simreal_arm.urdf')
    data['cameras'][0]['calibration'] = str(cal)
    arm = tmp_path / 'arm.yaml'
    arm.write_text(yaml.safe_dump(data))
    assert main(['launch', f'robot:={arm}', '--dry-run']) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"simreal launch: error: robot:={arm}: {cal}: expected a UTF-8 YAML text file, got "
        f"'binary data (byte 0xff at offset 0 is not UTF-8)'"]


def test_a_missing_policy_weights_file_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((REPO / 'config' / 'policies' / 'simreal_arm_reach.yaml').read_text())
    data['model'] = 'gone.pt'
    spec = tmp_path / 'reach.yaml'
    spec.write_text(yaml.safe_dump(data))
    assert main(['launch', f'policy:={spec}', '--dry-run']) == 2
    assert capsys.readouterr().err.splitlines() == [
        f'simreal launch: error: policy:={spec}: {spec}: model: expected an existing '
        f"TorchScript or ONNX file (train one with simreal train), got "
        f"'{tmp_path / 'gone.pt'} (no such file)'"]


def test_a_real_launch_with_a_bad_file_starts_no_process(tmp_path: Path,
                                                         ros_env: dict[str, str]) -> None:
    bag = tmp_path / 'bag'  # the recorder would create it at its start
    missing = tmp_path / 'missing.yaml'
    env = {**os.environ, **ros_env, 'PYTHONPATH': str(REPO)}
    proc = subprocess.run(
        [sys.executable, '-m', 'simreal_ros', 'launch', 'backend:=sim', 'record:=true',
         f'bag:={bag}', f'overlay:={missing}'],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"simreal launch: error: overlay:={missing}: {missing}: expected an existing file, "
        f"got 'no such file'"]
    assert proc.stdout == ''  # no '[launch] started ...' line
    assert not bag.exists()


def test_eval_with_a_weights_file_as_its_policy_is_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    weights = tmp_path / 'reach.pt'
    weights.write_bytes(b'PK\x03\x04\x80\x00\x00')
    assert main(['eval', '--policy', str(weights)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"simreal eval: error: policy:={weights}: {weights}: expected a UTF-8 YAML text file, "
        f"got 'binary data (byte 0x80 at offset 4 is not UTF-8)'"]
    assert 'Traceback' not in out


def test_a_sim_bridge_started_alone_on_a_bad_file_ends_with_one_line(
        tmp_path: Path, ros_env: dict[str, str]) -> None:
    """``ros2 run`` skips the planner: the node's start fails, and its teardown must not."""
    weights = tmp_path / 'overlay.pt'
    weights.write_bytes(b'PK\x03\x04\x80\x00\x00')
    env = {**os.environ, **ros_env, 'PYTHONPATH': str(REPO)}
    proc = subprocess.run(
        [sys.executable, '-m', 'simreal_ros.bringup.node_main', 'simreal_ros.nodes.sim_bridge',
         '--ros-args', '-p', f'overlay:={weights}'],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert (proc.stdout + proc.stderr).splitlines() == [
        f"error: {weights}: expected a UTF-8 YAML text file, got 'binary data (byte 0x80 at "
        f"offset 4 is not UTF-8)'"]


def test_a_leader_calibration_that_is_not_yaml_is_one_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    cal = tmp_path / 'leader.yaml'
    cal.write_bytes(b'robot: simreal_arm\n\x00\x01')
    assert main(['launch', 'backend:=sim', 'teleop:=leader', 'leader_port:=/dev/ttyUSB1',
                 f'leader_calibration:={cal}', '--dry-run']) == 2
    assert capsys.readouterr().err.splitlines() == [
        f'simreal launch: error: leader_calibration:={cal}: {cal}: expected a UTF-8 YAML text '
        f"file, got 'binary data (a NUL byte at offset 19)'"]
