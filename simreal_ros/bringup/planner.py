"""The launch planner: (backend, robot, options) -> the list of nodes to start.

This is the single source of truth for what runs in each mode. ``simreal launch`` starts the
plan as processes; ``launch/bringup.launch.py`` turns the same plan into ``launch_ros`` actions.
Both accept the same ``name:=value`` arguments, listed in :data:`ARGUMENTS`
(:mod:`~simreal_ros.bringup.arguments`). Each node kind has its builder module (``plan_*.py``,
``record_plan.py``); this module composes them per backend and re-exports what the launch
file, the CLI and the tests use.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from simreal_ros.bringup.arguments import (
    ARGUMENTS,
    BACKENDS,
    EXCITE_PATTERNS,
    non_negative,
    ns,
    parse_args,
    parse_cli_args,
)
from simreal_ros.bringup.plan_bridge import bridge, engine_of
from simreal_ros.bringup.plan_camera import camera_drivers, robot_cameras, sim_renders_cameras
from simreal_ros.bringup.plan_excite import excite
from simreal_ros.bringup.plan_hardware import real_driver
from simreal_ros.bringup.plan_latency import (
    backend_remaps,
    delays_cameras,
    injector,
    latency_profile,
    robot_has_imu,
)
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
           'RT_PRIORITIES', 'NodeSpec', 'parse_cli_args', 'plan']


def plan(args: Mapping[str, str]) -> list[NodeSpec]:
    """Return the nodes for the given ``name:=value`` arguments (see :data:`ARGUMENTS`)."""
    a = parse_args(args)
    backend = a['backend']
    root = ns(a['namespace'])
    nodes: list[NodeSpec] = []
    profile = latency_profile(a)
    with_imu = profile is not None and 'imu' in {r.name for r in profile.routes} and (
        robot_has_imu(a['robot']))
    # the sim renders every camera of the spec (cameras:=auto/true)
    cams = ([c.name for c in robot_cameras(a['robot'])]
            if delays_cameras(profile) and sim_renders_cameras(a) else [])
    moved = backend_remaps(profile, with_imu, cams)
    if backend == 'sim':
        require('sim_bridge', 'backend:=sim')
        nodes.append(bridge(a, 'sim_bridge', root, a['overlay'], None, True, moved))
        if profile is not None:
            nodes.append(injector(a, root, '', with_imu, cams))
    elif backend == 'sim2sim':
        require('sim_bridge', 'backend:=sim2sim')
        commands = ns(root, 'backend') if profile is not None else root or ''
        nodes.append(bridge(a, 'sim_bridge', ns(root, 'sim_a'), a['overlay'], commands,
                            True, moved, engine_of(a, 'a')))
        nodes.append(bridge(a, 'sim_bridge', ns(root, 'sim_b'), a['overlay_b'], commands,
                            False, engine=engine_of(a, 'b')))
        if profile is not None:
            nodes.append(injector(a, root, 'sim_a', with_imu, cams))
    elif backend in ('real', 'twin'):
        drivers = camera_drivers(a, backend, root)
        # only the cameras that have a driver (cameras:=auto skips those without a device)
        cams = ([str(d.parameters['camera']) for d in drivers]
                if delays_cameras(profile) else [])
        if profile is not None:  # the hardware has no IMU topic of its own to move
            with_imu = False
        moved = backend_remaps(profile, False, cams)
        nodes.append(replace(real_driver(a, backend, root),
                             remappings=backend_remaps(profile, False)))
        nodes.extend(replace(d, remappings=moved) for d in drivers)
        if backend == 'twin':
            require('sim_bridge', 'backend:=twin')
            # the twin gets the commands the hardware gets (after the injector, if any)
            commands = ns(root, 'backend') if profile is not None else root or ''
            twin = bridge(a, 'sim_bridge', ns(root, 'twin'), a['overlay'], commands, False)
            resync = non_negative(a, 'twin_resync', 'a number of seconds >= 0 (0 = never)')
            if resync > 0:  # to the undelayed real state
                source = ns(root, 'backend/joint_states' if profile is not None
                            else 'joint_states')
                twin = replace(twin, parameters={**twin.parameters, 'resync_period_s': resync,
                                                 'resync_topic': source})
            nodes.append(twin)
        if profile is not None:
            nodes.append(injector(a, root, '', with_imu, cams))
    nodes += state_publishers(a, nodes)
    if a['policy']:
        nodes.append(policy_node(a, backend, root))
    if a['teleop'] == 'leader':
        nodes.append(leader_node(a, root))
        if a['episodes'] == 'true':
            nodes.append(episodes_node(a, root))
    if a['excite']:
        nodes.append(excite(a, backend, root))
    if a['record'] == 'true':
        require('recorder', 'record:=true')
        nodes.append(recorder_spec(a, root))
    if a['realtime'] == 'true':
        nodes = with_rt_priorities(nodes)
    return nodes
