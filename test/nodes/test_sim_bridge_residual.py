"""The sim bridge with a learned residual named in its overlay: used, reported, refused."""

from __future__ import annotations

from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
import pytest
from startup import start_up_error
import torch

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.sysid.residual_fit import ResidualNet, make_header, save_residual

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def residual_overlay(d: Path, physics: str = 'robot: simreal_arm\n') -> Path:
    """A residual (seeded random weights) trained 'against' the nominal overlay, named in
    an overlay with ``physics``."""
    (d / 'nominal.yaml').write_text('robot: simreal_arm\n', encoding='utf-8')
    n = ROBOT.n
    torch.manual_seed(0)
    net = ResidualNet(torch.zeros(4 * n), torch.ones(4 * n), torch.full((4 * n,), -10.0),
                      torch.full((4 * n,), 10.0), torch.full((n,), 0.05))
    save_residual(d / 'res.pt', net, make_header(ROBOT, load_overlay(d / 'nominal.yaml'),
                                                 'torque', net, 0, {}))
    p = d / 'with_residual.yaml'
    p.write_text(f'{physics}residual: res.pt\n', encoding='utf-8')
    return p


def bridge_values(diags: list) -> dict:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith('sim bridge'):
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_the_bridge_runs_the_residual_and_reports_its_cost(start_node, ros_client,
                                                           tmp_path: Path) -> None:
    overlay = residual_overlay(tmp_path)
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    bridge = start_node('sim_bridge', overlay=str(overlay), diagnostics_period_s=0.3)
    ros_client.wait_for(lambda: int(bridge_values(diags).get('residual_calls', '0')) > 50,
                        30, 'residual calls on /diagnostics')
    v = bridge_values(diags)
    assert v['residual'] == str(tmp_path / 'res.pt') and v['residual_kind'] == 'torque'
    assert float(v['residual_compute_ns']) > 0
    assert float(v['residual_ood_fraction']) == 0.0  # at home, well inside [-10, 10]
    assert 0 < float(v['residual_max_abs_output']) <= 0.05
    assert bridge.proc.poll() is None, bridge.output()


def test_a_residual_of_another_overlay_stops_the_bridge(start_node, tmp_path: Path) -> None:
    overlay = residual_overlay(tmp_path, 'robot: simreal_arm\njoints:\n  base_yaw: '
                                         '{damping: 0.3}\n')
    err = start_up_error(start_node('sim_bridge', overlay=str(overlay)))
    assert str(tmp_path / 'res.pt') in err and 'overlay_sha256' in err
    assert 'retrain with simreal residual fit' in err
