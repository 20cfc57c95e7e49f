"""The IMU of a floating-base robot on the real backend: ``imu_port:=`` starts
``simreal_imu_driver``; a missing or misplaced one is one PlanError line before anything starts."""

from __future__ import annotations

from plans import plan_without_tf as plan
import pytest

from simreal_ros.errors import PlanError

QUAD = {'robot': 'simreal_quad', 'port': '/tmp/bus'}


@pytest.mark.parametrize('backend', ['real', 'twin'])
def test_a_floating_base_on_hardware_without_an_imu_port_names_what_to_pass(backend):
    with pytest.raises(PlanError) as exc:
        plan({'backend': backend, **QUAD})
    assert str(exc.value) == (
        f'backend:={backend} with robot:=simreal_quad (a floating base) needs imu_port:=<serial '
        f'device of its IMU> (e.g. imu_port:=/dev/ttyUSB1, or the link of simreal emulate '
        f'--imu-link; docs/legged.md)')


def test_imu_port_starts_the_imu_driver_next_to_the_servo_driver():
    nodes = plan({'backend': 'real', 'imu_port': '/tmp/imu', **QUAD})
    assert [n.kind for n in nodes] == ['dynamixel_driver', 'imu_driver']
    imu = nodes[1]
    assert (imu.fqn, imu.executable, imu.module) == (
        '/imu_driver', 'simreal_imu_driver', 'simreal_ros.nodes.imu_driver')
    assert imu.parameters == {'robot': 'simreal_quad', 'port': '/tmp/imu', 'baud': 115200,
                              'expected_rate_hz': 200.0, 'give_up_after_s': 10.0}
    assert imu.remappings == ()
    imu = plan({'backend': 'real', 'imu_port': '/tmp/imu', 'imu_baud': '230400',
                'imu_rate': '100', 'namespace': 'dog', **QUAD})[1]
    assert imu.fqn == '/dog/imu_driver'
    assert (imu.parameters['baud'], imu.parameters['expected_rate_hz']) == (230400, 100.0)


def test_with_latency_imu_data_goes_through_the_injector_as_in_sim():
    nodes = plan({'backend': 'real', 'imu_port': '/tmp/imu', 'latency': 'wifi', **QUAD})
    imu = next(n for n in nodes if n.kind == 'imu_driver')
    assert imu.remappings == (('imu/data', 'backend/imu/data'),)
    injector = next(n for n in nodes if n.kind == 'injector')
    assert any('imu/data' in str(b) for b in injector.parameters.values())


@pytest.mark.parametrize('args, message', [
    ({'backend': 'sim', 'robot': 'simreal_quad', 'imu_port': '/tmp/imu'},
     'imu_port:=/tmp/imu: the IMU driver runs with the servo driver: use it with backend:=real '
     'or twin (got backend:=sim)'),
    ({'backend': 'real', 'real_driver': 'external', 'robot': 'simreal_quad',
      'imu_port': '/tmp/imu'},
     'imu_port:=/tmp/imu: the IMU driver runs with the servo driver: use it with backend:=real '
     'or twin (got backend:=real real_driver:=external)'),
    ({'backend': 'real', 'robot': 'so101', 'port': '/tmp/bus', 'imu_port': '/tmp/imu'},
     'imu_port:=/tmp/imu: robot:=so101 has no imu in its spec'),
    ({'backend': 'real', 'imu_baud': '1234', 'imu_port': '/tmp/imu', **QUAD},
     'IMU driver settings: imu_driver: baud: expected one of [4800, 9600'),
    ({'backend': 'real', 'imu_rate': 'fast', 'imu_port': '/tmp/imu', **QUAD},
     "imu_rate:='fast' is not valid"),
])
def test_bad_imu_arguments_are_one_line(args, message):
    with pytest.raises(PlanError) as exc:
        plan(args)
    assert str(exc.value).startswith(message)
    assert '\n' not in str(exc.value)
