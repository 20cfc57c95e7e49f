"""``calibration:=CAL.yaml``: checked against the robot before anything starts, then handed to
the driver (the file's absolute path; the driver applies it and checks the Homing Offsets).

Each bad calibration is one ``error:`` line naming the argument, the file, the key, what was
expected and what was got, exit code 2 like every other plan error, no plan printed.
"""

from __future__ import annotations

import os
from pathlib import Path

from calibration_files import write_calibration
import pytest

from simreal_ros.bringup.planner import plan
from simreal_ros.cli import main


def _other_robot(tmp: Path) -> tuple[list[str], str]:
    p = write_calibration(tmp / 'cal.yaml', robot='so101')
    return [f'calibration:={p}'], (f"calibration:={p}: {p}: robot: expected simreal_arm (the "
                                   f"robot being calibrated), got 'so101'")


def _wrong_id(tmp: Path) -> tuple[list[str], str]:
    p = write_calibration(tmp / 'cal.yaml', elbow_pitch=(7, 0, 0, 100, 3996))
    return [f'calibration:={p}'], (f'calibration:={p}: {p}: joints.elbow_pitch.servo_id: '
                                   f'expected servo id 3 (the id of joint elbow_pitch in '
                                   f'simreal_arm), got 7')


def _offset_out_of_range(tmp: Path) -> tuple[list[str], str]:
    p = write_calibration(tmp / 'cal.yaml', base_yaw=(1, 1_044_480, 0, 100, 4000))
    return [f'calibration:={p}'], (
        f'calibration:={p}: {p}: joints.base_yaw.homing_offset: expected an offset within '
        f'+-1044479 ticks (the largest the dynamixel Homing Offset register holds; recalibrate '
        f'with the offsets reset to 0 first), got 1044480')


def _other_family(tmp: Path) -> tuple[list[str], str]:
    p = write_calibration(tmp / 'cal.yaml')
    p.write_text(p.read_text().replace('family: dynamixel', 'family: feetech'))
    return [f'calibration:={p}'], (f"calibration:={p}: {p}: family: expected dynamixel "
                                   f"(bus.family of simreal_arm), got 'feetech'")


def _sim_backend(tmp: Path) -> tuple[list[str], str]:
    p = write_calibration(tmp / 'cal.yaml')
    return [f'calibration:={p}', 'backend:=sim'], (
        f'calibration:={p}: the servo driver applies a calibration: use it with backend:=real '
        f'or twin and real_driver:=dynamixel (got backend:=sim real_driver:=dynamixel)')


CASES = {'other_robot': _other_robot, 'wrong_servo_id': _wrong_id,
         'offset_out_of_range': _offset_out_of_range, 'other_family': _other_family,
         'sim_backend': _sim_backend}


@pytest.mark.parametrize('dry_run', [True, False], ids=['dry_run', 'launch'])
@pytest.mark.parametrize('case', sorted(CASES))
def test_a_bad_calibration_is_one_error_line_and_exit_2(case: str, dry_run: bool,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    args, message = CASES[case](tmp_path)
    rc = main(['launch', 'backend:=real', f'port:={tmp_path / "ttyDXL"}', *args,
               *(['--dry-run'] if dry_run else [])])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.splitlines() == [f'simreal launch: error: {message}']
    assert out == ''  # no plan printed, no node started


@pytest.mark.parametrize('backend', ['real', 'twin'])
def test_the_driver_gets_the_calibration_as_an_absolute_path(backend: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    write_calibration(tmp_path / 'cal.yaml')
    monkeypatch.chdir(tmp_path)
    nodes = plan({'backend': backend, 'port': '/dev/ttyUSB0', 'calibration': 'cal.yaml'})
    (driver,) = [n for n in nodes if n.kind == 'dynamixel_driver']
    assert driver.parameters['calibration'] == os.path.join(tmp_path, 'cal.yaml')
    (plain,) = [n for n in plan({'backend': backend, 'port': '/dev/ttyUSB0'})
                if n.kind == 'dynamixel_driver']
    assert 'calibration' not in plain.parameters
