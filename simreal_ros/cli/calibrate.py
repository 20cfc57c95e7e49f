"""``simreal calibrate``: a servo arm's joint calibration, from and to LeRobot's files.

``--from-lerobot FILE.json --robot NAME --out CAL.yaml`` checks LeRobot's calibration of the
arm (``id``, ``drive_mode``, ``homing_offset``, ``range_min``, ``range_max`` per motor) against
the robot spec and writes this stack's calibration; ``--to-lerobot --robot NAME [--calibration
CAL.yaml] --out FILE.json`` writes LeRobot's file back (from the calibration, or from the spec's
own zero and limits). The conversion and its checks: simreal_ros/core/calibration.py,
docs/calibration.md.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from simreal_ros.errors import SimrealError


def cmd_calibrate(ns: argparse.Namespace) -> int:
    """Convert a calibration between LeRobot's JSON and this stack's YAML."""
    from simreal_ros.core import calibration as cal_mod
    from simreal_ros.core.robot import load_robot
    if bool(ns.from_lerobot) == bool(ns.to_lerobot):
        raise SimrealError('give exactly one of --from-lerobot FILE.json and --to-lerobot')
    robot = load_robot(ns.robot)
    out = Path(ns.out)
    if not out.parent.is_dir():
        raise SimrealError(f'--out {out}: the directory {out.parent} does not exist')
    if ns.from_lerobot:
        if ns.calibration:
            raise SimrealError('--calibration is the input of --to-lerobot only')
        cal = cal_mod.from_lerobot(ns.from_lerobot, robot)
        calibrated = cal_mod.apply_calibration(robot, cal)
        out.write_text(cal_mod.calibration_text(
            cal, f'calibration of {robot.name}, from the LeRobot file {ns.from_lerobot}'),
            encoding='utf-8')
        for js in calibrated.joints:
            print(f'{js.name:<16} zero {js.servo.zero_tick:>5} ticks, direction '
                  f'{js.servo.direction:+d}, range [{js.limits.lower:+.3f}, '
                  f'{js.limits.upper:+.3f}] rad ({math.degrees(js.limits.lower):+.1f}, '
                  f'{math.degrees(js.limits.upper):+.1f} deg)')
        print(f'wrote {out}: {len(cal.joints)} joints of {robot.name}')
        return 0
    cal = (cal_mod.load_calibration(ns.calibration, robot) if ns.calibration
           else cal_mod.from_spec(robot))
    out.write_text(json.dumps(cal_mod.to_lerobot(cal), indent=4) + '\n', encoding='utf-8')
    print(f'wrote {out}: LeRobot calibration of {len(cal.joints)} joints of {robot.name} '
          f'(from {"the calibration " + ns.calibration if ns.calibration else "the spec"})')
    return 0


def add_commands(sub: Any) -> None:
    """Add ``calibrate`` to the ``simreal`` parser."""
    p = sub.add_parser('calibrate', help="convert an arm's joint calibration from/to LeRobot",
                       description=__doc__.splitlines()[0] + ' (docs/calibration.md)')
    p.add_argument('--robot', required=True, help='robot spec (name or file)')
    p.add_argument('--out', required=True, help='file to write (CAL.yaml or FILE.json)')
    p.add_argument('--from-lerobot', default='', metavar='FILE.json',
                   help="LeRobot's calibration file of the arm")
    p.add_argument('--to-lerobot', action='store_true',
                   help="write LeRobot's calibration file")
    p.add_argument('--calibration', default='', metavar='CAL.yaml',
                   help='with --to-lerobot: the calibration to export (default: the spec)')
    p.set_defaults(func=cmd_calibrate)
