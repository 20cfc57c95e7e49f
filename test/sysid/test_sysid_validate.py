"""validate's figures on bags whose truth is known."""

from __future__ import annotations

from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sysid.api import validate
from simreal_ros.sysid.synth import record_sim_bag

ROBOT = load_robot('simreal_arm')


def test_nominal_model_on_a_nominal_bag_is_nearly_exact(nominal_bag):
    r = validate(nominal_bag, 'simreal_arm', 'nominal', horizons_s=(0.05, 0.2, 1.0))
    # the same physics from the same measured state, bit for bit (measured 1e-21 rad)
    assert r['open_loop']['total_rad'] < 1e-12, r['open_loop']
    assert set(r['k_step']) == {'0.05', '0.2', '1'}
    assert r['k_step']['0.05']['resyncs'] == 120
    assert r['topics'] == {'commands': '/joint_commands', 'states': '/joint_states'}
    lo, hi = r['window_ns']
    assert hi - lo == 6_000_000_000  # first to last command
    assert r['command_delay_s'] == 0.0


def test_a_known_delay_shows_up(tmp_path):
    delayed = tmp_path / 'delay.yaml'
    delayed.write_text('robot: simreal_arm\ncommand_delay_s: 0.03\n')
    bag = record_sim_bag(tmp_path / 'bag', ROBOT, __import__(
        'simreal_ros.core.dynamics', fromlist=['load_overlay']).load_overlay(delayed),
        ExcitationConfig(pattern='sysid', duration_s=5.0, seed=1))
    nominal = validate(bag, 'simreal_arm', None, horizons_s=(0.05, 1.0))
    right = validate(bag, 'simreal_arm', delayed, horizons_s=(0.05, 1.0))
    assert right['command_delay_s'] == 0.03
    assert right['open_loop']['total_rad'] < 1e-12  # measured 2e-21
    assert nominal['open_loop']['total_rad'] > 1e-3  # measured 0.013
    # re-syncing more often hides more of a model error
    assert nominal['k_step']['0.05']['total_rad'] < nominal['k_step']['1']['total_rad']
