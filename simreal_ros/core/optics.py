"""The optics arithmetic the virtual camera and visuomotor training share (numpy, no GL, no ROS).

Pure functions, the contracts in :mod:`simreal_ros.hardware.emulator.optics` (which re-exports
them): ``rotation_matrix`` (Rodrigues), ``offset_pose`` (a camera mounted with an offset:
translation in the optical frame, then a rotation vector about the optical axes),
``sensor_noise`` (shot + read noise, the Poissonian-Gaussian model of Foi et al., 2008) and
``colour_gain`` (exposure gain times white balance). They live in ``core`` so that the
training of visuomotor policies (:mod:`simreal_ros.policy.visual_task`) draws the virtual
camera's visual reality with the emulator's own code.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def rotation_matrix(rotvec: Sequence[float]) -> F64:
    """Rotation matrix of a rotation vector (axis * angle in rad), by Rodrigues' formula."""
    r = np.asarray(rotvec, dtype=np.float64)
    theta = float(np.linalg.norm(r))
    if theta == 0.0:
        return np.eye(3)
    k = r / theta
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    out: F64 = np.eye(3) + math.sin(theta) * kx + (1.0 - math.cos(theta)) * kx @ kx
    return out


def _rpy_to_matrix(rpy: Sequence[float]) -> F64:
    """``sxyz`` Euler angles (URDF rpy) to a matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    return rotation_matrix((0, 0, y)) @ rotation_matrix((0, p, 0)) @ rotation_matrix((r, 0, 0))


def _matrix_to_rpy(m: F64) -> tuple[float, float, float]:
    """Inverse of :func:`_rpy_to_matrix` (pitch in [-pi/2, pi/2])."""
    pitch = math.asin(max(-1.0, min(1.0, -m[2, 0])))
    if abs(m[2, 0]) < 1.0 - 1e-12:
        roll = math.atan2(m[2, 1], m[2, 2])
        yaw = math.atan2(m[1, 0], m[0, 0])
    else:  # gimbal lock: roll and yaw share one axis; put it all in yaw
        roll = 0.0
        yaw = math.atan2(-m[0, 1], m[1, 1])
    return roll, pitch, yaw


def offset_pose(xyz: Sequence[float], rpy: Sequence[float], translation_m: Sequence[float],
                rotation_rad: Sequence[float]
                ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Return the true ``(xyz, rpy)`` of a camera mounted with an offset (see module doc)."""
    rot = _rpy_to_matrix(rpy)
    pos = np.asarray(xyz, dtype=np.float64) + rot @ np.asarray(translation_m, dtype=np.float64)
    true_rot = rot @ rotation_matrix(rotation_rad)
    x, y, z = (float(v) for v in pos)
    return (x, y, z), _matrix_to_rpy(true_rot)


def sensor_noise(signal: F32, full_well_e: float, read_noise: float,
                 rng: np.random.Generator) -> F32:
    """Add shot + read noise (grey levels, see module doc) to ``signal`` in place; return it."""
    if full_well_e <= 0 and read_noise <= 0:
        return signal
    var = np.full(signal.shape, read_noise * read_noise, dtype=np.float32)
    if full_well_e > 0:
        var += np.maximum(signal, 0.0) * np.float32(255.0 / full_well_e)
    signal += rng.standard_normal(signal.shape, dtype=np.float32) * np.sqrt(var)
    return signal


def colour_gain(signal: F32, gain: float, white_balance: Sequence[float]) -> F32:
    """Multiply channel c by ``gain * white_balance[c]`` in place (RGB, (h, w, 3)); return it."""
    signal *= (np.asarray(white_balance, dtype=np.float32) * np.float32(gain))
    return signal
