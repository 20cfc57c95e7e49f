"""What crosses a Dynamixel bus each cycle, without I/O: the sync-read state block and timing.

The driver reads one block per servo and cycle (``STATE_ADDR``, ``STATE_LEN``): Realtime Tick
(120, 2: the servo's ms clock, to tell a late answer to an earlier request from a fresh one),
..., Present Current (126, 2), Velocity (128, 4), Position (132, 4), at the ``*_OFF`` offsets.
:func:`is_stale` orders answers by that tick; :func:`byte_time_limit_hz` is the cycle rate the
bytes on the wire allow at a baud rate (``bench/bus.py`` compares the achieved rate with it).
"""

from __future__ import annotations

from simreal_ros.hardware.dynamixel import control_table as ct

_A = ct.BY_NAME
STATE_ADDR = _A['realtime_tick'].address
STATE_LEN = _A['present_position'].address + 4 - STATE_ADDR  # 16 bytes
TICK_OFF = 0
CURRENT_OFF = _A['present_current'].address - STATE_ADDR
VELOCITY_OFF = _A['present_velocity'].address - STATE_ADDR
POSITION_OFF = _A['present_position'].address - STATE_ADDR
REALTIME_TICK_WRAP = 32768  # ms
#: an answer whose Realtime Tick is equal to, or up to this much behind, the last accepted one
#: of that servo is a late answer to an earlier request (or the same measurement again)
STALE_WINDOW_MS = 2000


def is_stale(tick: int, last: int | None, since_last_s: float) -> bool:
    """Whether an answer with Realtime Tick ``tick`` is stale: not newer than ``last``.

    ``last`` is the tick of the servo's last accepted state, ``since_last_s`` how long ago
    that was. The tick is the servo's ms clock, wrapping at 32768: a tick equal to ``last``
    or up to ``STALE_WINDOW_MS`` behind it (modulo the wrap) is an answer to an earlier
    request, or the same measurement again. After ``STALE_WINDOW_MS / 2`` without an accepted
    state the comparison is skipped: ticks that far apart cannot be ordered across the wrap
    (32.8 s), and no late answer is that late.
    """
    if last is None or since_last_s >= STALE_WINDOW_MS / 2000.0:
        return False
    return (last - tick) % REALTIME_TICK_WRAP < STALE_WINDOW_MS


def byte_time_limit_hz(n_servos: int, baud: int, state_len: int = STATE_LEN,
                       goal_len: int = 4, return_delay_s: float = 0.0) -> float:
    """Upper bound of read+write cycles/s from the bytes on the wire (8N1) at ``baud``.

    Sync read instruction: 14 + n bytes; each status: 11 + state_len; sync write of goal:
    14 + n * (1 + goal_len). Bytes are 10 bit times.
    """
    read = 14 + n_servos
    status = n_servos * (11 + state_len)
    write = 14 + n_servos * (1 + goal_len)
    seconds = (read + status + write) * 10.0 / baud + n_servos * return_delay_s
    return 1.0 / seconds


__all__ = ['CURRENT_OFF', 'POSITION_OFF', 'REALTIME_TICK_WRAP', 'STALE_WINDOW_MS', 'STATE_ADDR',
           'STATE_LEN', 'TICK_OFF', 'VELOCITY_OFF', 'byte_time_limit_hz', 'is_stale']
