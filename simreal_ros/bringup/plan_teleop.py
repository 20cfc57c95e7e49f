"""The teleop part of the plan (``teleop:=leader``): the leader node and the episode recorder.

The leader arm node reads ``leader_port:=``; the episode recorder (``episodes:=true``, the
default) serves ``~/episode/start|stop|discard``.

The leader node publishes the graph's ``joint_commands`` (through the latency injector when
``latency:=`` is set, like any command source), so it is the same on every backend. It cannot
share the command topic with another source: ``policy:=`` or ``excite:=`` with ``teleop:=``
is a PlanError.
"""

from __future__ import annotations

from typing import Any, Mapping

from simreal_ros.bringup.arguments import typed
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.core.teleop import LeaderConfig
from simreal_ros.core.teleop_quality import EpisodesConfig
from simreal_ros.errors import PlanError


def leader_node(a: Mapping[str, str], root: str) -> NodeSpec:
    """Return the leader node of ``teleop:=leader``."""
    require('leader', 'teleop:=leader')
    for other in ('policy', 'excite'):
        if a[other]:
            raise PlanError(f'teleop:=leader and {other}:={a[other]} would both publish '
                            f'joint_commands; leave out one of them')
    if not a['leader_port']:
        raise PlanError('teleop:=leader needs leader_port:=<serial device of the leader arm> '
                        '(e.g. /dev/ttyUSB1, or the link of simreal emulate --role leader)')
    params: dict[str, Any] = {
        'robot': a['robot'], 'leader_robot': a['leader_robot'], 'port': a['leader_port'],
        'rate_hz': typed(a, 'leader_rate', float, 'a number (Hz)'),
        'calibration': a['leader_calibration'], 'start_mode': a['teleop_start'],
        'start_tolerance_rad': typed(a, 'teleop_tolerance', float, 'a number (rad)'),
        'deadman_on_start': a['teleop_deadman'] == 'pressed'}
    prevalidate(LeaderConfig, params, 'leader')
    return NodeSpec('leader', 'leader', root, params)


def episodes_node(a: Mapping[str, str], root: str) -> NodeSpec:
    """Return the episode recorder of ``teleop:=leader`` (``episodes:=true``)."""
    require('episodes', 'teleop:=leader episodes:=true')
    topics = ['joint_states', 'leader/joint_states', 'joint_commands']
    if a['episode_cameras']:
        topics += [f'{c.strip()}/image_raw' for c in a['episode_cameras'].split(',')
                   if c.strip()]
    params: dict[str, Any] = {'robot': a['robot'], 'directory': a['episodes_dir'],
                              'topics': topics, 'task': a['task'],
                              'operator': a['operator'],
                              'calibration': a['leader_calibration']}
    prevalidate(EpisodesConfig, params, 'episodes')
    return NodeSpec('episodes', 'episodes', root, params)
