"""``sysid`` and ``replay`` cells: a fit of a bag, or a model's replay of a bag, in-process.

A ``sysid`` cell is ``simreal sysid BAG --robot ROBOT --fit FIT --holdout HOLDOUT`` run by
:func:`simreal_ros.sysid.api.identify`: the overlay is written to a temporary file in the
worker and returned as text in the result line (a Ray worker may run on another machine, so
the worker writes nothing the sweep's directory needs), and the outputs write it as
``overlays/<cell_id>.yaml``. Its metrics: the held-out open-loop RMSE with the nominal model
(``heldout_before_rad``) and the fitted one (``heldout_after_rad``), their ratio, the fit's
iterations, cost and CPU time, and how many parameters came out identifiable; every
estimate with its stddev is in ``parameters``.

A ``replay`` cell is ``simreal sysid validate BAG --robot ROBOT --overlay OVERLAY`` run by
:func:`simreal_ros.sysid.api.validate`: the bag's commands replayed open loop through the
overlay's model from the measured state at the window's start, and re-synced every horizon
(k-step). Its metrics: the open-loop RMSE and one ``k_step_<h>_rad`` per horizon.

Both are deterministic (a least-squares fit from the nominal model, a replay): the same cell
gives the same numbers on a local worker and on Ray.
"""

from __future__ import annotations

from pathlib import Path
import tempfile
from typing import Any

from simreal_ros.sweep.config import ReplayCell, SysidCell


def horizon_column(h: float) -> str:
    """Return the metric name of the k-step RMSE at horizon ``h`` seconds."""
    return f'k_step_{h:g}_rad'


def run_sysid_cell(cell: SysidCell) -> dict[str, Any]:
    """Fit the cell's parameters to its bag; return metrics, parameters and the overlay text."""
    from simreal_ros.sysid.api import identify
    with tempfile.TemporaryDirectory(prefix='simreal_sweep_sysid_') as tmp:
        out = Path(tmp) / 'identified.yaml'
        summary = identify(cell.bag, cell.robot, cell.fit.split(','), out,
                           holdout=cell.holdout)
        overlay_text = out.read_text(encoding='utf-8')
    held = summary['heldout']
    params = summary['parameters']
    metrics = {
        'heldout_before_rad': held['before']['total_rad'] if held else float('nan'),
        'heldout_after_rad': held['after']['total_rad'] if held else float('nan'),
        'after_over_before': held['after_over_before'] if held else float('nan'),
        'parameters_fitted': len(params),
        'parameters_identifiable': sum(bool(p['identifiable']) for p in params),
        'iterations': summary['iterations'],
        'cost_end': summary['cost']['end'],
        'fit_cpu_s': summary['cpu_time_s'],
    }
    return {'metrics': metrics, 'parameters': params, 'overlay_yaml': overlay_text,
            'bag_sha256': summary['source_bag']['sha256']}


def run_replay_cell(cell: ReplayCell) -> dict[str, Any]:
    """Replay the cell's bag through its overlay; return the RMSEs."""
    from simreal_ros.sysid.api import validate
    res = validate(cell.bag, cell.robot, cell.overlay or None, horizons_s=cell.horizons_s)
    metrics: dict[str, Any] = {'open_loop_rad': res['open_loop']['total_rad']}
    for h in cell.horizons_s:
        metrics[horizon_column(h)] = res['k_step'][f'{h:g}']['total_rad']
    metrics.update(window_s=res['window_s'], command_delay_s=res['command_delay_s'],
                   backlash_rad=res['backlash_rad'])
    return {'metrics': metrics, 'per_joint_open_loop_rad': res['open_loop']['per_joint_rad'],
            'bag_sha256': res['bag_sha256']}
