"""record:=true in the planner: the recorder node, its pairing per mode, embedded configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from startup import cli_error_line

from simreal_ros.bringup.arguments import parse_launch_args
from simreal_ros.bringup.planner import plan
from simreal_ros.bringup.record_plan import PAIRING, recorder_spec
from simreal_ros.errors import PlanError


def _recorder(nodes):
    found = [n for n in nodes if n.kind == 'recorder']
    assert len(found) == 1, nodes
    return found[0]


def test_no_recorder_unless_asked():
    assert not [n for n in plan({'backend': 'sim2sim'}) if n.kind == 'recorder']


def test_sim2sim_pairs_sim_a_with_sim_b_and_embeds_configs(tmp_path):
    rec = _recorder(plan({'backend': 'sim2sim', 'record': 'true', 'bag': str(tmp_path / 'b'),
                          'overlay_b': 'worn_arm', 'record_topics': '/sim_a/*, joint_commands'}))
    p = rec.parameters
    assert rec.executable == 'simreal_recorder' and rec.fqn == '/recorder'
    assert (p['gap_primary'], p['gap_secondary']) == PAIRING['sim2sim']
    assert p['topics'] == ['/sim_a/*', 'joint_commands']
    assert p['bag'] == str(tmp_path / 'b')
    embedded = dict(e.split('=', 1) for e in p['embed'])
    assert set(embedded) == {'robot_spec', 'robot_spec.urdf', 'overlay_b'}
    assert all(Path(v).is_file() for v in embedded.values())
    assert embedded['robot_spec.urdf'].endswith('simreal_arm.urdf')
    assert 'backend=sim2sim' in p['custom_data']
    assert {'engine_a=mujoco', 'engine_b=mujoco'} <= set(p['custom_data'])
    assert p['use_sim_time'] is False


def test_sim2sim_across_engines_names_both_in_the_bag():
    rec = _recorder(plan({'backend': 'sim2sim', 'record': 'true', 'engine_b': 'pybullet'}))
    engines = [c for c in rec.parameters['custom_data'] if c.startswith('engine')]
    assert engines == ['engine_a=mujoco', 'engine_b=pybullet']


def test_policy_spec_and_its_weights_are_embedded_and_hashed():
    from simreal_ros.bag.provenance import embed_files
    rec = _recorder(plan({'backend': 'sim', 'record': 'true', 'policy': 'simreal_arm_reach'}))
    embedded = dict(e.split('=', 1) for e in rec.parameters['embed'])
    assert embedded['policy_spec.model'].endswith('simreal_arm_reach.pt')
    custom = embed_files(embedded)
    assert 'model:' in custom['policy_spec'] and len(custom['policy_spec.model.sha256']) == 64
    assert 'policy_spec.model' not in custom  # binary weights: hashed, not embedded as text
    assert '<robot' in custom['robot_spec.urdf']


def test_namespace_prefixes_the_pairing_and_sim_backend_has_none():
    rec = _recorder(plan({'backend': 'sim2sim', 'record': 'true', 'namespace': 'lab'}))
    assert rec.namespace == '/lab'
    assert rec.parameters['gap_primary'] == '/lab/sim_a/joint_states'
    rec = _recorder(plan({'backend': 'sim', 'record': 'true', 'timing': 'free'}))
    assert 'gap_primary' not in rec.parameters or rec.parameters['gap_primary'] == ''
    assert rec.parameters['use_sim_time'] is True


def test_twin_pairing_is_root_vs_twin():
    a = parse_launch_args({'backend': 'twin', 'record': 'true'})
    p = recorder_spec(a).parameters
    assert (p['gap_primary'], p['gap_secondary']) == ('joint_states', 'twin/joint_states')


def test_bad_record_arguments():
    with pytest.raises(PlanError, match='record:='):
        plan({'record': 'yes'})
    with pytest.raises(PlanError, match='record_topics'):
        plan({'record': 'true', 'record_topics': ' , '})
    with pytest.raises(PlanError, match=r"bag_storage:='db3'.*'mcap', 'sqlite3'"):
        plan({'record': 'true', 'bag_storage': 'db3'})
    with pytest.raises(PlanError, match='bag_split_duration.*>= 0'):
        plan({'record': 'true', 'bag_split_duration': '-1'})
    with pytest.raises(PlanError, match='bag_split_size.*a number'):
        plan({'record': 'true', 'bag_split_size': 'big'})


def test_storage_compression_and_split_reach_the_recorder():
    p = _recorder(plan({'record': 'true'})).parameters
    assert (p['storage'], p['compression'], p['split_duration_s'], p['split_size_mb']) == (
        'mcap', 'none', 0.0, 0.0)
    p = _recorder(plan({'record': 'true', 'bag_storage': 'sqlite3', 'bag_compression': 'zstd',
                        'bag_split_duration': '30', 'bag_split_size': '500'})).parameters
    assert (p['storage'], p['compression'], p['split_duration_s'], p['split_size_mb']) == (
        'sqlite3', 'zstd', 30.0, 500.0)


def test_with_latency_the_gap_compares_the_undelayed_primary():
    from simreal_ros.bringup.planner import plan
    rec = [n for n in plan({'backend': 'sim2sim', 'latency': 'wifi', 'record': 'true',
                            'bag': '/tmp/x'}) if n.kind == 'recorder'][0]
    assert rec.parameters['gap_primary'] == 'sim_a/backend/joint_states'
    assert rec.parameters['gap_secondary'] == 'sim_b/joint_states'


CAMERA_TOPICS_SIM2SIM = ['/sim_a/camera/image_raw', '/sim_a/camera/camera_info',
                         '/sim_a/backend/camera/image_raw', '/sim_a/backend/camera/camera_info',
                         '/sim_b/camera/image_raw', '/sim_b/camera/camera_info']


def test_record_images_auto_leaves_cameras_out_of_the_star_by_default():
    p = _recorder(plan({'backend': 'sim2sim', 'record': 'true'})).parameters
    assert p['topics'] == ['*']
    assert p['exclude'] == ['/rosout', '/parameter_events'] + CAMERA_TOPICS_SIM2SIM
    assert 'record_images=auto' in p['custom_data']
    # a camera asked for by name or by a pattern other than the bare '*' is recorded
    p = _recorder(plan({'backend': 'sim2sim', 'record': 'true',
                        'record_topics': '*,sim_a/camera/image_raw,/sim_b/camera/*'})).parameters
    assert p['exclude'] == ['/rosout', '/parameter_events', '/sim_a/camera/camera_info',
                            '/sim_a/backend/camera/image_raw',
                            '/sim_a/backend/camera/camera_info']
    # every camera asked for: nothing but the recorder's own defaults to exclude
    p = _recorder(plan({'backend': 'sim2sim', 'record': 'true',
                        'record_topics': '/sim_a/*,/sim_b/*'})).parameters
    assert 'exclude' not in p


def test_record_images_true_false_and_namespaces():
    p = _recorder(plan({'backend': 'sim2sim', 'record': 'true',
                        'record_images': 'true'})).parameters
    assert 'exclude' not in p and 'record_images=true' in p['custom_data']
    p = _recorder(plan({'backend': 'twin', 'port': '/dev/ttyUSB0', 'record': 'true',
                        'namespace': 'lab',
                        'record_images': 'false', 'record_topics': '*,lab/*'})).parameters
    assert p['exclude'] == ['/rosout', '/parameter_events', '/lab/camera/image_raw',
                            '/lab/camera/camera_info', '/lab/backend/camera/image_raw',
                            '/lab/backend/camera/camera_info', '/lab/twin/camera/image_raw',
                            '/lab/twin/camera/camera_info']


def test_bad_record_images_is_one_line(simreal_cli):
    with pytest.raises(PlanError, match=r"^record_images:='yes' is not valid; choose one of "
                                        r"\['auto', 'true', 'false'\]$"):
        plan({'record': 'true', 'record_images': 'yes'})
    with pytest.raises(PlanError, match=r'^record_topics:= names sim_a/camera/image_raw but '
                                        r'record_images:=false leaves camera topics out'):
        plan({'backend': 'sim2sim', 'record': 'true', 'record_images': 'false',
              'record_topics': 'joint_commands,sim_a/camera/image_raw'})
    r = simreal_cli('launch', 'backend:=sim2sim', 'record:=true', 'record_images:=maybe',
                    '--dry-run')
    assert cli_error_line(r) == ("simreal launch: error: record_images:='maybe' is not valid; "
                                 "choose one of ['auto', 'true', 'false']")
