"""The launch planner: (backend, robot, options) -> the list of nodes to start.

This is the single source of truth for what runs in each mode. ``simreal launch`` starts the
plan as processes; ``launch/bringup.launch.py`` turns the same plan into ``launch_ros`` actions.
Both accept the same ``name:=value`` arguments, listed in :data:`ARGUMENTS`
(:mod:`~simreal_ros.bringup.arguments`), parsed once into a :class:`LaunchArgs` that holds every
value typed and every file an argument names loaded and validated: a bad one is a PlanError
before any process starts. Each node kind has its builder module (``plan_*.py``,
``record_plan.py``), which takes that object; this module composes them per backend and
re-exports what the launch file, the CLI and the tests use. The node kinds themselves are
declared once, in :mod:`~simreal_ros.bringup.registry`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from simreal_ros.bringup.arguments import (
    ARGUMENTS,
    BACKENDS,
    EXCITE_PATTERNS,
    LaunchArgs,
    ns,
    parse_cli_args,
    parse_launch_args,
)
from simreal_ros.bringup.plan_bridge import bridge, engine_of
from simreal_ros.bringup.plan_camera import camera_drivers, sim_renders_cameras
from simreal_ros.bringup.plan_excite import excite
from simreal_ros.bringup.plan_hardware import check_imu_port, imu_driver, real_driver
from simreal_ros.bringup.plan_latency import backend_remaps, delays_cameras, injector
from simreal_ros.bringup.plan_policy import policy_node
from simreal_ros.bringup.plan_realtime import (
    EMULATOR_RT_PRIORITY,
    RT_PRIORITIES,
    with_rt_priorities,
)
from simreal_ros.bringup.plan_teleop import episodes_node, leader_node
from simreal_ros.bringup.plan_tf import state_publishers
from simreal_ros.bringup.record_plan import recorder_spec
from simreal_ros.bringup.spec import NODES, PACKAGE, NodeSpec, require

__all__ = ['ARGUMENTS', 'BACKENDS', 'EMULATOR_RT_PRIORITY', 'EXCITE_PATTERNS', 'NODES', 'PACKAGE',
           'RT_PRIORITIES', 'LaunchArgs', 'NodeSpec', 'parse_cli_args', 'parse_launch_args',
           'plan', 'plan_args']


def plan(args: Mapping[str, str]) -> list[NodeSpec]:
    """Return the nodes for the given ``name:=value`` arguments (see :data:`ARGUMENTS`)."""
    return plan_args(parse_launch_args(args))


def plan_args(a: LaunchArgs) -> list[NodeSpec]:
    """Return the nodes for parsed arguments (every file already loaded and checked)."""
    backend, root = a.backend, a.root
    nodes: list[NodeSpec] = []
    check_imu_port(a)
    profile = a.latency
    with_imu = profile is not None and 'imu' in {r.name for r in profile.routes} and (
        a.robot.imu is not None)
    # the sim renders every camera of the spec (cameras:=auto/true)
    cams = ([c.name for c in a.robot.cameras]
            if delays_cameras(profile) and sim_renders_cameras(a) else [])
    moved = backend_remaps(profile, with_imu, cams)
    if backend == 'sim':
        require('sim_bridge', 'backend:=sim')
        nodes.append(bridge(a, 'sim_bridge', root, 'overlay', None, True, moved))
        if profile is not None:
            nodes.append(injector(a, '', with_imu, cams))
    elif backend == 'sim2sim':
        require('sim_bridge', 'backend:=sim2sim')
        commands = ns(root, 'backend') if profile is not None else root or ''
        nodes.append(bridge(a, 'sim_bridge', ns(root, 'sim_a'), 'overlay', commands,
                            True, moved, engine_of(a, 'a')))
        nodes.append(bridge(a, 'sim_bridge', ns(root, 'sim_b'), 'overlay_b', commands,
                            False, engine=engine_of(a, 'b'), frame_prefix='sim_b/'))
        if profile is not None:
            nodes.append(injector(a, 'sim_a', with_imu, cams))
    elif backend in ('real', 'twin'):
        drivers = camera_drivers(a)
        # only the cameras that have a driver (cameras:=auto skips those without a device)
        cams = ([str(d.parameters['camera']) for d in drivers]
                if delays_cameras(profile) else [])
        imu = imu_driver(a)
        if imu is None:  # no IMU topic of its own to move
            with_imu = False
        moved = backend_remaps(profile, False, cams)
        nodes.append(replace(real_driver(a), remappings=backend_remaps(profile, False)))
        if imu is not None:  # imu/data through the injector's imu route, as in sim
            nodes.append(replace(imu, remappings=(
                (('imu/data', 'backend/imu/data'),) if with_imu else ())))
        nodes.extend(replace(d, remappings=moved) for d in drivers)
        if backend == 'twin':
            require('sim_bridge', 'backend:=twin')
            # the twin gets the commands the hardware gets (after the injector, if any)
            commands = ns(root, 'backend') if profile is not None else root or ''
            twin = bridge(a, 'sim_bridge', ns(root, 'twin'), 'overlay', commands, False,
                          frame_prefix='twin/')
            if a.twin_resync_s > 0:  # to the undelayed real state
                source = ns(root, 'backend/joint_states' if profile is not None
                            else 'joint_states')
                twin = replace(twin, parameters={**twin.parameters,
                                                 'resync_period_s': a.twin_resync_s,
                                                 'resync_topic': source})
            nodes.append(twin)
        if profile is not None:
            nodes.append(injector(a, '', with_imu, cams))
    nodes += state_publishers(a, nodes)
    if a.policy is not None:
        nodes.append(policy_node(a))
    if a.teleop == 'leader':
        nodes.append(leader_node(a))
        if a.episodes:
            nodes.append(episodes_node(a))
    if a.excite:
        nodes.append(excite(a))
    if a.record:
        require('recorder', 'record:=true')
        nodes.append(recorder_spec(a))
    if a.realtime:
        nodes = with_rt_priorities(nodes)
    return nodes
