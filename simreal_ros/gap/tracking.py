"""Command-tracking metrics: how closely measured joint states follow commanded targets."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def held_commands(state_ns: IntArray, cmd_ns: IntArray, cmd_q: FloatArray) -> FloatArray:
    """Return, for each state stamp, the latest command stamped at or before it (NaN if none).

    Commands are held (zero-order hold), as a servo holds its last goal.
    """
    order = np.argsort(cmd_ns, kind='stable')
    cmd_ns, cmd_q = cmd_ns[order], cmd_q[order]
    idx = np.searchsorted(cmd_ns, state_ns, side='right') - 1
    out = np.full((len(state_ns), cmd_q.shape[1] if cmd_q.ndim == 2 else 0), np.nan)
    ok = idx >= 0
    out[ok] = cmd_q[idx[ok]]
    return out


def tracking_summary(names: Sequence[str], state_ns: Sequence[int], state_q: Any,
                     cmd_ns: Sequence[int], cmd_q: Any, skip_s: float = 0.0
                     ) -> dict[str, Any]:
    """Per-joint RMSE and max |state - held command| over the stamps after ``skip_s``.

    Stamps are integer nanoseconds on the same clock. Returns ``{'samples': N, 'joints':
    {name: {'rmse': .., 'max': ..}}}``; with no overlapping data ``samples`` is 0.
    """
    s_ns = np.asarray(state_ns, dtype=np.int64)
    c_ns = np.asarray(cmd_ns, dtype=np.int64)
    joints: dict[str, dict[str, float]] = {}
    if len(s_ns) == 0 or len(c_ns) == 0:
        return {'samples': 0, 'joints': joints}
    sq = np.asarray(state_q, dtype=np.float64).reshape(len(s_ns), len(names))
    cq = np.asarray(cmd_q, dtype=np.float64).reshape(len(c_ns), len(names))
    held = held_commands(s_ns, c_ns, cq)
    keep = (s_ns >= c_ns.min() + int(skip_s * 1e9)) & ~np.isnan(held).any(axis=1)
    err = sq[keep] - held[keep]
    for i, name in enumerate(names):
        e = err[:, i]
        joints[name] = ({'rmse': float(np.sqrt(np.mean(e * e))), 'max': float(np.abs(e).max())}
                        if e.size else {'rmse': float('nan'), 'max': float('nan')})
    return {'samples': int(keep.sum()), 'joints': joints}
