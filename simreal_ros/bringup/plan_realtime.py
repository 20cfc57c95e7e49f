"""The real-time part of the plan (``realtime:=true``): SCHED_FIFO priorities for the graph."""

from __future__ import annotations

from dataclasses import replace

from simreal_ros.bringup.spec import NodeSpec

#: SCHED_FIFO priorities of ``realtime:=true``, by node kind (the thread each one applies to:
#: injector delivery and receive, driver bus cycle, bridge physics, policy loop). Short jobs
#: with tight deadlines preempt long ones (rate-monotonic order): an injector delivery is tens
#: of us and its lateness is an error in the latency it claims to inject; a bus cycle is mostly
#: waiting on the serial port and a late one is a missed servo update; a physics batch is the
#: longest CPU burst of the hard-timed threads; the policy's 50 Hz period has the most slack.
#: The virtual bus (``simreal emulate --rt-priority 90``) stands for servo hardware, which the
#: host never preempts, so it is above all of them. 99 stays with the kernel.
RT_PRIORITIES: dict[str, int] = {'injector': 85, 'dynamixel_driver': 80, 'sim_bridge': 75,
                                 'policy': 70}
EMULATOR_RT_PRIORITY = 90


def with_rt_priorities(nodes: list[NodeSpec]) -> list[NodeSpec]:
    """Return ``nodes`` with ``rt_priority`` set on every node kind of RT_PRIORITIES."""
    return [replace(n, parameters={**n.parameters, 'rt_priority': RT_PRIORITIES[n.kind]})
            if n.kind in RT_PRIORITIES else n for n in nodes]
