"""``simreal robot check NAME|FILE``: each kind of problem is one line with its fix; exit 1.

Every case starts from the clean 2-DoF arm of test/robot_files.py and breaks one thing (or
several, which must all be reported).
"""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest
from robot_files import PACKAGE, spec_data, urdf_text, write_description_package, write_spec

from simreal_ros.core.model_files import MODEL_PATH_ENV

REPO = Path(__file__).resolve().parents[2]
URI = f'package://{PACKAGE}/urdf/my_arm.urdf'
SEP = ' — '


@pytest.fixture
def arm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The description package under tmp_path, found through SIMREAL_MODEL_PATH."""
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))
    return write_description_package(tmp_path)


def problem_lines(r: subprocess.CompletedProcess, count: int) -> list[str]:
    """The problem lines of a check that found ``count``; it must exit 1, no traceback."""
    lines = r.stdout.splitlines()
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'Traceback' not in r.stdout + r.stderr
    assert lines[-1] == f'{count} problem{"s" if count != 1 else ""} found', r.stdout
    assert len(lines) == count + 1, r.stdout
    assert all(SEP in line for line in lines[:-1]), r.stdout
    return lines[:-1]


def joint(data: dict[str, Any], i: int, **changes: Any) -> dict[str, Any]:
    data['joints'][i].update(changes)
    return data


def test_the_shipped_arm_and_a_clean_new_arm_pass(simreal_cli, arm, tmp_path):
    r = simreal_cli('robot', 'check', 'simreal_arm')
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"{REPO}/config/robots/simreal_arm.yaml: robot 'simreal_arm' is OK: 6 joints (base_yaw, "
        'shoulder_pitch, elbow_pitch, forearm_roll, wrist_pitch, wrist_roll), URDF model '
        f'{REPO}/urdf/simreal_arm.urdf, dynamixel servo IDs [1, 2, 3, 4, 5, 6]']
    spec = write_spec(tmp_path / 'my_arm.yaml', spec_data(URI))
    r = simreal_cli('robot', 'check', str(spec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"{spec}: robot 'my_arm' is OK: 2 joints (shoulder, elbow), URDF model {arm}, "
        'dynamixel servo IDs [1, 2]']


@pytest.mark.parametrize('change, line', [
    (lambda d: joint(d, 1, name='wrist'),
     "{spec}: joint 'wrist' is not in my_arm.urdf — name one of the URDF joints ['elbow', "
     "'shoulder', 'tool_joint']"),
    (lambda d: joint(d, 1, name='tool_joint'),
     "{spec}: joint 'tool_joint' is fixed in my_arm.urdf — drive only revolute joints (a "
     'servo turns), or fix the URDF'),
    (lambda d: joint(d, 0, limits={'lower': -1.7, 'upper': 1.5, 'velocity': 4, 'effort': 1}),
     "{spec}: limits of 'shoulder' [-1.7, 1.5] rad exceed the URDF limits [-1.6, 1.6] — "
     "narrow the spec's limits to within the URDF's, or widen the URDF's"),
    (lambda d: joint(d, 0, limits={'lower': 1.0, 'upper': -1.0, 'velocity': 4, 'effort': 1}),
     '{spec}: joints[0].limits.upper is -1.0 — make it a number > lower (1.0)'),
    (lambda d: joint(d, 1, home=2.5),
     '{spec}: joints[1].home is 2.5 — make it a position within [-1.9, 1.9]'),
    (lambda d: joint(d, 1, servo_id=1),
     '{spec}: joints[1].servo_id is 1 — make it a servo id not used before'),
    (lambda d: {**d, 'tool_frame': 'gripper'},
     "{spec}: tool_frame 'gripper' is not a link of my_arm.urdf — name one of ['base_link', "
     "'l1', 'l2', 'tool0']"),
])
def test_each_spec_problem_is_one_line(simreal_cli, arm, tmp_path, change, line):
    spec = write_spec(tmp_path / 'my_arm.yaml', change(spec_data(URI)))
    r = simreal_cli('robot', 'check', str(spec))
    assert problem_lines(r, 1) == [line.format(spec=spec)]


def test_model_problems_are_one_line_each(simreal_cli, arm, tmp_path):
    text = urdf_text().replace('<mass value="0.3"/>', '<mass value="0.0"/>', 1)
    text = text.replace('ixx="4e-4" iyy="4e-4" izz="5e-5"', 'ixx="1e-4" iyy="1e-4" izz="5e-4"',
                        2)
    text = text.replace('meshes/l2.stl', 'meshes/l2.dae', 1)
    write_description_package(tmp_path, text)
    (tmp_path / PACKAGE / 'meshes' / 'l2.dae').write_text('<COLLADA/>')
    (tmp_path / PACKAGE / 'meshes' / 'l1.stl').unlink()
    spec = write_spec(tmp_path / 'my_arm.yaml', spec_data(URI))
    lines = problem_lines(simreal_cli('robot', 'check', str(spec)), 5)
    mesh = tmp_path / PACKAGE / 'meshes'
    inertia = ('give each link a mass > 0 and the principal moments of a real body (CAD tools '
               'export them; a box of size a, b, c has ixx = m (b² + c²) / 12, ...)')
    assert lines == [
        f"{arm}: mesh 'package://{PACKAGE}/meshes/l1.stl' of 'l1' is not found — "
        f'{mesh / "l1.stl"} does not exist',
        f"{arm}: mesh 'package://{PACKAGE}/meshes/l2.dae' of 'l2' is .dae, which MuJoCo does "
        'not load — convert it to STL or OBJ (e.g. with Blender or meshlab)',
        f"{arm}: mass 0.0 kg of 'l1' is not > 0 — {inertia}",
        f"{arm}: inertia [0.0001, 0.0001, 0.0005] of 'l1' breaks the triangle inequality "
        f'(ixx + iyy >= izz and its turns) — {inertia}',
        f"{arm}: inertia [0.0001, 0.0001, 0.0005] of 'l2' breaks the triangle inequality "
        f'(ixx + iyy >= izz and its turns) — {inertia}',
    ]


def test_all_problems_are_reported_not_just_the_first(simreal_cli, arm, tmp_path):
    data = joint(joint(spec_data(URI), 0, home=3.0), 1, servo_id=1, name='wrist')
    spec = write_spec(tmp_path / 'my_arm.yaml', data)
    lines = problem_lines(simreal_cli('robot', 'check', str(spec)), 3)
    assert [line.split(SEP)[0] for line in lines] == [
        f'{spec}: joints[0].home is 3.0', f'{spec}: joints[1].servo_id is 1',
        f"{spec}: joint 'wrist' is not in my_arm.urdf"]


def test_a_package_that_is_not_found_says_where_to_look(simreal_cli, arm, tmp_path,
                                                        monkeypatch):
    spec = write_spec(tmp_path / 'my_arm.yaml', spec_data(f'{PACKAGE}/urdf/my_arm.urdf'))
    monkeypatch.delenv(MODEL_PATH_ENV)
    monkeypatch.setenv('AMENT_PREFIX_PATH', '')
    lines = problem_lines(simreal_cli('robot', 'check', str(spec)), 2)
    assert lines[0] == (
        f"{arm}: mesh 'package://{PACKAGE}/meshes/l1.stl' of 'l1' is not found — package "
        f"'{PACKAGE}' not found: add the directory holding the {PACKAGE} folder to "
        "SIMREAL_MODEL_PATH (now '') or source the ROS workspace that installs it "
        '(AMENT_PREFIX_PATH)')


def test_a_missing_model_is_one_line_in_a_real_process(arm, tmp_path):
    spec = write_spec(tmp_path / 'my_arm.yaml', spec_data('gone.urdf'))
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'robot', 'check', str(spec)],
                       capture_output=True, text=True, timeout=120)
    lines = problem_lines(r, 1)
    assert lines[0].startswith(f"{spec}: model is 'gone.urdf (")
    assert lines[0].endswith(" does not exist)' — make it a URDF or MJCF file "
                             '(package://PKG/..., file://..., or a path)')
