"""realtime:=true: the documented SCHED_FIFO priorities on every timing-critical node."""

from __future__ import annotations

import pytest

from simreal_ros.bringup.planner import RT_PRIORITIES, plan
from simreal_ros.errors import PlanError


def test_realtime_sets_the_documented_priorities() -> None:
    nodes = plan({'backend': 'twin', 'port': '/dev/ttyUSB0', 'latency': 'usb_serial',
                  'realtime': 'true'})
    got = {n.kind: n.parameters.get('rt_priority') for n in nodes}
    # the state publishers (TF at <= 50 Hz) stay on the default scheduler
    assert got == {'dynamixel_driver': 80, 'sim_bridge': 75, 'injector': 85,
                   'state_publisher': None}
    # the order of preemption is the documented one
    assert RT_PRIORITIES['injector'] > RT_PRIORITIES['dynamixel_driver'] \
        > RT_PRIORITIES['sim_bridge'] > RT_PRIORITIES['policy']


def test_realtime_off_by_default() -> None:
    nodes = plan({'backend': 'sim2sim', 'latency': 'usb_serial'})
    assert all('rt_priority' not in n.parameters for n in nodes)


def test_realtime_rejects_other_values() -> None:
    with pytest.raises(PlanError, match="realtime:='yes' is not valid"):
        plan({'realtime': 'yes'})
