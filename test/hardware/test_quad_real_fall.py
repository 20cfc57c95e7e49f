"""A fall on the virtual legged robot: ``backend:=real`` with a policy whose fall detection reads
the WT901 IMU through the IMU driver, exactly as on hardware.

The emulator serves simreal_quad's twelve STS3215 and its WT901; ``simreal launch
backend:=real ... policy:=SPEC policy_autostart:=true`` ramps the robot up to the default pose,
then the network (a constant) folds both left legs (hip_flex +1.2 rad, knee -1.1 rad), which
rolls the body about 0.45 rad onto its left side (MuJoCo, in-process: 0.53 rad peak, 0.45
held). The spec's ``fall.tilt_rad`` is 0.3 rad, so the lean is a fall: the policy must stop,
hand over to damping (its commands the measured positions), say so once and report ERROR.
"""

from __future__ import annotations

from pathlib import Path
import signal
import subprocess
import sys

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from sensor_msgs.msg import JointState
import torch
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess

pytestmark = [pytest.mark.ros, pytest.mark.e2e]
REPO = Path(__file__).resolve().parents[2]
QUAD = load_robot('simreal_quad')
SCALE = 0.5
LEAN = {'fl_hip_flex': 1.2, 'fl_knee': -1.1, 'rl_hip_flex': 1.2, 'rl_knee': -1.1}


class Lean(torch.nn.Module):
    """A constant action: the left legs folded (offsets / SCALE), the right legs at default."""

    def __init__(self, action: list[float]) -> None:
        super().__init__()
        self.action = torch.tensor([action], dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.action.expand(x.shape[0], -1)


def policy_status(diags: list) -> DiagnosticStatus | None:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(': policy'):
                return st
    return None


def test_a_fall_on_the_virtual_legged_robot_hands_over_to_damping(ros_env, ros_client,
                                                                   tmp_path):
    action = [LEAN.get(n, 0.0) / SCALE for n in QUAD.joint_names]
    torch.jit.script(Lean(action)).save(str(tmp_path / 'lean.pt'))
    spec = tmp_path / 'quad_lean.yaml'
    spec.write_text(yaml.safe_dump({
        'policy': 'quad_lean', 'robot': 'simreal_quad', 'model': 'lean.pt',
        'control_rate_hz': 50.0,
        'observation': [{'term': 'projected_gravity'}, {'term': 'joint_pos_rel'}],
        'action': {'scale': SCALE, 'clip': 4.0}, 'safety': {'ramp_s': 1.0},
        'fall': {'tilt_rad': 0.3, 'after_s': 0.2}}))
    commands = ros_client.collect(JointState, 'joint_commands')
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with EmulatorProcess(link=tmp_path / 'ttyQUAD', robot='simreal_quad',
                         imu_link=tmp_path / 'ttyIMU', env=ros_env) as emu:
        proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'launch',
                                 'backend:=real', 'robot:=simreal_quad', f'port:={emu.port}',
                                 f'imu_port:={tmp_path / "ttyIMU"}', f'policy:={spec}',
                                 'policy_autostart:=true'],
                                env=ros_env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            def mode() -> str:
                st = policy_status(diags)
                return {kv.key: kv.value for kv in st.values}['mode'] if st else ''
            ros_client.wait_for(lambda: mode() in ('ramping', 'running'), 90,
                                'the policy enabled on the real backend')
            ros_client.wait_for(lambda: mode() == 'damping', 60, 'the lean detected as a fall')
            st = policy_status(diags)
            assert st.level == DiagnosticStatus.ERROR
            assert st.message.startswith('fallen, damping until re-enabled: base tilt')
            tilt = float({kv.key: kv.value for kv in st.values}['fall_tilt_rad'])
            assert 0.3 < tilt < 0.8  # on its side, not on its back

            def follows() -> bool:  # each command is a measured pose (the lean held is not)
                cmd = np.array(commands[-1][1].position)
                return min(np.abs(np.array(m.position) - cmd).max()
                           for _t, m in states[-100:]) < 1e-3
            ros_client.wait_for(follows, 10, 'the commands following the measured positions')
        except Exception:
            proc.send_signal(signal.SIGTERM)
            print(proc.communicate(timeout=60)[0])
            raise
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert out.count('fall detected: base tilt') == 1, out
    print(next(line for line in out.splitlines() if 'fall detected' in line))
