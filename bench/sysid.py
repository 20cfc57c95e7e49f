"""sysid benchmark: accuracy and fit time against a known reality (``simreal bench sysid``).

* ``sim_30s`` / ``sim_120s``: ``pattern:=sysid`` of that length played on the bridge physics
  (in-process, :mod:`simreal_ros.sysid.synth`) with ``config/overlays/sysid_reality.yaml``
  (the physics part: the sim has no backlash or encoder noise), then ``identify`` of damping,
  frictionloss, armature, command delay and the tool mass. Reported: per-parameter relative
  error (median and worst over the joints per kind), the delay error (ms), the fit's wall and
  CPU time, and the held-out open-loop RMSE after / before.
* ``virtual_bus_60s`` (not with ``--quick``): 60 s recorded through the Dynamixel driver from
  the virtual servo bus with that reality (imperfections included), same fit and figures.

``--quick``: 5 s and 10 s of data and no bus run (a smoke test). 5 s is the shortest recording
``identify`` takes with its 0.2 hold-out (1 s held out, 4 s: one training segment); 10 s fits two
segments, as the longer cases do. The sim has no noise, so either fit recovers the reality's
parameters (2026-12-07: relative errors 0.0 at four decimals, the delay exact, held-out RMSE
ratio 0.0, for 5 s as for 10 s); the fit's cost grows with the data (CPU 6.7 s for 5 s, 12.1 s
for 10 s).
"""

from __future__ import annotations

import os
from pathlib import Path
import statistics
import tempfile
from typing import Any

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.engines import make_sim
from simreal_ros.sysid.api import identify
from simreal_ros.sysid.synth import record_sim_bag

REALITY = 'sysid_reality'
FIT = ['damping', 'frictionloss', 'armature', 'command_delay', 'mass']
DOMAIN = 160 + os.getpid() % 20


def score(summary: dict[str, Any], reality: str = REALITY) -> dict[str, Any]:
    """Errors of a fit summary against the reality overlay."""
    robot = load_robot('simreal_arm')
    truth = load_overlay(reality).apply(make_sim(robot).nominal, robot.name)
    per_kind: dict[str, list[float]] = {}
    out: dict[str, Any] = {'parameters': {}}
    for row in summary['parameters']:
        key = row['key']
        if key == 'command_delay_s':
            out['delay_error_ms'] = round((row['estimate'] - truth.command_delay_s) * 1e3, 3)
            continue
        kind, name, what = key.split('.')
        true = truth.body_mass[name] if kind == 'bodies' else getattr(truth.joints[name], what)
        rel = (row['estimate'] - true) / true
        out['parameters'][key] = {'estimate': row['estimate'], 'true': true,
                                  'rel_error': round(rel, 4), 'identifiable': row['identifiable']}
        per_kind.setdefault(what, []).append(abs(rel))
    out['per_kind'] = {k: {'median_rel_error': round(statistics.median(v), 4),
                           'worst_rel_error': round(max(v), 4)} for k, v in per_kind.items()}
    h = summary['heldout']
    out['heldout_rmse_after_over_before'] = round(h['after_over_before'], 4)
    out['heldout_rmse_before_rad'] = h['before']['total_rad']
    out['heldout_rmse_after_rad'] = h['after']['total_rad']
    out['fit_time_s'] = summary['fit_time_s']
    out['fit_cpu_s'] = summary['cpu_time_s']
    out['segments'] = summary.get('segments', {})
    return out


def sim_case(tmp: Path, seconds: float) -> dict[str, Any]:
    """Bridge-physics bag of ``seconds`` of pattern:=sysid with the reality; fit; score."""
    robot = load_robot('simreal_arm')
    bag = record_sim_bag(tmp / f'sim_{seconds:g}', robot, load_overlay(REALITY),
                         ExcitationConfig(pattern='sysid', duration_s=seconds, seed=1))
    return score(identify(bag, 'simreal_arm', FIT, tmp / f'fit_sim_{seconds:g}.yaml'))


def bus_case(tmp: Path, seconds: float) -> dict[str, Any]:
    """``seconds`` through the driver from the virtual bus with the reality; fit; score."""
    from simreal_ros.bringup.launcher import Launcher
    from simreal_ros.bringup.planner import plan
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    bag = tmp / 'bus_bag'
    with EmulatorProcess(link=tmp / 'ttyDXL', reality=REALITY, env=env) as emu:
        nodes = plan({'backend': 'real', 'port': emu.port, 'excite': 'sysid',
                      'duration': f'{seconds:g}', 'record': 'true', 'bag': str(bag)})
        code = Launcher(nodes, env, echo=lambda _line: None).run()
    if code != 0:
        return {'error': f'launch exited with {code}'}
    return score(identify(bag, 'simreal_arm', FIT, tmp / 'fit_bus.yaml'))


def run(quick: bool = False) -> dict[str, Any]:
    """Run the cases and return their figures."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        short, long_ = (5.0, 10.0) if quick else (30.0, 120.0)
        out = {f'sim_{short:g}s': sim_case(tmp, short), f'sim_{long_:g}s': sim_case(tmp, long_)}
        if not quick:
            out['virtual_bus_60s'] = bus_case(tmp, 60.0)
        return out
