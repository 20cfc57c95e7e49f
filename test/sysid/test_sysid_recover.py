"""sysid recovers a known overlay from a sim-bridge bag and writes it in the overlay format."""

from __future__ import annotations

import numpy as np
import yaml

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.mujoco.physics import MujocoSim as SimRobot

ROBOT = load_robot('simreal_arm')


def _truth(truth_overlay):
    return load_overlay(truth_overlay).apply(SimRobot(ROBOT).nominal, ROBOT.name)


def test_every_parameter_recovered_from_noise_free_bridge_data(fitted, truth_overlay):
    summary, _ = fitted
    truth = _truth(truth_overlay)
    rows = {r['key']: r for r in summary['parameters']}
    assert len(rows) == 3 * ROBOT.n + 2
    for j in ROBOT.joint_names:
        for kind in ('damping', 'frictionloss', 'armature'):
            want = getattr(truth.joints[j], kind)
            got = rows[f'joints.{j}.{kind}']['estimate']
            # noise-free data from the very physics that is replayed (bit-exact replay):
            # the fit lands on the truth (measured errors below 1e-12)
            assert abs(got - want) / want < 1e-3, (j, kind, got, want)
    mass = rows['bodies.wrist_flange_link.mass']['estimate']
    assert abs(mass - truth.body_mass['wrist_flange_link']) / \
        truth.body_mass['wrist_flange_link'] < 1e-3
    assert rows['command_delay_s']['estimate'] == 0.006
    assert all(r['identifiable'] for r in rows.values()), \
        [(k, r['reason']) for k, r in rows.items() if not r['identifiable']]


def test_heldout_error_falls_and_summary_is_complete(fitted):
    summary, _ = fitted
    h = summary['heldout']
    assert h['after']['total_rad'] < 1e-3 * h['before']['total_rad'], h
    assert h['window_ns'][0] == summary['fit_window_ns'][1]
    assert h['window_ns'][1] == summary['source_bag']['window_ns'][1]
    assert summary['source_bag']['command_topic'] == '/joint_commands'
    assert summary['source_bag']['state_topic'] == '/joint_states'
    assert len(summary['source_bag']['sha256']) == 64
    for r in summary['parameters']:
        assert r['stddev'] > 0 and np.isfinite(r['stddev'])


def test_overlay_file_has_the_format_and_the_sysid_section(fitted):
    summary, out = fitted
    data = yaml.safe_load(out.read_text())
    assert data['robot'] == 'simreal_arm'
    assert set(data['joints']) == set(ROBOT.joint_names)
    assert set(data['joints']['base_yaw']) == {'damping', 'frictionloss', 'armature'}
    assert set(data['bodies']) == {'wrist_flange_link'}
    assert data['command_delay_s'] == 0.006
    meta = data['sysid']
    assert meta['source_bag']['sha256'] == summary['source_bag']['sha256']
    assert meta['source_bag']['window_ns'] == summary['source_bag']['window_ns']
    assert set(meta['estimates']) == {r['key'] for r in summary['parameters']}
    assert meta['heldout']['total_after_rad'] < meta['heldout']['total_before_rad']
    ov = load_overlay(out)
    assert ov.metadata['sysid']['fit'] == summary['fit']
