"""A floating-base robot's legged streams read from a bag, as :class:`LeggedEpisode` arrays.

For ``simreal gap``: the robot under namespace ``NS`` (``/`` for the root, ``/sim_a/``,
``/twin/``) is its ``NSodom`` (nav_msgs/Odometry), ``NSfoot_contacts`` (sensor_msgs/JointState,
``effort`` = each foot's normal force), optionally ``NSimu/data`` (sensor_msgs/Imu) and its
velocity command: ``NScmd_vel``, else the root ``/cmd_vel`` (``sim2sim`` tells both robots
the root's), else none (no velocity tracking). One pass over the bag with the project's bag
reader (:func:`simreal_ros.bag.arrays.read_arrays`), which hands these topics back as they are
(``raw``: foot_contacts is a JointState without positions, not a joint stream); the feet are in
the first message's order, a message naming others or without one force per foot is skipped
and counted (:attr:`LeggedRead.skipped`).

Samples are paired by header stamp: the episode's samples are the odom stamps that
foot_contacts also has (the sim bridge stamps both with the same state; duplicates keep the
first); imu/data joins when it has every one of those stamps inside its own span (the
samples before its first or after its last, the recording's edges, are then left out and
:attr:`LeggedRead.imu_note` says how many), else it is left out and the note says why.
``cmd_vel`` has no header: its times are the bag's receive times, each command held until the
next. A robot whose odom or foot_contacts was not recorded, or with fewer than 2 paired
samples, is one :class:`~simreal_ros.errors.BagError` naming the bag, the topic and what to
record.

:func:`legged_namespaces` lists the namespaces of a bag that have both ``odom`` and
``foot_contacts`` (a real robot's bag has neither: it has no ground truth).

:func:`legged_section` is ``simreal gap``'s ``legged`` section (``legged_gap`` of
:mod:`simreal_ros.gap.legged`, with the topics read and any note): in one bag, the primary's
namespace against the secondary's (a ``sim2sim`` bag: ``/sim_a/`` vs ``/sim_b/``), when both
have the legged topics; with a second bag (``--against``), the first bag's robot against the
second's, each the namespace of its bag's primary joint_states when that has them, else the
bag's one legged namespace (several and no primary: a BagError listing them; the second bag's
primary is its default pairing's, ``/sim_a/`` of a sim2sim bag). Two runs are put
on one time axis by their first paired samples (the second's stamps moved by the difference,
``shift_s``): start both the same way, e.g. record from a reset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simreal_ros.bag import BagInfo, BagReader
from simreal_ros.bag.arrays import read_arrays
from simreal_ros.bag.reader import BagMessage
from simreal_ros.errors import BagError
from simreal_ros.gap.episode import default_pairing
from simreal_ros.gap.legged import LeggedEpisode, LeggedGapConfig, legged_gap

ODOM_TYPE = 'nav_msgs/msg/Odometry'
IMU_TYPE = 'sensor_msgs/msg/Imu'
TWIST_TYPE = 'geometry_msgs/msg/Twist'


def legged_namespaces(info: BagInfo) -> list[str]:
    """Namespaces (``/``, ``/sim_a/``, ...) whose odom and foot_contacts the bag has, sorted."""
    out = []
    for topic, (msgtype, _n) in info.topics.items():
        if msgtype == ODOM_TYPE and topic.endswith('/odom'):
            ns = topic[:-len('odom')]
            if f'{ns}foot_contacts' in info.topics:
                out.append(ns)
    return sorted(out)


def namespace_of(joint_states_topic: str) -> str:
    """Return the namespace of a joint_states topic (``/sim_a/joint_states`` -> ``/sim_a/``)."""
    topic = joint_states_topic if joint_states_topic.startswith('/') else f'/{joint_states_topic}'
    head, _sep, _tail = topic.rpartition('/')
    if head.endswith('/backend'):  # the latency injector's undelayed stream
        head = head[:-len('/backend')]
    return f'{head}/'


@dataclass(frozen=True)
class LeggedRead:
    """One robot's legged episode from a bag and the topics it came from."""

    episode: LeggedEpisode
    topics: dict[str, str]
    imu_note: str = ''
    skipped: int = 0


class _Collect:
    """Odom, imu and cmd_vel rows of the wanted topics, in bag order."""

    def __init__(self, reader: BagReader, wanted: dict[str, str]) -> None:
        self.reader = reader
        self.wanted = wanted  # topic -> kind
        self.odom: dict[str, list[tuple[int, list[float]]]] = {}
        self.imu: dict[str, list[tuple[int, list[float]]]] = {}
        self.cmd: dict[str, list[tuple[int, list[float]]]] = {}
        self.feet: dict[str, list[tuple[int, list[float]]]] = {}
        self.feet_names: dict[str, list[str]] = {}
        self.skipped: dict[str, int] = {}

    def __call__(self, m: BagMessage) -> None:
        kind = self.wanted.get(m.topic)
        if kind is None:
            return
        msg = self.reader.deserialize(m)
        if kind == 'odom':
            p, q = msg.pose.pose.position, msg.pose.pose.orientation
            v, w = msg.twist.twist.linear, msg.twist.twist.angular
            self.odom.setdefault(m.topic, []).append((_stamp(msg), [
                p.x, p.y, p.z, q.w, q.x, q.y, q.z, v.x, v.y, v.z, w.x, w.y, w.z]))
        elif kind == 'foot_contacts':
            names = self.feet_names.setdefault(m.topic, list(msg.name))
            if list(msg.name) != names or len(msg.effort) != len(names) \
                    or not np.all(np.isfinite(msg.effort)):
                self.skipped[m.topic] = self.skipped.get(m.topic, 0) + 1
                return
            self.feet.setdefault(m.topic, []).append((_stamp(msg), list(msg.effort)))
        elif kind == 'imu':
            g, a = msg.angular_velocity, msg.linear_acceleration
            self.imu.setdefault(m.topic, []).append((_stamp(msg), [g.x, g.y, g.z,
                                                                   a.x, a.y, a.z]))
        else:
            v, w = msg.linear, msg.angular
            self.cmd.setdefault(m.topic, []).append((m.timestamp, [v.x, v.y, v.z,
                                                                   w.x, w.y, w.z]))


def _stamp(msg: Any) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _rows(samples: list[tuple[int, list[float]]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Stamps and rows sorted by stamp, the first of equal stamps kept."""
    if not samples:
        return np.zeros(0, dtype=np.int64), np.zeros((0, width))
    t = np.array([s for s, _r in samples], dtype=np.int64)
    rows = np.array([r for _s, r in samples], dtype=np.float64)
    t_unique, first = np.unique(t, return_index=True)
    return t_unique, rows[first]


def _topics_for(info: BagInfo, ns: str) -> dict[str, str]:
    odom, feet = f'{ns}odom', f'{ns}foot_contacts'
    for topic in (odom, feet):
        if topic not in info.topics:
            raise BagError(f'the bag {info.path} has no {topic}: a legged gap needs the '
                           f'ground truth of the sim bridge (odom, foot_contacts) for {ns}; '
                           f'record them (a real robot has none)')
    out = {'odom': odom, 'foot_contacts': feet}
    if info.topics.get(f'{ns}imu/data', ('', 0))[0] == IMU_TYPE:
        out['imu'] = f'{ns}imu/data'
    for cmd in (f'{ns}cmd_vel', '/cmd_vel'):
        if info.topics.get(cmd, ('', 0))[0] == TWIST_TYPE:
            out['cmd_vel'] = cmd
            break
    return out


def read_legged(path: str, namespaces: Sequence[str], label: str = ''
                ) -> dict[str, LeggedRead]:
    """Read the legged episode of each namespace of the bag at ``path`` in one pass.

    Episodes are named ``label + namespace`` (``label`` tells two bags apart).
    """
    with BagReader(path) as reader:
        info = reader.info
        per_ns = {ns: _topics_for(info, ns) for ns in namespaces}
        kinds = {t: k for tops in per_ns.values() for k, t in tops.items()}
        collect = _Collect(reader, kinds)
        topics = sorted(kinds)
        read_arrays(reader, topics, other=collect, raw=topics)
    return {ns: _episode(info, label + ns, tops, collect) for ns, tops in per_ns.items()}


def _episode(info: BagInfo, name: str, tops: dict[str, str], collect: _Collect
             ) -> LeggedRead:
    feet_topic = tops['foot_contacts']
    t_odom, odom = _rows(collect.odom.get(tops['odom'], []), 13)
    n_feet = len(collect.feet_names.get(feet_topic, []))
    t_feet, force = _rows(collect.feet.get(feet_topic, []), n_feet)
    if n_feet == 0 or len(t_feet) == 0:
        raise BagError(f'the bag {info.path} has no usable {feet_topic} message (one '
                       'force per foot in effort)')
    t, i_odom, i_feet = np.intersect1d(t_odom, t_feet, return_indices=True)
    if len(t) < 2:
        raise BagError(f'the bag {info.path}: {tops["odom"]} and {tops["foot_contacts"]} '
                       f'share {len(t)} stamps (expected the same stamp on both, as the sim '
                       f'bridge publishes them)')
    gyro = acc = None
    note = ''
    if 'imu' in tops:
        t_imu, imu = _rows(collect.imu.get(tops['imu'], []), 6)
        common, _ia, i_imu = np.intersect1d(t, t_imu, return_indices=True)
        # A recorder starts and stops each topic at its own moment (a wildcard subscribes to
        # each as discovery reports it: a CI run's bag had odom samples before the first IMU
        # one), so samples outside the IMU's span are the recording's edges, dropped. A stamp
        # missing inside it is a lost message: the IMU is left out.
        span = (t >= t_imu[0]) & (t <= t_imu[-1]) if len(t_imu) else np.zeros(len(t), bool)
        if len(common) >= 2 and len(common) == np.count_nonzero(span):
            gyro, acc = imu[i_imu, :3], imu[i_imu, 3:]
            if len(common) < len(t):
                note = (f'{tops["imu"]} starts {(common[0] - t[0]) * 1e-9:.3f} s after '
                        f'{tops["odom"]} and ends {(t[-1] - common[-1]) * 1e-9:.3f} s before '
                        f'it: the {len(t) - len(common)} samples outside left out')
                t, i_odom, i_feet = t[span], i_odom[span], i_feet[span]
        else:
            note = (f'{tops["imu"]} has {len(common)} of the {len(t)} odom stamps: IMU '
                    'metrics left out')
    else:
        note = 'no imu/data recorded: IMU metrics left out'
    o = odom[i_odom]
    t_cmd, cmd = _rows(collect.cmd.get(tops.get('cmd_vel', ''), []), 6)
    try:
        ep = LeggedEpisode.from_arrays(name, t, o[:, 0:3], o[:, 3:7], o[:, 7:10], o[:, 10:13],
                                       force[i_feet], t_cmd, cmd[:, :3], cmd[:, 3:], gyro, acc)
    except ValueError as exc:
        raise BagError(f'the bag {info.path}: {exc}') from None
    return LeggedRead(ep, tops, note, collect.skipped.get(feet_topic, 0))


def shifted(ep: LeggedEpisode, shift_ns: int) -> LeggedEpisode:
    """Return ``ep`` with every stamp moved by ``shift_ns`` (two runs on one time axis)."""
    return LeggedEpisode(ep.name, ep.stamps_ns + shift_ns, ep.position_m, ep.orientation_wxyz,
                         ep.linear_velocity_m_s, ep.angular_velocity_rad_s, ep.foot_force_n,
                         ep.cmd_stamps_ns + shift_ns, ep.cmd_linear_m_s,
                         ep.cmd_angular_rad_s, ep.imu_gyro_rad_s, ep.imu_acc_m_s2)


def _choose(info: BagInfo, primary: str | None) -> str:
    """Return the legged robot of a bag for ``--against`` (see the module docstring)."""
    found = legged_namespaces(info)
    if primary and namespace_of(primary) in found:
        return namespace_of(primary)
    if len(found) == 1:
        return found[0]
    if not found:
        raise BagError(f'the bag {info.path} has no odom and foot_contacts of one namespace: '
                       'a legged gap needs the ground truth of the sim bridge (a real robot '
                       'has none)')
    raise BagError(f'the bag {info.path} has the legged topics of {", ".join(found)}: give '
                   '--primary NS/joint_states to choose its robot')


def _info(path: str) -> BagInfo:
    with BagReader(path) as reader:
        return reader.info


def legged_section(bag: str, primary: str | None, secondary: str | None,
                   against: str | None = None, against_primary: str | None = None,
                   cfg: LeggedGapConfig | None = None) -> dict[str, Any] | None:
    """``simreal gap``'s legged section (module docstring); None: no legged pair in ``bag``."""
    if against is None:
        if not (primary and secondary):
            return None
        found = legged_namespaces(_info(bag))
        ns_a, ns_b = namespace_of(primary), namespace_of(secondary)
        if ns_a not in found or ns_b not in found:
            return None
        reads = read_legged(bag, [ns_a, ns_b])
        a, b = reads[ns_a], reads[ns_b]
        shift_ns = 0
        bags = {'reference': bag, 'compared': bag}
    else:
        ns_a = _choose(_info(bag), primary)
        info_b = _info(against)
        ns_b = _choose(info_b, against_primary or (default_pairing(info_b) or (None,))[0])
        a = read_legged(bag, [ns_a], 'reference:')[ns_a]
        b = read_legged(against, [ns_b], 'compared:')[ns_b]
        shift_ns = int(a.episode.stamps_ns[0] - b.episode.stamps_ns[0])
        b = LeggedRead(shifted(b.episode, shift_ns), b.topics, b.imu_note, b.skipped)
        bags = {'reference': bag, 'compared': against}
    try:
        gap = legged_gap(a.episode, b.episode, cfg)
    except ValueError as exc:
        raise BagError(f'legged gap of {bag}: {exc}') from None
    notes = [f'{r.episode.name}: {r.imu_note}' for r in (a, b) if r.imu_note]
    notes += [f'{r.episode.name}: {r.skipped} {r.topics["foot_contacts"]} messages skipped '
              '(other feet or not one finite force per foot)' for r in (a, b) if r.skipped]
    return {**gap, 'bags': bags, 'shift_s': shift_ns / 1e9,
            'topics': {a.episode.name: a.topics, b.episode.name: b.topics}, 'notes': notes}
