"""A state publisher next to every backend, primary unprefixed in the root namespace."""

from __future__ import annotations

import pytest

from simreal_ros.bringup.planner import plan


@pytest.mark.parametrize('args, expected', [
    ({'backend': 'sim'}, [('/state_publisher', '', ())]),
    ({'backend': 'sim', 'latency': 'usb_serial'}, [('/state_publisher', '', ())]),
    ({'backend': 'real', 'port': '/dev/ttyUSB0'}, [('/state_publisher', '', ())]),
    ({'backend': 'real', 'real_driver': 'external'}, [('/state_publisher', '', ())]),
    ({'backend': 'twin', 'port': '/dev/ttyUSB0'},
     [('/state_publisher', '', ()), ('/twin/state_publisher', 'twin/', ())]),
    ({'backend': 'sim2sim', 'namespace': 'lab'},
     [('/lab/state_publisher', '', (('joint_states', '/lab/sim_a/joint_states'),)),
      ('/lab/sim_b/state_publisher', 'sim_b/', ())]),
])
def test_state_publishers_per_backend(args, expected):
    got = [(n.fqn, n.parameters['frame_prefix'], n.remappings) for n in plan(args)
           if n.kind == 'state_publisher']
    assert got == expected
