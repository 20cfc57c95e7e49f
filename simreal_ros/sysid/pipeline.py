"""The driver's pipeline latency on the virtual servo bus, from the bus trace and the bag.

A servo-bus replay (:mod:`simreal_ros.sysid.replay`) puts a state at its ``joint_states``
stamp and the driver's goal write at the stamp of the cycle's read. Neither is where it really
happens; the emulator (``simreal emulate --trace``) knows both true times:

* ``sync_read ADDR LEN TIME_NS``: when the arm was in the state read (physics time);
* ``sync_write ADDR LEN TIME_NS``: when the goal write arrived at the servos.

With the driver's ``backend/joint_states`` and ``backend/joint_commands`` of the bag recorded
in the same run (one host, one clock), :func:`measure` gives, per cycle:

* ``sample_to_stamp``: ``joint_states`` stamp minus the time of the state it carries (the
  read's request and answers on the wire, the driver's parse; the state is older than its
  stamp by this);
* ``stamp_to_write``: arrival of the goal written after that read, minus the stamp (publish,
  the driver's control step, the write on the wire);
* ``command_to_write``: arrival of the first goal write carrying a command's position, minus
  the command's header stamp (when it was produced): the whole command path (latency
  injector, intake, waiting for the next cycle, the write).

``sample_to_stamp + stamp_to_write`` is the part of the pipeline a servo-bus replay does not
model: a fitted ``command_delay_s`` holds it on top of the servo's own delay
(docs/sysid.md, what the fit absorbs). Matching, by positions in ticks (exact: ticks are
integers), within ``MATCH_NS``: a state to the latest read at or before its stamp with its
ticks; a cycle's write is the first write after the state's stamp and before the next state's;
a command that changes the goal to the first write at or after its stamp with its ticks. What
finds no match (a failed read, a rate-limited goal) is left out and counted. Each figure is
reported as median, p10 and p90 in ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec
from simreal_ros.hardware.dynamixel import control_table as ct

IntArray = npt.NDArray[np.int64]

GOAL_ADDR = ct.BY_NAME['goal_position'].address
PRESENT_ADDR = ct.BY_NAME['present_position'].address


@dataclass(frozen=True)
class _Layout:
    """Where a servo family keeps Present Position and Goal Position, and how to decode them."""

    present_addr: int
    goal_addr: int
    size: int
    sign_bit: int | None  # sign-magnitude (Feetech STS) or None: two's complement


def _layout(robot: RobotSpec) -> _Layout:
    if robot.bus_family == 'feetech':  # STS: 2-byte items, sign-magnitude (bit 15)
        from simreal_ros.hardware.feetech import control_table as fct
        present, goal = fct.BY_NAME['present_position'], fct.BY_NAME['goal_position']
        return _Layout(present.address, goal.address, present.size, present.sign_bit)
    return _Layout(PRESENT_ADDR, GOAL_ADDR, 4, None)
#: a state further than this from its read, or a command from its write, is no match
MATCH_NS = 100_000_000


@dataclass(frozen=True)
class TraceEvents:
    """Reads (state time, ticks) and goal writes (arrival, ticks) of a bus trace, robot order."""

    read_ns: IntArray            # (r,)
    read_ticks: IntArray         # (r, n)
    write_ns: IntArray           # (w,)
    write_ticks: IntArray        # (w, n)


def parse_trace(path: str | Path, robot: RobotSpec) -> TraceEvents:
    """Read the SYNC READs (with Present Position) and Goal Position SYNC WRITEs of a trace."""
    ids = [j.servo.servo_id for j in robot.joints]
    lay = _layout(robot)
    size = lay.size

    def value(b: bytes) -> int:
        raw = int.from_bytes(b, 'little')
        if lay.sign_bit is None:
            return ct.to_signed(raw, size)
        mag = raw & ((1 << lay.sign_bit) - 1)
        return -mag if raw & (1 << lay.sign_bit) else mag
    reads: list[tuple[int, list[int]]] = []
    writes: list[tuple[int, list[int]]] = []
    for line in Path(path).read_text(encoding='utf-8').splitlines():
        kind, addr_s, length_s, time_s, *answers = line.split(' ')
        addr, length = int(addr_s), int(length_s)
        data = {int(sid): bytes.fromhex(h) for sid, h in (a.split(':') for a in answers)}
        if any(s not in data for s in ids):
            continue
        present = lay.present_addr
        if kind == 'sync_read' and addr <= present and addr + length >= present + size:
            off = present - addr
            reads.append((int(time_s), [value(data[s][off:off + size]) for s in ids]))
        elif kind == 'sync_write' and addr == lay.goal_addr and length == size:
            writes.append((int(time_s), [value(data[s]) for s in ids]))
    n = robot.n

    def arrays(rows: list[tuple[int, list[int]]]) -> tuple[IntArray, IntArray]:
        t = np.array([r[0] for r in rows], dtype=np.int64)
        v = np.array([r[1] for r in rows], dtype=np.int64).reshape(len(rows), n)
        return t, v

    rt, rv = arrays(reads)
    wt, wv = arrays(writes)
    return TraceEvents(rt, rv, wt, wv)


def _signed(b: bytes) -> int:
    return ct.to_signed(int.from_bytes(b, 'little'), 4)


def to_ticks(robot: RobotSpec, position: npt.NDArray[np.float64]) -> IntArray:
    """Positions (rows, robot order, rad) in servo ticks (what the bus carries)."""
    return np.array([[j.servo.rad_to_ticks(float(q)) for j, q in zip(robot.joints, row,
                                                                      strict=True)]
                     for row in position], dtype=np.int64).reshape(len(position), robot.n)


def _match(times: IntArray, ticks: IntArray, ev_ns: IntArray, ev_ticks: IntArray,
           before: bool) -> IntArray:
    """Index of the event matching each row (-1: none) within ``MATCH_NS`` of its time.

    ``before``: the latest event at or before the row's time whose ticks equal the row's (a
    state and the read it answers); else the first at or after it (a command and the write
    that carries it).
    """
    out = np.full(len(times), -1, dtype=np.int64)
    keys: dict[bytes, list[int]] = {}
    for e, row in enumerate(ev_ticks):
        keys.setdefault(row.tobytes(), []).append(e)
    for k, row in enumerate(ticks):
        cands = keys.get(row.tobytes())
        if not cands:
            continue
        t_c = ev_ns[cands]
        t = int(times[k])
        if before:
            i = int(np.searchsorted(t_c, t, side='right')) - 1
            if i >= 0 and t - t_c[i] <= MATCH_NS:
                out[k] = cands[i]
        else:
            i = int(np.searchsorted(t_c, t, side='left'))
            if i < len(cands) and t_c[i] - t <= MATCH_NS:
                out[k] = cands[i]
    return out


def _stats(x: Sequence[int] | IntArray) -> dict[str, Any]:
    a = np.asarray(x, dtype=np.float64) / 1e6
    if a.size == 0:
        return {'count': 0}
    return {'count': int(a.size), 'median_ms': round(float(np.median(a)), 3),
            'p10_ms': round(float(np.percentile(a, 10)), 3),
            'p90_ms': round(float(np.percentile(a, 90)), 3)}


def measure(trace: str | Path, bag: str | Path, robot: RobotSpec) -> dict[str, Any]:
    """Pipeline latencies of one recording (see the module); JSON-able, times in ms."""
    from simreal_ros.bag import BagReader
    from simreal_ros.bag.arrays import load_arrays
    from simreal_ros.sysid.data import _pick

    ev = parse_trace(trace, robot)
    with BagReader(bag) as reader:
        topics = reader.info.topics
    st_topic, cmd_topic = _pick(topics, 'joint_states'), _pick(topics, 'joint_commands')
    if st_topic is None or cmd_topic is None:
        raise ValueError(f'{bag}: no joint_states or joint_commands topic')
    joints = load_arrays(str(bag), [st_topic, cmd_topic], robot.joint_names).joints
    st, cmd = joints[st_topic], joints[cmd_topic]
    st_ticks = to_ticks(robot, st.position)
    # a state is the answer of a read before its stamp
    r = _match(st.stamp_ns, st_ticks, ev.read_ns, ev.read_ticks, before=True)
    ok = r >= 0
    sample_to_stamp = st.stamp_ns[ok] - ev.read_ns[r[ok]]
    # the goal written in that cycle: the first write after the stamp, before the next state
    # (not after the read's time: the previous cycle's write can arrive after the state the
    # read answers was sampled, as physics time is up to one step behind the request)
    stamps = st.stamp_ns[ok]
    w = np.searchsorted(ev.write_ns, stamps, side='left')
    has_w = w < len(ev.write_ns)
    nxt = np.append(stamps[1:], np.iinfo(np.int64).max)
    w_ns = ev.write_ns[np.minimum(w, len(ev.write_ns) - 1)]
    this_cycle = has_w & (w_ns < nxt)  # a cycle that wrote nothing (a reset) is left out
    stamp_to_write = w_ns[this_cycle] - stamps[this_cycle]
    c_ticks = to_ticks(robot, cmd.position)
    # only commands that change the goal: a repeated one is carried by the earlier write
    changed = np.ones(len(c_ticks), dtype=bool)
    changed[1:] = np.any(c_ticks[1:] != c_ticks[:-1], axis=1)
    cw = _match(cmd.stamp_ns[changed], c_ticks[changed], ev.write_ns, ev.write_ticks,
                before=False)
    cok = cw >= 0
    command_to_write = ev.write_ns[cw[cok]] - cmd.stamp_ns[changed][cok]
    s2s, s2w = _stats(sample_to_stamp), _stats(stamp_to_write)
    out = {
        'state_topic': st_topic, 'command_topic': cmd_topic,
        'sample_to_stamp': s2s, 'stamp_to_write': s2w,
        'command_to_write': _stats(command_to_write),
        'unmatched_states': int((~ok).sum()), 'unmatched_commands': int((~cok).sum()),
    }
    if s2s['count'] and s2w['count']:
        out['unmodelled_ms'] = round(s2s['median_ms'] + s2w['median_ms'], 3)
    return out
