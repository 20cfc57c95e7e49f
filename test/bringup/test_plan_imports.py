"""Planning imports neither rosbags, mujoco, torch nor cv2 (each in a fresh interpreter).

The ``ros2 launch`` process and every ``simreal launch`` plan; those modules load in the nodes
that use them. Each backend is planned with the options that reach the most builders
(recorder, latency injector, policy, excitation, cameras).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ('rosbags', 'mujoco', 'torch', 'cv2')

PLANS = {
    'sim': {'backend': 'sim', 'record': 'true', 'latency': 'wifi', 'excite': 'chirp',
            'overlay': 'residual_reality', 'scene': 'tabletop', 'randomization': 'default'},
    'sim2sim': {'backend': 'sim2sim', 'record': 'true', 'engine_b': 'pybullet',
                'overlay_b': 'worn_arm', 'policy': 'simreal_arm_reach'},
    'real': {'backend': 'real', 'port': '/dev/ttyUSB0', 'record': 'true', 'latency': 'wifi',
             'camera_device': '0', 'policy': 'simreal_arm_reach'},
    'twin': {'backend': 'twin', 'port': '/dev/ttyUSB0', 'record': 'true',
             'twin_resync': '2', 'excite': 'sysid'},
    # the episode recorder's settings parse the episode checks' thresholds
    'teleop': {'backend': 'real', 'port': '/dev/ttyUSB0', 'record': 'true', 'teleop': 'leader',
               'leader_port': '/dev/ttyUSB1', 'episodes': 'true', 'task': 'pick'},
}

SCRIPT = """
import json, sys
from simreal_ros.bringup.planner import plan
nodes = plan(json.loads(sys.argv[1]))
print(json.dumps({'kinds': sorted({n.kind for n in nodes}),
                  'heavy': [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.mark.parametrize('backend', sorted(PLANS))
def test_planning_imports_no_heavy_module(backend: str) -> None:
    env = {**os.environ, 'PYTHONPATH': str(REPO)}
    proc = subprocess.run([sys.executable, '-c', SCRIPT, json.dumps(PLANS[backend]),
                           json.dumps(HEAVY)], env=env, capture_output=True, text=True,
                          timeout=120, check=True, cwd=REPO)
    out = json.loads(proc.stdout)
    assert 'recorder' in out['kinds']  # the plan reached the recorder's settings
    assert ('episodes' in out['kinds']) == (backend == 'teleop')
    assert out['heavy'] == []
