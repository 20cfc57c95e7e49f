"""What sysid reads from a bag: the commands the robot really got and the states it measured.

Topic rule (one namespace; the root one when the bag has several):

* commands: ``<ns>/backend/joint_commands`` if recorded, else ``<ns>/joint_commands``. With the
  latency injector in the graph the backend subscribes ``backend/joint_commands`` (what the
  injector delivered, late, lost or duplicated); without it, ``joint_commands`` is what the
  backend got. Either way the topic closest to the robot is the one replayed.
* states: ``<ns>/backend/joint_states`` (the backend's own, undelayed stream) if recorded, else
  ``<ns>/joint_states``.

Streams are read with the project's one array reader (:mod:`simreal_ros.bag.arrays`): columns
in the robot spec's joint order, messages missing a joint or with a NaN position skipped, NaN
velocity and effort rows where a message had none, and in time order with the first of equal
times kept.

Times: a command is taken to reach the backend at its bag timestamp (the recorder's receive
time on the same host; the header stamp is when it was *produced*, before the injector). A state
is at its header stamp (the time of measurement). All times are integer nanoseconds.

Window: from the first command to the last command (where commands are flowing), clipped to
the span of the states; ``window_ns`` narrows it further. Replays start from the measured state
at the window start, never from the home keyframe: a servo arm that sagged before the first
command would otherwise show a large start-up "gap" that is not dynamics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from simreal_ros.bag import BagReader
from simreal_ros.bag.arrays import JOINT_STATE, read_arrays
from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import SimrealError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: shortest window sysid accepts (commands flowing); shorter bags say so in one line
MIN_WINDOW_NS = 2_000_000_000
#: fewest state samples in the window
MIN_STATES = 50


class SysidInputError(SimrealError):
    """A bag cannot be used for identification or validation (topics, robot, length)."""


@dataclass
class SysidData:
    """Commands and measured states of one bag, in robot joint order, inside the window."""

    bag: Path
    bag_sha256: str
    backend: str
    command_topic: str
    state_topic: str
    joint_names: list[str]
    cmd_ns: IntArray              # when each command reached the backend (bag receive time)
    cmd_pos: FloatArray           # (m, n) rad
    cmd_vel: FloatArray           # (m, n) rad/s (0 where the message had none)
    cmd_eff: FloatArray           # (m, n) N*m (0 where the message had none)
    state_ns: IntArray            # header stamps (time of measurement)
    state_pos: FloatArray         # (k, n) rad
    state_vel: FloatArray         # (k, n) rad/s (NaN where the message had none)
    window_ns: tuple[int, int]
    custom_data: dict[str, str] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        """Length of the window (s)."""
        return (self.window_ns[1] - self.window_ns[0]) / 1e9

    @property
    def is_hardware(self) -> bool:
        """True when a servo bus was the robot (goals written once per bus cycle, no FF)."""
        return self.backend in ('real', 'twin')

    def state_at(self, t_ns: int) -> tuple[FloatArray, FloatArray]:
        """Measured position and velocity at ``t_ns`` (linear interpolation)."""
        t = self.state_ns.astype(np.float64)
        pos = np.array([np.interp(float(t_ns), t, self.state_pos[:, j])
                        for j in range(self.state_pos.shape[1])])
        vel_src = np.nan_to_num(self.state_vel)
        vel = np.array([np.interp(float(t_ns), t, vel_src[:, j])
                        for j in range(vel_src.shape[1])])
        return pos, vel

    def summary(self) -> dict[str, Any]:
        """Return the provenance block written into overlays and reports."""
        return {'path': str(self.bag), 'sha256': self.bag_sha256, 'backend': self.backend,
                'command_topic': self.command_topic, 'state_topic': self.state_topic,
                'window_ns': [int(self.window_ns[0]), int(self.window_ns[1])],
                'window_s': round(self.duration_s, 3)}


def bag_sha256(path: Path) -> str:
    """SHA-256 over the bag's files (metadata.yaml and data files, sorted by name)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(f.name.encode())
        with f.open('rb') as fh:
            for block in iter(lambda: fh.read(1 << 20), b''):
                h.update(block)
    return h.hexdigest()


def _pick(topics: dict[str, tuple[str, int]], leaf: str) -> str | None:
    """Pick the topic for ``leaf`` (``backend/`` first, root namespace first)."""
    cands = [t for t, (ty, n) in topics.items() if ty == JOINT_STATE and n > 0
             and (t == f'/{leaf}' or t.endswith(f'/{leaf}'))]
    if not cands:
        return None

    def ns_of(t: str) -> str:
        base = t[:-len(leaf) - 1]
        return base[:-len('/backend')] if base.endswith('/backend') else base

    namespaces = sorted({ns_of(t) for t in cands}, key=lambda ns: (ns.count('/'), ns))
    ns = namespaces[0]
    for t in (f'{ns}/backend/{leaf}', f'{ns}/{leaf}'):
        if t in cands:
            return t
    return None


def _topics(info: Any, robot: RobotSpec) -> tuple[str, str]:
    """Return the bag's command and state topics for ``robot``; SysidInputError if none."""
    cd = info.custom_data
    bag_robot = cd.get('robot_spec.argument', '')
    spec_text = cd.get('robot_spec', '')
    if spec_text and f'robot: {robot.name}' not in spec_text:
        first = next((ln for ln in spec_text.splitlines() if ln.startswith('robot:')), '')
        raise SysidInputError(f'{info.path} was recorded with another robot '
                              f'({first.strip() or bag_robot or "unknown"}), not '
                              f'{robot.name}: pass --robot with the spec it was recorded '
                              f'with')
    cmd_topic = _pick(info.topics, 'joint_commands')
    state_topic = _pick(info.topics, 'joint_states')
    have = sorted(t for t, (ty, _n) in info.topics.items() if ty == JOINT_STATE)
    if cmd_topic is None:
        raise SysidInputError(f'{info.path} has no command topic (joint_commands or '
                              f'backend/joint_commands with messages); its JointState '
                              f'topics: {have or "none"}')
    if state_topic is None:
        raise SysidInputError(f'{info.path} has no state topic (joint_states or '
                              f'backend/joint_states with messages); its JointState '
                              f'topics: {have or "none"}')
    return cmd_topic, state_topic


def check_sysid_bag(bag: str | Path, robot: RobotSpec) -> None:
    """Check what :func:`load_sysid_data` needs of ``bag`` from its metadata alone.

    A readable bag of ``robot`` with a command and a state topic; no message is read.
    """
    with BagReader(bag) as reader:
        _topics(reader.info, robot)


def load_sysid_data(bag: str | Path, robot: RobotSpec,
                    window_ns: tuple[int, int] | None = None) -> SysidData:
    """Read commands and states of ``bag`` for ``robot``; SysidInputError on bad input."""
    with BagReader(bag) as reader:
        info = reader.info
        cd = info.custom_data
        cmd_topic, state_topic = _topics(info, robot)
        names = robot.joint_names
        streams = read_arrays(reader, [cmd_topic, state_topic], names).joints
        path = info.path
    for topic in (state_topic, cmd_topic):
        got = list(streams[topic].first_names)
        missing = [j for j in names if j not in got]
        if missing:
            raise SysidInputError(f'{topic} in {path} has joints {got}, not the '
                                  f'joints of {robot.name} ({", ".join(names)}): a bag '
                                  f'of another robot? pass --robot with its spec')
    cmd = streams[cmd_topic].in_time_order('receive')
    st = streams[state_topic].in_time_order('stamp')
    cmd_ns, cmd_pos, cmd_vel, cmd_eff = cmd.receive_ns, cmd.position, cmd.velocity, cmd.effort
    st_ns, st_pos, st_vel = st.stamp_ns, st.position, st.velocity
    if cmd_ns.size < 2 or st_ns.size < MIN_STATES:
        raise SysidInputError(f'{path}: too little data ({cmd_ns.size} commands on '
                              f'{cmd_topic}, {st_ns.size} states on {state_topic}); record at '
                              f'least {MIN_WINDOW_NS / 1e9:g} s of commands')
    lo = max(int(cmd_ns[0]), int(st_ns[0]))
    hi = min(int(cmd_ns[-1]), int(st_ns[-1]))
    if window_ns is not None:
        if window_ns[1] <= window_ns[0]:
            raise SysidInputError(f'window {window_ns}: the end must be after the start')
        lo, hi = max(lo, int(window_ns[0])), min(hi, int(window_ns[1]))
    if hi - lo < MIN_WINDOW_NS:
        raise SysidInputError(f'{path}: commands flow for only {max(hi - lo, 0) / 1e9:.2f} s '
                              f'where states were measured too (window {lo}..{hi} ns); sysid '
                              f'needs at least {MIN_WINDOW_NS / 1e9:g} s (60 s of '
                              f'pattern:=sysid is the recommended recording)')
    # keep the last command before the window (it is what the robot holds at the start)
    c0 = max(int(np.searchsorted(cmd_ns, lo, side='right')) - 1, 0)
    c1 = int(np.searchsorted(cmd_ns, hi, side='right'))
    ks = (st_ns >= lo) & (st_ns <= hi)
    if int(ks.sum()) < MIN_STATES:
        raise SysidInputError(f'{path}: only {int(ks.sum())} states in the window; need '
                              f'{MIN_STATES}')
    return SysidData(
        bag=Path(path), bag_sha256=bag_sha256(Path(path)), backend=cd.get('backend', ''),
        command_topic=cmd_topic, state_topic=state_topic, joint_names=list(names),
        cmd_ns=cmd_ns[c0:c1], cmd_pos=cmd_pos[c0:c1],
        cmd_vel=np.nan_to_num(cmd_vel[c0:c1]), cmd_eff=np.nan_to_num(cmd_eff[c0:c1]),
        state_ns=st_ns[ks], state_pos=st_pos[ks], state_vel=st_vel[ks], window_ns=(lo, hi),
        custom_data=dict(cd))
