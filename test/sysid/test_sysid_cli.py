"""simreal sysid on bad input: one ``error:`` line, exit 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simreal_ros.bag import BagWriter, TypeRegistry
from simreal_ros.cli import main
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sysid.synth import T0_NS, _msg, record_sim_bag

ROBOT = load_robot('simreal_arm')
JS = 'sensor_msgs/msg/JointState'


def _bag(path: Path, topics: tuple[str, ...], names: list[str] | None = None,
         seconds: float = 4.0, custom: dict[str, str] | None = None) -> Path:
    names = names or ROBOT.joint_names
    types = TypeRegistry()
    with BagWriter(path, custom_data=custom or {'backend': 'sim'}, types=types) as w:
        handles = [w.add_topic(t, JS) for t in topics]
        for k in range(int(seconds * 100)):
            t = T0_NS + k * 10_000_000
            for h in handles:
                w.write(h, t, _msg(types, t, names, np.zeros(len(names)), np.zeros(len(names))))
    return path


@pytest.fixture(scope='module')
def good_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_sim_bag(tmp_path_factory.mktemp('cli') / 'good', ROBOT, None,
                          ExcitationConfig(pattern='sysid', duration_s=4.0, seed=0))


def _run(capsys, args: list[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _fails(capsys, tmp_path: Path, args: list[str], expect: str) -> None:
    out = tmp_path / 'fit.yaml'
    code, stdout, stderr = _run(capsys, ['sysid', *args, '--out', str(out)])
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, (code, stderr)
    assert len(lines) == 1, stderr
    assert lines[0].startswith('simreal sysid: error: '), lines
    assert expect in lines[0], lines[0]
    assert 'Traceback' not in stderr and stdout == ''
    assert not out.exists() and not (tmp_path / 'fit.yaml.tmp').exists()


def test_no_command_topic(capsys, tmp_path):
    bag = _bag(tmp_path / 'b', ('/joint_states',))
    _fails(capsys, tmp_path, [str(bag)], 'has no command topic')


def test_no_state_topic(capsys, tmp_path):
    bag = _bag(tmp_path / 'b', ('/joint_commands',))
    _fails(capsys, tmp_path, [str(bag)], 'has no state topic')


def test_too_short(capsys, tmp_path):
    bag = _bag(tmp_path / 'b', ('/joint_commands', '/joint_states'), seconds=1.0)
    _fails(capsys, tmp_path, [str(bag)], 'commands flow for only 0.99 s')


def test_bag_of_another_robot(capsys, tmp_path):
    names = [f'j{i}' for i in range(6)]
    bag = _bag(tmp_path / 'b', ('/joint_commands', '/joint_states'), names=names)
    _fails(capsys, tmp_path, [str(bag)], 'not the joints of simreal_arm')


def test_bag_recorded_with_another_robot_spec(capsys, tmp_path):
    bag = _bag(tmp_path / 'b', ('/joint_commands', '/joint_states'),
               custom={'backend': 'sim', 'robot_spec': 'robot: other_arm\n'})
    _fails(capsys, tmp_path, [str(bag)], 'recorded with another robot (robot: other_arm)')


def test_unknown_joint(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--joints', 'base_yaw,elbow'],
           "--joints 'elbow' is not a joint of simreal_arm")


def test_unknown_body(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--fit', 'mass', '--bodies', 'gripper'],
           "--bodies 'gripper' is not a moving body")


def test_bodies_without_mass(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--bodies', 'forearm_link'], 'add mass to --fit')


def test_bad_fit_name(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--fit', 'damping,stiffness'],
           "--fit 'stiffness' is not a parameter")


@pytest.mark.parametrize('holdout', ['0.7', '-0.1', 'nan'])
def test_bad_holdout(capsys, tmp_path, good_bag, holdout):
    _fails(capsys, tmp_path, [str(good_bag), f'--holdout={holdout}'], '--holdout')


def test_holdout_too_short_for_the_bag(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--holdout', '0.1'],
           'the held-out part would be 0.40 s')


def test_unknown_robot(capsys, tmp_path, good_bag):
    _fails(capsys, tmp_path, [str(good_bag), '--robot', 'no_such_robot'], '--robot')


def test_missing_bag(capsys, tmp_path):
    _fails(capsys, tmp_path, [str(tmp_path / 'nothing')], 'no bag at')


def test_existing_out_is_not_overwritten(capsys, tmp_path, good_bag):
    out = tmp_path / 'fit.yaml'
    out.write_text('keep')
    code, _, stderr = _run(capsys, ['sysid', str(good_bag), '--out', str(out)])
    assert code == 2 and 'exists already' in stderr and out.read_text() == 'keep'


def test_validate_errors(capsys, tmp_path, good_bag):
    code, stdout, stderr = _run(capsys, ['sysid', 'validate', str(good_bag), '--horizons',
                                         '0.05,x'])
    assert code == 2 and stderr.count('error:') == 1 and '--horizons' in stderr
    code, stdout, stderr = _run(capsys, ['sysid', 'validate', str(good_bag), '--overlay',
                                         'no_such_overlay'])
    assert code == 2 and stderr.count('error:') == 1 and 'Traceback' not in stderr
    code, stdout, stderr = _run(capsys, ['sysid', 'validate', str(good_bag), '--fit',
                                         'damping'])
    assert code == 2 and 'an option of the fit' in stderr


def test_validate_json(capsys, good_bag):
    import json
    code, stdout, _ = _run(capsys, ['sysid', 'validate', str(good_bag), '--json'])
    assert code == 0
    res = json.loads(stdout)
    assert res['open_loop']['total_rad'] < 1e-12
    assert set(res['k_step']) == {'0.05', '0.2', '1'}
