"""Backlash of the virtual servo bus: a play between the link and the servo's measurement.

One implementation for the two places that apply it: the virtual bus's hidden world
(:meth:`simreal_ros.hardware.emulator.reality.VirtualArm._measure`) and the sysid replay that
identifies it (:mod:`simreal_ros.sysid.replay`), so the fit's model of the backlash is the
emulator's by construction.

The contract (``imperfections.backlash_rad`` ``b`` of an overlay, total play, half-width
``h = b / 2``): the servo's encoder sits on the motor side ``m``, which the link ``q`` drags
along only at the ends of the play::

    m <- min(max(m, q - h), q + h)                                   (every physics step)

So while the link moves up, ``m = q - h`` (the measurement trails the link by half the play),
while it moves down ``m = q + h``, and inside the play ``m`` stays. The servo closes its loop on
``m``: its output is ``kp (goal - m) - kd qdot``, i.e. the link's servo law plus the torque
``kp (q - m)``, a set-point offset of up to ``h`` in the direction of the last motion. Every
position it reports is ``m`` (then noise and tick quantization, which the emulator adds).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

#: the largest play an overlay may give (rad): a servo gearbox has a few mrad (the SO-101's
#: STS3215 about 0.1-0.2 deg measured by its users; docs/arms.md); 0.1 rad (5.7 deg) is a
#: broken gear or a typo in the units
MAX_BACKLASH_RAD = 0.1


def check_backlash(source: str, value: object) -> float:
    """Return ``imperfections.backlash_rad`` of overlay ``source``, or ConfigError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not 0.0 <= value <= MAX_BACKLASH_RAD:
        raise ConfigError(source, 'imperfections.backlash_rad',
                          f'a total play in [0, {MAX_BACKLASH_RAD:g}] rad', value)
    return float(value)


def play_step(motor: FloatArray, link: FloatArray, half_rad: FloatArray | float) -> FloatArray:
    """Return the motor side after the link moved to ``link`` (half-width ``half_rad``).

    ``np.minimum``/``np.maximum``, not ``np.clip``: at the emulator's 1 kHz the clip's dispatch
    cost more than the arithmetic. Broadcasts (a batch of replays: rows are jobs).
    """
    out: FloatArray = np.minimum(np.maximum(motor, link - half_rad), link + half_rad)
    return out


def play_trajectory(motor0: FloatArray, links: FloatArray, half_rad: FloatArray | float
                    ) -> FloatArray:
    """Return the motor side after each row of ``links`` (steps first), from ``motor0``."""
    out = np.empty_like(np.asarray(links, dtype=np.float64))
    m = np.asarray(motor0, dtype=np.float64)
    for k in range(out.shape[0]):
        m = play_step(m, links[k], half_rad)
        out[k] = m
    return out


def servo_offset_torque(kp: FloatArray, link: FloatArray, motor: FloatArray) -> FloatArray:
    """Torque that turns the link's servo law into one closed on the motor side.

    ``kp (goal - m) = kp (goal - q) + kp (q - m)``: the second term, added to the feed-forward
    (how both the emulator and the replay apply it; the effort clamp then bounds the sum).
    """
    out: FloatArray = kp * (link - motor)
    return out
