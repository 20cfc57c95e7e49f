"""The cameras' part of the plan (``cameras:=``, ``camera_device:=``).

Every backend publishes ``NAME/image_raw`` and ``NAME/camera_info`` for each camera of the robot
spec: a sim bridge renders them (its ``cameras`` parameter), the real robot gets one OpenCV
camera driver per camera. ``cameras:=auto`` (the default) renders every camera in the sim and
drives, on the real robot, every camera that has a device (the spec's ``device`` or
``camera_device:=``); ``cameras:=true`` requires a device for each; ``cameras:=false`` publishes
no camera.
"""

from __future__ import annotations

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate, require
from simreal_ros.core.robot import CameraSpec
from simreal_ros.errors import PlanError


def sim_renders_cameras(a: LaunchArgs) -> bool:
    """Return the sim bridges' ``cameras`` parameter (a robot without cameras renders none)."""
    return a.cameras != 'false'


def camera_devices(a: LaunchArgs, cams: tuple[CameraSpec, ...]) -> dict[str, str]:
    """Map camera -> device: ``camera_device:=`` (DEV or ``NAME=DEV,...``), else the spec's."""
    out = {c.name: c.device for c in cams}
    text = a.camera_device
    if not text:
        return out
    names = [c.name for c in cams]
    if not cams:
        raise PlanError(f'camera_device:={text!r}: robot {a.text["robot"]} has no cameras')
    pairs = [p.strip() for p in text.split(',') if p.strip()]
    if len(pairs) == 1 and '=' not in pairs[0].split('://')[0]:
        if len(cams) != 1:
            raise PlanError(f'camera_device:={text!r}: the robot has cameras {names}; give '
                            f'NAME=DEVICE for each (e.g. {names[0]}=/dev/video0)')
        return {cams[0].name: pairs[0]}
    for pair in pairs:
        name, sep, dev = pair.partition('=')
        if not sep or name not in out or not dev:
            raise PlanError(f'camera_device:={text!r}: expected NAME=DEVICE with NAME one of '
                            f'{names}, got {pair!r}')
        out[name] = dev
    return out


def camera_drivers(a: LaunchArgs) -> list[NodeSpec]:
    """One camera driver per camera of the real robot (see the module doc for ``cameras:=``)."""
    if a.cameras == 'false':
        return []
    cams = a.robot.cameras
    devices = camera_devices(a, cams)
    nodes: list[NodeSpec] = []
    for cam in cams:
        device = devices[cam.name]
        if not device:
            if a.cameras == 'true':
                raise PlanError(f'cameras:=true on backend:={a.backend}: camera {cam.name} has '
                                f'no device; set camera_device:=DEVICE (V4L2 index or path, or '
                                f'a stream URL such as the one simreal emulate --camera prints)'
                                f" or the spec's device, or cameras:=auto to skip it")
            continue
        require('camera_driver', f'camera {cam.name} on backend:={a.backend}')
        params = {'robot': a.text['robot'], 'camera': cam.name, 'device': device}
        prevalidate('camera_driver', params, 'camera driver')
        name = 'camera_driver' if len(cams) == 1 else f'{cam.name}_driver'
        nodes.append(NodeSpec('camera_driver', name, a.root, params))
    return nodes
