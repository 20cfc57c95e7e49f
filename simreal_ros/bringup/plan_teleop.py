"""The teleop part of the plan (``teleop:=leader``): the leader node and the episode recorder.

The leader arm node reads ``leader_port:=`` on the leader robot's servo family (its bus class
from :func:`simreal_ros.hardware.family.bus_class`, as the driver's): a Dynamixel leader, or
LeRobot's SO-101 leader on a Feetech STS bus, read with torque off. ``leader_compensation:=``
(current mode) needs current control on every leader servo: on a leader without it (STS3215,
XL430) it is one PlanError naming the argument. The episode recorder (``episodes:=true``, the
default) serves ``~/episode/start|stop|discard``.

The leader node publishes the graph's ``joint_commands`` (through the latency injector when
``latency:=`` is set, like any command source), so it is the same on every backend. It cannot
share the command topic with another source: ``policy:=`` or ``excite:=`` with ``teleop:=``
is a PlanError.
"""

from __future__ import annotations

from typing import Any

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import key_numbers
from simreal_ros.errors import ConfigError, PlanError
from simreal_ros.hardware.family import resolve_servos
from simreal_ros.teleop.control import LeaderConfig, leader_mapping

GRIPPER_KEYS = ('trigger_open', 'trigger_closed', 'open', 'closed')


def gripper_params(text: str) -> dict[str, Any]:
    """Return the leader's gripper parameters of ``leader_gripper:=`` ('' = none)."""
    if not text:
        return {}
    joint, *parts = [s.strip() for s in text.split(',')]
    try:
        values = key_numbers(parts, GRIPPER_KEYS, 'leader_gripper:=', finite=True)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    missing = [k for k in GRIPPER_KEYS if k not in values]
    if missing:
        raise PlanError(f'leader_gripper:={text!r} is not valid; expected JOINT,'
                        f'{",".join(k + "=R" for k in GRIPPER_KEYS)} (missing {missing[0]})')
    return {'gripper_joint': joint, 'gripper_trigger_open_rad': values['trigger_open'],
            'gripper_trigger_closed_rad': values['trigger_closed'],
            'gripper_open_rad': values['open'], 'gripper_closed_rad': values['closed']}


COMPENSATION_KEYS = ('gravity_fraction', 'friction_nm', 'friction_deadband_rad_s',
                     'max_current_a')


def compensation_params(text: str) -> dict[str, Any]:
    """Return the leader's compensation parameters of ``leader_compensation:=`` ('' = off)."""
    if not text:
        return {}
    parts = [] if text.strip() == 'on' else text.split(',')
    try:
        values = key_numbers(parts, COMPENSATION_KEYS, 'leader_compensation:=', finite=True)
    except ConfigError as exc:
        raise PlanError(f'{exc} (or on: the defaults)') from None
    return {'compensation': True, **values}


def _require_current_control(leader: RobotSpec, text: str) -> None:
    """PlanError (one line) when a leader servo cannot run the compensation's current mode.

    LeRobot's SO-101 leader (STS3215, no current-control mode) is read with torque off: the
    leader node's default, ``compensation`` false.
    """
    for j, model in zip(leader.joints, resolve_servos(leader), strict=True):
        if not model.has_current_control:
            raise PlanError(
                f'leader_compensation:={text}: the leader arm {leader.name} has {model.name} '
                f'servos ({j.name}), which have no current-control mode for gravity '
                f'compensation; leave out leader_compensation:= (the leader is then read with '
                f'torque off, as LeRobot reads its SO-101 leader), or use a leader arm whose '
                f'servos all have current control (XM430, XL330)')


def leader_node(a: LaunchArgs) -> NodeSpec:
    """Return the leader node of ``teleop:=leader``."""
    require('leader', 'teleop:=leader')
    for other in ('policy', 'excite'):
        if a.text[other]:
            raise PlanError(f'teleop:=leader and {other}:={a.text[other]} would both publish '
                            f'joint_commands; leave out one of them')
    if not a.leader_port:
        raise PlanError('teleop:=leader needs leader_port:=<serial device of the leader arm> '
                        '(e.g. /dev/ttyUSB1, or the link of simreal emulate --role leader)')
    params: dict[str, Any] = {
        'robot': a.text['robot'], 'leader_robot': a.text['leader_robot'],
        'port': a.leader_port, 'rate_hz': a.leader_rate_hz,
        'calibration': a.leader_calibration, 'start_mode': a.teleop_start,
        'start_tolerance_rad': a.teleop_tolerance_rad,
        'deadman_on_start': a.teleop_deadman_pressed,
        'button_id': a.leader_button,
        **gripper_params(a.leader_gripper),
        **compensation_params(a.leader_compensation)}
    prevalidate('leader', params, 'leader')
    leader = a.leader_robot if a.leader_robot is not None else a.robot
    if params.get('compensation'):
        _require_current_control(leader, a.leader_compensation)
    try:  # the keys bound to the robots (button servo, gripper joint and its limits)
        leader_mapping(LeaderConfig.from_mapping(params), a.robot, leader)
    except ConfigError as exc:
        raise PlanError(f'leader settings: {exc}') from None
    return NodeSpec('leader', 'leader', a.root, params)


def episodes_node(a: LaunchArgs) -> NodeSpec:
    """Return the episode recorder of ``teleop:=leader`` (``episodes:=true``)."""
    require('episodes', 'teleop:=leader episodes:=true')
    topics = ['joint_states', 'leader/joint_states', 'joint_commands']
    topics += [f'{c}/image_raw' for c in a.episode_cameras]
    params: dict[str, Any] = {'robot': a.text['robot'], 'directory': a.episodes_dir,
                              'topics': topics, 'task': a.task, 'operator': a.operator,
                              'calibration': a.leader_calibration}
    prevalidate('episodes', params, 'episodes')
    return NodeSpec('episodes', 'episodes', a.root, params)
