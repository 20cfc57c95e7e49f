"""The legged bad inputs of the launch, each one ``error:`` line and exit 2 before anything runs.

A floating-base robot spec without its IMU, a policy spec whose terms the robot cannot feed
(the IMU terms on an arm without one), and fall detection asked of a robot without an IMU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simreal_ros.core.paths import resolve_named

ROBOTS = Path(resolve_named('robots', 'simreal_quad')).parent
POLICIES = Path(resolve_named('policies', 'so101_reach')).parent


def quad_without_imu(tmp_path: Path) -> str:
    data = yaml.safe_load((ROBOTS / 'simreal_quad.yaml').read_text())
    del data['base']['imu']
    data['model'] = str(ROBOTS.parents[1] / data['model'])  # urdf/simreal_quad.urdf
    path = tmp_path / 'quad_no_imu.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def so101_policy(tmp_path: Path, **change: object) -> str:
    data = yaml.safe_load((POLICIES / 'so101_reach.yaml').read_text())
    data['model'] = str(POLICIES / data['model'])
    for key, value in change.items():
        if key == 'observation':
            data['observation'] = [*data['observation'], value]
        else:
            data[key] = value
    path = tmp_path / 'so101_bad.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize('case', ['floating_without_imu', 'imu_term_without_imu',
                                  'fall_without_imu'])
def test_legged_bad_input_is_one_error_line(simreal_cli, tmp_path, case):
    if case == 'floating_without_imu':
        path = quad_without_imu(tmp_path)
        args, expected = [f'robot:={path}'], (f'robot:={path}: {path}: base.imu: expected the '
                                              'base IMU')
    elif case == 'imu_term_without_imu':
        path = so101_policy(tmp_path, observation={'term': 'projected_gravity'})
        args, expected = ['robot:=so101', f'policy:={path}'], (
            f'{path}: observation: expected terms that so101 can feed (it has no imu in its '
            "robot spec, so no imu/data), got ['goal', 'imu', 'joint_states']")
    else:
        path = so101_policy(tmp_path, fall={'enabled': True})
        args, expected = ['robot:=so101', f'policy:={path}'], (
            f'{path}: fall.enabled: expected false: fall detection reads imu/data and so101 '
            'has no imu in its robot spec, got True')
    r = simreal_cli('launch', 'backend:=sim', *args, '--dry-run')
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith('simreal launch: error: ') and expected in lines[0], lines[0]
