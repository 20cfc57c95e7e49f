"""The hardware's part of the plan (``backend:=real`` and ``twin``).

The servo-bus driver on ``port:=``, or the external adapter over an existing ROS 2 driver.
Before anything starts, every joint of the robot spec is mapped to a servo model of its
``bus.family`` (:func:`simreal_ros.hardware.family.resolve_servos`): an unknown family or
model, or a mode the model cannot do, is one PlanError line. ``calibration:=CAL.yaml`` was
loaded and checked against the robot by the argument parser (robot, family, joint names, servo
ids, offsets within the family's register, ranges); the driver gets the file's absolute path
and applies it itself (calibrated spec, Homing Offsets checked and written at connect).

A floating-base robot (``base.type: floating``) also needs its IMU: ``imu_port:=`` names the
serial device of a WitMotion WT901 (or the ``--imu-link`` of ``simreal emulate``), read by
``simreal_imu_driver`` (:func:`imu_driver`) into ``imu/data``. Without it backend:=real is one
PlanError line naming the argument to pass; ``imu_port:=`` on a robot without an IMU, or with
another backend, is one too (:func:`check_imu_port`).

``gravity_ff:=`` (``auto``: on with ``teleop:=leader``) gives the driver ``gravity_ff`` 1.0:
every goal is offset by the sag its P/D position loop would leave under gravity
(:mod:`simreal_ros.hardware.gravity_ff`).

The driver is one node for every family (kind ``dynamixel_driver``), named after the family:
``/dynamixel_driver`` on a Dynamixel bus, ``/feetech_driver`` on a Feetech STS bus. A Feetech
robot's plan says in one ``note:`` line on stderr that the STS servos have no Bus Watchdog
(``bus_watchdog_ms`` does nothing there): if the driver dies, the servos hold their last goal
with torque on until their power is cut (docs/feetech.md). It is a note, not an error: the
launch goes on.
"""

from __future__ import annotations

from pathlib import Path
import sys
from typing import Any

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.errors import ConfigError, PlanError
from simreal_ros.hardware.family import resolve_servos


def real_driver(a: LaunchArgs) -> NodeSpec:
    """Return the hardware node of backend:=real/twin (Dynamixel driver or external adapter)."""
    backend = a.backend
    if a.real_driver == 'external':
        require('external_adapter', f'backend:={backend} real_driver:=external')
        params: dict[str, Any] = {'robot': a.text['robot'], 'source_states': a.external_states,
                                  'command_mode': a.external_command}
        if a.external_command_topic:
            params['command_topic'] = a.external_command_topic
        elif a.external_command == 'trajectory':
            params['command_topic'] = '/joint_trajectory_controller/joint_trajectory'
        prevalidate('external_adapter', params, 'external adapter')
        return NodeSpec('external_adapter', 'external_adapter', a.root, params)
    if not a.port:
        raise PlanError(f'backend:={backend} needs port:=<serial device> (e.g. '
                        f'port:=/dev/ttyUSB0, or the link printed by simreal emulate)')
    require('dynamixel_driver', f'backend:={backend}')
    try:
        models = resolve_servos(a.robot)
    except ConfigError as exc:
        raise PlanError(f'robot:={a.text["robot"]}: servo models: {exc}') from None
    params = {'robot': a.text['robot'], 'port': a.port, 'baud': a.baud,
              'rate_hz': a.driver_rate_hz,
              'watchdog': a.watchdog, 'give_up_after_s': a.give_up_after_s,
              'reboot_on_error': a.reboot_on_error}
    if a.gravity_ff:  # the whole modelled sag (docs/hardware.md#gravity-feed-forward)
        params['gravity_ff'] = 1.0
    if a.calibration is not None:
        params['calibration'] = str(Path(a.text['calibration']).resolve())
    prevalidate('dynamixel_driver', params, 'driver')
    family = a.robot.bus_family
    if family == 'feetech':
        print(f'note: robot:={a.text["robot"]}: the {models[0].name} servos (Feetech STS) have '
              f'no Bus Watchdog, so bus_watchdog_ms does nothing: if the driver dies they hold '
              f'their last goal with torque on until their power is cut (docs/feetech.md)',
              file=sys.stderr, flush=True)
    return NodeSpec('dynamixel_driver', f'{family}_driver', a.root, params)


def check_imu_port(a: LaunchArgs) -> None:
    """PlanError (one line) for ``imu_port:=`` that does not fit the robot or the backend."""
    hardware = a.backend in ('real', 'twin') and a.real_driver == 'dynamixel'
    if a.imu_port and not hardware:
        raise PlanError(f'imu_port:={a.imu_port}: the IMU driver runs with the servo driver: '
                        f'use it with backend:=real or twin (got backend:={a.backend}'
                        + (f' real_driver:={a.real_driver})' if a.backend in ('real', 'twin')
                           else ')'))
    if a.imu_port and a.robot.imu is None:
        raise PlanError(f'imu_port:={a.imu_port}: robot:={a.text["robot"]} has no imu in its '
                        f'spec ({a.robot.source}): leave out imu_port:=')
    if hardware and a.robot.base is not None and not a.imu_port:
        raise PlanError(f'backend:={a.backend} with robot:={a.text["robot"]} (a floating base) '
                        f'needs imu_port:=<serial device of its IMU> (e.g. imu_port:=/dev/'
                        f'ttyUSB1, or the link of simreal emulate --imu-link; docs/legged.md)')


def imu_driver(a: LaunchArgs) -> NodeSpec | None:
    """Return the IMU node of ``imu_port:=`` (None without one)."""
    check_imu_port(a)
    if not a.imu_port:
        return None
    require('imu_driver', f'backend:={a.backend} imu_port:=')
    params: dict[str, Any] = {'robot': a.text['robot'], 'port': a.imu_port,
                              'baud': a.imu_baud, 'expected_rate_hz': a.imu_rate_hz,
                              'give_up_after_s': a.give_up_after_s}
    prevalidate('imu_driver', params, 'IMU driver')
    return NodeSpec('imu_driver', 'imu_driver', a.root, params)
