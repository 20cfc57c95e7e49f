"""The planner's policy:= argument: node kind policy in every mode, and its refusals."""

from __future__ import annotations

from plans import plan_without_tf as plan
import pytest
import yaml

from simreal_ros.errors import PlanError
from simreal_ros.policy.spec import load_policy_spec

SPEC = load_policy_spec('simreal_arm_reach')


def _policy(nodes):
    found = [n for n in nodes if n.kind == 'policy']
    assert len(found) == 1, nodes
    return found[0]


def test_policy_in_sim_at_the_root():
    nodes = plan({'backend': 'sim', 'policy': 'simreal_arm_reach'})
    assert [n.kind for n in nodes] == ['sim_bridge', 'policy']
    p = _policy(nodes)
    assert p.fqn == '/policy' and p.executable == 'simreal_policy'
    assert p.module == 'simreal_ros.nodes.policy' and p.remappings == ()
    assert p.parameters == {'policy': str(SPEC.source), 'robot': 'simreal_arm',
                            'use_sim_time': False, 'sync_to_states': False,
                            'enable_on_start': False}
    assert p.required and not p.exit_ends_launch


def test_policy_follows_timing_and_autostart():
    p = _policy(plan({'policy': 'simreal_arm_reach', 'timing': 'lockstep',
                      'policy_autostart': 'true'}))
    assert p.parameters['use_sim_time'] and p.parameters['sync_to_states']
    assert p.parameters['enable_on_start']
    p = _policy(plan({'policy': 'simreal_arm_reach', 'sim_time': 'true'}))
    assert p.parameters['use_sim_time'] and not p.parameters['sync_to_states']
    p = _policy(plan({'policy': 'simreal_arm_reach', 'timing': 'free'}))
    assert p.parameters['use_sim_time']


def test_policy_in_sim2sim_observes_the_primary():
    nodes = plan({'backend': 'sim2sim', 'policy': 'simreal_arm_reach', 'namespace': 'arm'})
    p = _policy(nodes)
    assert p.namespace == '/arm'
    assert dict(p.remappings) == {'joint_states': '/arm/sim_a/joint_states',
                                  'imu/data': '/arm/sim_a/imu/data'}
    bridges = [n for n in nodes if n.kind == 'sim_bridge']
    assert all(dict(b.remappings)['joint_commands'] == '/arm/joint_commands' for b in bridges)


def test_policy_by_path(tmp_path):
    p = _policy(plan({'policy': str(SPEC.source)}))
    assert p.parameters['policy'] == str(SPEC.source)


def test_policy_and_excite_are_refused_together():
    with pytest.raises(PlanError, match='both publish joint_commands'):
        plan({'policy': 'simreal_arm_reach', 'excite': 'chirp'})


def test_real_backend_gives_the_planner_reason_before_the_policy():
    with pytest.raises(PlanError, match='port:='):
        plan({'backend': 'real', 'policy': 'simreal_arm_reach'})
    nodes = plan({'backend': 'real', 'port': '/dev/null', 'policy': 'simreal_arm_reach'})
    assert [n.kind for n in nodes] == ['dynamixel_driver', 'policy']
    p = _policy(nodes)  # the policy drives the hardware driver at the root
    assert p.fqn == '/policy' and p.remappings == ()
    assert p.parameters['policy'] == str(SPEC.source) and p.parameters['robot'] == 'simreal_arm'


@pytest.mark.parametrize('mutation,expected', [
    ({'robot': 'no_such_robot'}, 'no_such_robot'),
    ({'model': 'missing.pt'}, r'bad\.yaml: model: expected an existing TorchScript or ONNX '
                              r"file .*, got '.*missing\.pt \(no such file\)'"),
    ({'observation': []}, 'observation'),
])
def test_bad_policies_fail_the_plan(tmp_path, mutation, expected):
    data = yaml.safe_load(SPEC.source.read_text())
    data.update(mutation)
    data.setdefault('model', str(SPEC.model))
    if 'model' not in mutation:
        data['model'] = str(SPEC.model)
    p = tmp_path / 'bad.yaml'
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError, match=expected):
        plan({'policy': str(p)})
    with pytest.raises(PlanError, match='shipped names'):
        plan({'policy': 'no_such_policy'})


def test_policy_for_another_robot_is_refused(tmp_path):
    robot = yaml.safe_load((SPEC.source.parents[1] / 'robots' / 'simreal_arm.yaml').read_text())
    robot['robot'] = 'other_arm'
    robot['urdf'] = str(SPEC.source.parents[2] / 'urdf' / 'simreal_arm.urdf')
    rp = tmp_path / 'other_arm.yaml'
    rp.write_text(yaml.safe_dump(robot))
    with pytest.raises(PlanError) as info:
        plan({'policy': 'simreal_arm_reach', 'robot': str(rp)})
    assert str(info.value) == (f'policy:=simreal_arm_reach: {SPEC.source}: robot: expected '
                               f"'other_arm' (the robot being driven), got 'simreal_arm'")


def test_an_image_policy_needs_its_cameras_and_sees_the_primary_in_sim2sim(tmp_path):
    data = yaml.safe_load(SPEC.source.read_text())
    data['model'] = str(SPEC.model)
    data['observation'].append({'term': 'image', 'camera': 'camera', 'size': [8, 8]})
    spec = tmp_path / 'seeing.yaml'
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError, match=r"sees cameras \['camera'\] \(image terms\), but "
                       'cameras:=false publishes no frames'):
        plan({'policy': str(spec), 'cameras': 'false'})
    p = _policy(plan({'backend': 'sim2sim', 'policy': str(spec)}))
    assert dict(p.remappings)['camera/image_raw'] == '/sim_a/camera/image_raw'
