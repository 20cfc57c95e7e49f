"""``simreal emulate`` and ``simreal bench``: the virtual servo bus and the benchmarks."""

from __future__ import annotations

import argparse
import inspect
import json
import runpy
from typing import Any

from simreal_ros.errors import SimrealError
from simreal_ros.sim.bridge_config import ENGINES


def cmd_emulate(ns: argparse.Namespace) -> int:
    """Serve the virtual servo bus on a pseudo-terminal until stopped."""
    from simreal_ros.core.robot import load_robot
    if load_robot(ns.robot).bus_family == 'feetech':  # the virtual STS bus
        from simreal_ros.hardware.emulator import sts_bus as emulator
    else:
        from simreal_ros.hardware.emulator import emulator  # type: ignore[no-redef]
    return emulator.main(ns.robot, ns.reality, ns.link, ns.baud, ns.faults, ns.seed,
                         ns.duration, ns.rt_priority, ns.cpu_affinity, ns.camera,
                         ns.camera_port, ns.camera_faults, ns.trace, ns.role, ns.operator,
                         ns.eeprom, ns.imu_link, ns.imu_rate, ns.imu_baud, scene=ns.scene)


def cmd_bench(ns: argparse.Namespace) -> int:
    """Run one benchmark from bench/ (or all) and print its JSON."""
    from simreal_ros.core.paths import share_dir
    bench_dir = share_dir() / 'bench'
    names = sorted(p.stem for p in bench_dir.glob('*.py') if not p.stem.startswith('_'))
    if ns.name not in names + ['all']:
        raise SimrealError(f'unknown benchmark {ns.name!r}; available: {names + ["all"]}')
    from simreal_ros.core.netenv import apply_to_current_process
    apply_to_current_process()
    results = {}
    for name in names if ns.name == 'all' else [ns.name]:
        module = runpy.run_path(str(bench_dir / f'{name}.py'))
        # --load / --rt go to the timing benchmarks, whose run() takes them
        timing = {'load', 'rt'} <= set(inspect.signature(module['run']).parameters)
        if (ns.load or ns.rt) and not timing and ns.name != 'all':
            raise SimrealError(f'benchmark {name!r} takes no --load/--rt (not a timing '
                               f'benchmark)')
        kwargs = {'load': ns.load, 'rt': ns.rt} if timing else {}
        if ns.engine:  # to the benchmarks whose run() takes an engine
            if 'engine' not in inspect.signature(module['run']).parameters:
                if ns.name != 'all':
                    raise SimrealError(f'benchmark {name!r} takes no --engine')
            else:
                kwargs['engine'] = ns.engine
        results[name] = module['run'](quick=ns.quick, **kwargs)
    out = results if ns.name == 'all' else results[ns.name]
    print(json.dumps(out, indent=None if ns.json else 2))
    return 0


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = sub.add_parser('emulate', help='serve a virtual servo bus (MuJoCo robot) on a pty',
                       description='serve a virtual servo bus on a pseudo-terminal, by the '
                       "robot spec's bus.family: Dynamixel Protocol 2.0 (XM430-W350) or Feetech "
                       'STS (STS3215); prints "ready LINK" (see docs/hardware.md, '
                       'docs/feetech.md)')
    p.add_argument('--robot', default='simreal_arm', help='robot spec: name or path')
    p.add_argument('--reality', default='', help='overlay with the hidden reality (name or '
                   'path; default: the nominal model)')
    p.add_argument('--link', required=True, help='symlink to create to the pty (the port)')
    p.add_argument('--baud', type=int, default=1_000_000, help='bus baud rate')
    p.add_argument('--faults', default='', help='e.g. crc=0.01,timeout=0.005,late=0.01,'
                   'late_s=0.03,unplug_at=5,replug_at=6,seed=1,eeprom_drop=ID; feetech '
                   'also power_cycle_at=3,power_off_s=0.5')
    p.add_argument('--eeprom', default='', metavar='FILE', help="keep the servos' EEPROM "
                   '(Homing Offset, modes, limits) in this YAML file: loaded at start, saved on '
                   'every change, so a restart is a power cycle')
    p.add_argument('--trace', default='', help='write every SYNC READ answered (the true '
                   'register data) to this file')
    p.add_argument('--seed', type=int, default=0, help='seed of the encoder noise')
    p.add_argument('--duration', type=float, default=None, help='stop after this many s')
    p.add_argument('--rt-priority', type=int, default=0, help='SCHED_FIFO priority of the '
                   'emulator loop (1-98, 0 = off; docs/realtime.md)')
    p.add_argument('--cpu-affinity', default='', help='CPUs of the emulator loop, e.g. "1"')
    p.add_argument('--camera', action='store_true', help="also serve the robot's cameras as "
                   "MJPEG over HTTP on 127.0.0.1, through the reality file's camera: optics; "
                   'prints "camera URL" (docs/camera.md)')
    p.add_argument('--camera-port', type=int, default=0, help='TCP port of the first camera '
                   '(0 = any free port)')
    p.add_argument('--camera-faults', default='', help='e.g. drop_at=5,restore_at=7: the '
                   'stream goes away and comes back')
    p.add_argument('--scene', default='', help='scene around the robot (shipped name such as '
                   'reach_target, or path): its cameras see it; each line "place OBJECT X Y Z" '
                   'on stdin moves a free object and is answered "placed OBJECT X Y Z" '
                   '(docs/camera.md)')
    p.add_argument('--role', default='follower', choices=('follower', 'leader'),
                   help='follower: the robot (motors, physics); leader: a teleop leader arm '
                   'whose joints a scripted operator moves (docs/teleop.md)')
    p.add_argument('--operator', default='', help='leader: chirp or waypoints, with options, '
                   'e.g. chirp,amplitude=0.3,f_max_hz=0.8 or waypoints,offset_rad=0.8')
    p.add_argument('--imu-link', default='', metavar='PATH', help="also serve the robot's "
                   'IMU as a WitMotion WT901 on a second pty, this symlink (prints "imu PATH" '
                   'before "ready"; docs/legged.md)')
    p.add_argument('--imu-rate', type=float, default=200.0, help='IMU output rate (Hz; the '
                   "WT901's rates, up to 200)")
    p.add_argument('--imu-baud', type=int, default=115_200, help='IMU port baud rate')
    p.set_defaults(func=cmd_emulate)
    p = sub.add_parser('bench', help='run a benchmark of bench/ and print JSON figures')
    p.add_argument('name', help='benchmark name (e.g. sim_bridge) or all')
    p.add_argument('--json', action='store_true', help='one-line JSON')
    p.add_argument('--quick', action='store_true', help='shorter runs (smoke test)')
    p.add_argument('--load', type=int, default=0, metavar='N', help='timing benchmarks: run '
                   'N CPU-bound processes meanwhile')
    p.add_argument('--rt', action='store_true', help='timing benchmarks: measure with the '
                   'nodes on the default scheduler and under SCHED_FIFO, side by side')
    p.add_argument('--engine', default='', choices=('',) + ENGINES,
                   help='physics engine of the benchmarks that take one (sim_bridge)')
    p.set_defaults(func=cmd_bench)
