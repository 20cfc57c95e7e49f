"""Learned residual dynamics: the file format, the overlay hash and the per-step inference.

A residual (``simreal residual fit``, :mod:`simreal_ros.sysid.residual_fit`) is a small MLP that
predicts, from the joint state and the servo set-point, the correction the identified sim
needs: a joint torque added in every physics step (``kind: torque``) or, ASAP-style, a delta
on the commanded position (``kind: delta_action``). The file is TorchScript (loadable with
``torch.jit.load``, the network with its normalization and bound in its graph), and carries
two extra files in its zip archive, which this module reads **without torch** so the sim,
the bridge and the planner never need it:

* ``extra/residual.json``: the header: ``format``, ``robot``, ``overlay_sha256`` (see
  :func:`overlay_sha256`), ``kind``, ``features``, input normalization (``input_mean``,
  ``input_std``), ``output_bound`` (per joint; N·m or rad), the training data's feature range
  (``train_low``, ``train_high``), ``seed``, ``version`` and the training summary;
* ``extra/residual_weights.json``: the layers' weights and biases (row-major lists).

Inference (:meth:`ResidualModel.__call__`) is numpy: inputs are clamped to the training range
(outside the data the model is held at its edge, not extrapolated) and counted as
out-of-distribution, normalized, passed through the tanh MLP, and the output is
``output_bound * tanh(z)``, so it can never exceed the bound. Features, robot order::

    q (rad) | qdot (rad/s) | q_target - q (rad) | v_target (rad/s) [| play (1)]

The optional history feature ``play`` (header ``history_width_rad``, one width ``w`` per
joint) is the direction of the set-point's last motion, with hysteresis: a play operator
``p <- clip(p, q_target - w, q_target + w)`` carried in the model from call to call, and the
feature ``(q_target - p) / w`` in [-1, 1] (+1 after moving up by at least ``2 w``, -1 after
moving down, in between inside the play). It is what a backlash's contact side depends on and
what no function of the current state can tell. It runs on the set-point, not the measured
position: the set-point is the same in the bag and in the sim (the measurement is noisy and
quantized in the bag, not in the sim), so training and the sim step compute it alike. The
sim resets it with the state (:meth:`ResidualModel.reset_history`); a replay that starts
mid-bag warms it on the set-points before its start (:meth:`ResidualModel.warm_history`).

Measured side by side (``bench/residual.py``): this numpy path against the TorchScript module
under ``torch.no_grad`` with one thread; the bench's JSON has both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import hashlib
import json
from pathlib import Path
import time
from typing import Any, Mapping
import zipfile

import numpy as np
import numpy.typing as npt

from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

FORMAT = 1
KINDS = ('torque', 'delta_action')
HEADER_NAME = 'residual.json'
WEIGHTS_NAME = 'residual_weights.json'
FEATURES = ('q', 'qdot', 'q_target_minus_q', 'v_target')
HISTORY_FEATURE = 'play'
#: ``simreal residual fit`` defaults (here, not in the torch module, so ``--help`` needs no
#: torch): replay window of each target, window spacing, epochs
DEFAULT_HORIZON_S = 0.05
DEFAULT_STRIDE_S = 0.01
DEFAULT_EPOCHS = 100


def overlay_sha256(robot: str | None, joints: Mapping[str, Mapping[str, float]],
                   bodies: Mapping[str, Mapping[str, float]],
                   command_delay_s: float | None) -> str:
    """SHA-256 of an overlay's physics (robot, joints, bodies, delay), canonical JSON.

    Not of the file's bytes: naming the residual in the overlay (``residual: RES.pt``), its
    comments and its ``sysid:`` block must not change the hash the residual was trained on.
    """
    doc = {'robot': robot,
           'joints': {j: {k: float(v) for k, v in sorted(vals.items())}
                      for j, vals in sorted(joints.items())},
           'bodies': {b: {k: float(v) for k, v in sorted(vals.items())}
                      for b, vals in sorted(bodies.items())},
           'command_delay_s': None if command_delay_s is None else float(command_delay_s)}
    text = json.dumps(doc, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode()).hexdigest()


def read_extra(path: Path, name: str) -> str:
    """Return the text of TorchScript extra file ``name`` in the zip at ``path``."""
    try:
        with zipfile.ZipFile(path) as z:
            hits = [n for n in z.namelist() if n.endswith(f'/extra/{name}')]
            if not hits:
                raise ConfigError(str(path), f'extra/{name}',
                                  'a residual written by simreal residual fit',
                                  'no such entry in the TorchScript archive')
            return z.read(hits[0]).decode('utf-8')
    except (zipfile.BadZipFile, OSError) as exc:
        raise ConfigError(str(path), '', 'a TorchScript file written by simreal residual fit',
                          f'{type(exc).__name__}: {exc}') from None


@dataclass
class ResidualStats:
    """What a residual did: calls, out-of-distribution calls, compute time (ns)."""

    calls: int = 0
    ood_calls: int = 0
    compute_ns: int = 0
    max_abs_output: float = 0.0

    def values(self) -> dict[str, float | int]:
        """Return the diagnostics figures (mean compute per call in ns, OOD fraction)."""
        return {'residual_calls': self.calls,
                'residual_compute_ns': self.compute_ns / self.calls if self.calls else 0.0,
                'residual_ood_fraction': self.ood_calls / self.calls if self.calls else 0.0,
                'residual_max_abs_output': self.max_abs_output}


@dataclass(eq=False)
class ResidualModel:
    """A loaded residual: header fields and numpy weights (see the module docstring)."""

    source: str
    header: dict[str, Any]
    layers: list[tuple[FloatArray, FloatArray]]
    stats: ResidualStats = field(default_factory=ResidualStats)

    def __post_init__(self) -> None:
        h = self.header
        self.robot = str(h['robot'])
        self.kind = str(h['kind'])
        self.overlay_hash = str(h['overlay_sha256'])
        self.mean = np.asarray(h['input_mean'], dtype=np.float64)
        self.inv_std = 1.0 / np.asarray(h['input_std'], dtype=np.float64)
        self.bound = np.asarray(h['output_bound'], dtype=np.float64)
        self.low = np.asarray(h['train_low'], dtype=np.float64)
        self.high = np.asarray(h['train_high'], dtype=np.float64)
        self.n = int(self.bound.size)
        w = h.get('history_width_rad')
        self.width: FloatArray | None = None if w is None else np.asarray(w, dtype=np.float64)
        self.play: FloatArray | None = None

    def reset_history(self) -> None:
        """Forget the history: the next call starts the play operator at its set-point."""
        self.play = None

    def warm_history(self, q_targets: FloatArray) -> None:
        """Run the play operator over past set-points ``q_targets`` ((m, n), oldest first)."""
        if self.width is not None:
            self.play = play_over(self.play, np.reshape(q_targets, (-1, self.n)), self.width)

    def features(self, q: FloatArray, qd: FloatArray, q_target: FloatArray,
                 v_target: FloatArray) -> FloatArray:
        """Return the input row ``q | qdot | q_target - q | v_target [| play]``.

        With a history feature this advances the play operator by one call (one physics step):
        call it once per step, in order.
        """
        if self.width is None:
            return np.concatenate([q, qd, q_target - q, v_target])
        self.play = p = play_step(self.play, q_target, self.width)
        return np.concatenate([q, qd, q_target - q, v_target, play_feature(q_target, p,
                                                                          self.width)])

    def predict(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return the outputs for inputs ``x`` ((m, 4 n) or (4 n,)); also the per-row OOD flags."""
        xc = np.clip(x, self.low, self.high)
        ood = np.any(xc != x, axis=-1)
        h = (xc - self.mean) * self.inv_std
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            h = h @ w.T + b
            if i < last:
                h = np.tanh(h)
        return self.bound * np.tanh(h), np.asarray(ood)

    def __call__(self, x: FloatArray) -> FloatArray:
        """One step's output (N·m or rad per joint), counted in :attr:`stats`."""
        t0 = time.perf_counter_ns()
        y, ood = self.predict(x)
        s = self.stats
        s.compute_ns += time.perf_counter_ns() - t0
        s.calls += 1
        s.ood_calls += int(ood)
        m = float(np.max(np.abs(y)))
        if m > s.max_abs_output:
            s.max_abs_output = m
        return y

    def check(self, robot: str, overlay_hash: str | None) -> None:
        """Refuse a residual trained for another robot or another overlay (ConfigError)."""
        if self.robot != robot:
            raise ConfigError(self.source, f'{HEADER_NAME}: robot',
                              f'{robot!r} (the robot it is loaded for; retrain with '
                              f'simreal residual fit --robot {robot})', self.robot)
        if overlay_hash is not None and self.overlay_hash != overlay_hash:
            raise ConfigError(self.source, f'{HEADER_NAME}: overlay_sha256',
                              f'{overlay_hash[:16]} (the physics of the overlay that names it; '
                              f'retrain with simreal residual fit --overlay on that overlay)',
                              self.overlay_hash[:16])


def play_step(p: FloatArray | None, x: FloatArray, width: FloatArray) -> FloatArray:
    """One step of the play (backlash) operator of half-width ``width``: ``p`` follows ``x``.

    ``p is None`` starts it at ``x`` (no direction known yet: the feature reads 0).
    """
    if p is None:
        return np.array(x, dtype=np.float64)
    out: FloatArray = np.clip(p, x - width, x + width)
    return out


def play_over(p: FloatArray | None, xs: FloatArray, width: FloatArray) -> FloatArray | None:
    """Run :func:`play_step` over the rows of ``xs`` (oldest first); ``p`` if there are none."""
    for x in np.asarray(xs, dtype=np.float64):
        p = play_step(p, x, width)
    return p


def play_feature(x: FloatArray, p: FloatArray, width: FloatArray) -> FloatArray:
    """Return the history feature ``(x - p) / width``, clipped to [-1, 1].

    Clipped because rounding puts it a hair past +-1 at the edges of the play, where it sits
    whenever the set-point moves: unclipped, 99.8 % of the steps of a virtual-bus replay were
    counted out of the training range (stored as float32, 1.0 exactly).
    """
    out: FloatArray = np.clip((x - p) / width, -1.0, 1.0)
    return out


def load_residual(path: str | Path) -> ResidualModel:
    """Read a residual's header and weights (no torch); ConfigError naming file and key."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(str(p), '', 'an existing residual file (simreal residual fit --out)',
                          has_got=False)
    src = str(p)
    try:
        header = json.loads(read_extra(p, HEADER_NAME))
        weights = json.loads(read_extra(p, WEIGHTS_NAME))
    except json.JSONDecodeError as exc:
        raise ConfigError(src, HEADER_NAME, 'valid JSON', str(exc)) from None
    if not isinstance(header, dict):
        raise ConfigError(src, HEADER_NAME, 'a JSON object', type(header).__name__)
    if header.get('format') != FORMAT:
        raise ConfigError(src, f'{HEADER_NAME}: format', str(FORMAT), header.get('format'))
    for key in ('robot', 'kind', 'overlay_sha256', 'input_mean', 'input_std', 'output_bound',
                'train_low', 'train_high'):
        if key not in header:
            raise ConfigError(src, f'{HEADER_NAME}: {key}', 'present', 'missing')
    if header['kind'] not in KINDS:
        raise ConfigError(src, f'{HEADER_NAME}: kind', f'one of {", ".join(KINDS)}',
                          header['kind'])
    layers = [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64))
              for w, b in weights['layers']]
    n = len(header['output_bound'])
    width = len(header['input_mean'])
    hist = header.get('history_width_rad')
    if hist is not None and (not isinstance(hist, list) or len(hist) != n
                             or not all(isinstance(v, (int, float)) and v > 0 for v in hist)):
        raise ConfigError(src, f'{HEADER_NAME}: history_width_rad',
                          f'{n} positive widths (rad), one per joint', hist)
    per = len(FEATURES) + (hist is not None)
    if width != per * n or not layers or layers[0][0].shape[1] != width or \
            layers[-1][0].shape[0] != n:
        raise ConfigError(src, WEIGHTS_NAME, f'layers from {width} inputs to {n} outputs',
                          [w.shape for w, _ in layers])
    return ResidualModel(src, header, layers)


__all__ = ['FEATURES', 'HISTORY_FEATURE', 'KINDS', 'ResidualModel', 'ResidualStats',
           'load_residual', 'overlay_sha256', 'play_feature', 'play_over', 'play_step']
