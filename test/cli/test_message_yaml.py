"""``simreal topic echo``'s YAML of real message classes: nested messages, sequences of
messages, byte fields, fixed-size arrays, field order."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import Imu
import yaml

from simreal_ros.cli.ros_tools import message_yaml


def test_nested_messages_bytes_and_sequences():
    arr = DiagnosticArray()
    arr.header.stamp.sec, arr.header.stamp.nanosec = 12, 345
    arr.status = [DiagnosticStatus(level=DiagnosticStatus.WARN, name='/policy: policy',
                                   message='hold', hardware_id='simreal_arm',
                                   values=[KeyValue(key='mode', value='hold'),
                                           KeyValue(key='goal_rad', value='0 0.4')])]
    text = message_yaml(arr)
    assert yaml.safe_load(text) == {
        'header': {'stamp': {'sec': 12, 'nanosec': 345}, 'frame_id': ''},
        'status': [{'level': 1, 'name': '/policy: policy', 'message': 'hold',
                    'hardware_id': 'simreal_arm',
                    'values': [{'key': 'mode', 'value': 'hold'},
                               {'key': 'goal_rad', 'value': '0 0.4'}]}]}
    assert text.index('header:') < text.index('status:')  # the declared field order


def test_fixed_size_arrays_are_plain_lists():
    imu = Imu()
    imu.orientation.w = 1.0
    imu.orientation_covariance[0] = 0.25  # a numpy float64[9]
    doc = yaml.safe_load(message_yaml(imu))
    assert doc['orientation'] == {'x': 0.0, 'y': 0.0, 'z': 0.0, 'w': 1.0}
    assert doc['orientation_covariance'] == [0.25] + [0.0] * 8
    assert list(doc) == ['header', 'orientation', 'orientation_covariance', 'angular_velocity',
                         'angular_velocity_covariance', 'linear_acceleration',
                         'linear_acceleration_covariance']
