"""What crosses an STS bus each cycle, without I/O: the byte-time limit of the cycle rate.

One cycle of :class:`~simreal_ros.hardware.feetech.bus.FeetechBus` is a SYNC READ of the state
block (``STATE_LEN`` bytes a servo) and a SYNC WRITE of Goal Position (2 bytes a servo).
``bench/bus.py`` compares the achieved rate with :func:`byte_time_limit_hz`.
"""

from __future__ import annotations

from simreal_ros.hardware.feetech.control_table import STATE_LEN


def byte_time_limit_hz(n_servos: int, baud: int, state_len: int = STATE_LEN,
                       goal_len: int = 2, return_delay_s: float = 0.0) -> float:
    """Upper bound of read+write cycles/s from the bytes on the wire (8N1) at ``baud``.

    SYNC READ instruction: 8 + n bytes (FF FF FE LEN 82 ADDR L ids.. CHK); each status:
    6 + state_len; SYNC WRITE of the goal: 8 + n * (1 + goal_len). Bytes are 10 bit times.
    """
    read = 8 + n_servos
    status = n_servos * (6 + state_len)
    write = 8 + n_servos * (1 + goal_len)
    seconds = (read + status + write) * 10.0 / baud + n_servos * return_delay_s
    return 1.0 / seconds


__all__ = ['byte_time_limit_hz']
