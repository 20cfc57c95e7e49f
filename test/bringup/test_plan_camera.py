"""The cameras in the plan: cameras:=, camera_device:= on every backend."""

from __future__ import annotations

from pathlib import Path

from plans import plan_without_tf as plan
import pytest
import yaml

from simreal_ros.core.camera_info import CameraDriverConfig
from simreal_ros.errors import PlanError

REPO = Path(__file__).resolve().parents[2]
URL = 'http://127.0.0.1:8080/camera.mjpg'


def kinds(nodes: list) -> list[tuple[str, str]]:
    return [(n.kind, n.fqn) for n in nodes]


def test_sim_renders_by_default_and_cameras_false_turns_it_off() -> None:
    (bridge,) = plan({})
    assert bridge.parameters['cameras'] is True
    (bridge,) = plan({'cameras': 'false'})
    assert bridge.parameters['cameras'] is False
    a, b = plan({'backend': 'sim2sim'})
    assert a.parameters['cameras'] is b.parameters['cameras'] is True


def test_real_drives_a_camera_only_with_a_device() -> None:
    assert kinds(plan({'backend': 'real', 'port': '/dev/ttyUSB0'})) == [
        ('dynamixel_driver', '/dynamixel_driver')]
    nodes = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'camera_device': URL,
                  'namespace': 'arm'})
    assert kinds(nodes) == [('dynamixel_driver', '/arm/dynamixel_driver'),
                            ('camera_driver', '/arm/camera_driver')]
    cam = nodes[1]
    assert cam.parameters == {'robot': 'simreal_arm', 'camera': 'camera', 'device': URL}
    assert cam.executable == 'simreal_camera_driver'
    CameraDriverConfig.from_mapping(cam.parameters)
    named = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'camera_device': 'camera=0'})
    assert named[1].parameters['device'] == '0'
    assert kinds(plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'camera_device': URL,
                       'cameras': 'false'})) == [('dynamixel_driver', '/dynamixel_driver')]


def test_twin_has_the_real_camera_and_the_twin_renders() -> None:
    nodes = plan({'backend': 'twin', 'port': '/dev/ttyUSB0', 'camera_device': '/dev/video0'})
    assert kinds(nodes) == [('dynamixel_driver', '/dynamixel_driver'),
                            ('camera_driver', '/camera_driver'),
                            ('sim_bridge', '/twin/sim_bridge')]
    assert nodes[2].parameters['cameras'] is True


def test_spec_device_is_used(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / 'config/robots/simreal_arm.yaml').read_text())
    data['urdf'] = str(REPO / 'urdf/simreal_arm.urdf')
    data['cameras'][0]['device'] = '/dev/video2'
    second = dict(data['cameras'][0], name='wrist', device='')
    data['cameras'].append(second)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump(data))
    nodes = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'robot': str(path)})
    assert kinds(nodes)[1:] == [('camera_driver', '/camera_driver')]
    assert nodes[1].name == 'camera_driver' and nodes[1].parameters['device'] == '/dev/video2'
    with pytest.raises(PlanError, match='cameras:=true on backend:=real: camera wrist has no '
                       'device'):
        plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'robot': str(path), 'cameras': 'true'})
    with pytest.raises(PlanError, match=r"the robot has cameras \['camera', 'wrist'\]; give "
                       'NAME=DEVICE'):
        plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'robot': str(path),
              'camera_device': '0'})
    nodes = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'robot': str(path),
                  'camera_device': 'wrist=1'})
    assert [(n.name, n.parameters['device']) for n in nodes[1:]] == [
        ('camera_driver', '/dev/video2'), ('wrist_driver', '1')]


@pytest.mark.parametrize(('args', 'message'), [
    ({'cameras': 'maybe'}, "cameras:='maybe' is not valid; choose one of ['auto', 'true', "
                           "'false']"),
    ({'backend': 'real', 'port': '/dev/ttyUSB0', 'cameras': 'true'},
     'cameras:=true on backend:=real: camera camera has no device'),
    ({'backend': 'real', 'port': '/dev/ttyUSB0', 'camera_device': 'side=0'},
     "expected NAME=DEVICE with NAME one of ['camera'], got 'side=0'"),
])
def test_bad_camera_arguments(args: dict, message: str) -> None:
    with pytest.raises(PlanError) as info:
        plan(args)
    assert message in str(info.value)
