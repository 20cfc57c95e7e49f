"""With LOCALHOST discovery, no socket a peer could be told to send to is bound off loopback.

A small graph (an external adapter relaying this test's driver states to a state publisher,
whose /tf comes back to the test) runs with the environment the launcher gives nodes; the UDP
and TCP sockets of the node processes are read from ``/proc/<pid>/fd`` and ``/proc/<pid>/net``.
Measured without the loopback profile of core/netenv.py: the discovery and data ports (the
domain's RTPS ports and Fast DDS's port near 7000) and a send socket bound 0.0.0.0, 4 sockets a
participant, and one more send socket the machine's address. With it every one of those binds
127.0.0.1; the only sockets off loopback left are the send-only sockets of the UDPv4 transport
that rmw_fastrtps itself appends in LOCALHOST mode, on ports the kernel picks
(docs/architecture.md, "Networking").
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
import socket
import struct

import pytest
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages, qos

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def bound_sockets(pid: int) -> list[tuple[str, str, int]]:
    """Return (protocol, local address, local port) of every inet socket process ``pid`` holds."""
    inodes = set()
    for fd in os.listdir(f'/proc/{pid}/fd'):
        try:
            target = os.readlink(f'/proc/{pid}/fd/{fd}')
        except OSError:  # closed meanwhile
            continue
        if target.startswith('socket:['):
            inodes.add(target[len('socket:['):-1])
    found = []
    for proto in ('udp', 'tcp', 'udp6', 'tcp6'):
        lines = Path(f'/proc/{pid}/net/{proto}').read_text().splitlines()[1:]
        for line in lines:
            cols = line.split()
            if cols[9] not in inodes:
                continue
            hex_addr, hex_port = cols[1].split(':')
            raw = b''.join(struct.pack('<I', int(hex_addr[i:i + 8], 16))
                           for i in range(0, len(hex_addr), 8))
            addr = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
            found.append((proto, addr, int(hex_port, 16)))
    return found


def rtps_ports(domain: int) -> set[int]:
    """The well-known RTPS ports of ``domain`` (default port parameters, 120 participants)."""
    base = 7400 + 250 * domain
    return {base} | {base + 10 + 2 * p for p in range(120)} | {base + 11 + 2 * p
                                                               for p in range(120)}


def ephemeral(port: int) -> bool:
    lo, hi = map(int, Path('/proc/sys/net/ipv4/ip_local_port_range').read_text().split())
    return lo <= port <= hi


def test_every_socket_peers_are_told_of_binds_loopback(start_node, ros_client, domain_id):
    tf = ros_client.collect(TFMessage, '/tf', qos.TF)
    nodes = [start_node('external_adapter', source_states='driver/joint_states'),
             start_node('state_publisher')]
    source = ros_client.publisher(JointState, 'driver/joint_states')

    def feed() -> bool:
        source.publish(messages.joint_state(
            ROBOT.joint_names, ros_client.node.get_clock().now().nanoseconds, ROBOT.home,
            [0.0] * len(ROBOT.home)))
        return bool(tf)

    # messages cross three processes with the profile: this client's driver/joint_states, the
    # adapter's joint_states, the state publisher's /tf back here
    ros_client.wait_for(feed, 60, '/tf from the states this test fed the adapter')
    socks = {p.spec.kind: bound_sockets(p.proc.pid) for p in nodes}
    for kind, found in socks.items():
        assert {addr for _proto, addr, _port in found} >= {'127.0.0.1'}, (kind, found)
        off_loopback = [(proto, addr, port) for proto, addr, port in found
                        if not ipaddress.ip_address(addr).is_loopback]
        # rmw_fastrtps's own send sockets only: kernel-chosen ports, nothing announced
        told = [s for s in off_loopback if announced(s, found, domain_id)]
        assert told == [], (kind, found)


def announced(sock: tuple, found: list, domain: int) -> bool:
    """Whether ``sock`` is a port peers are told of, not a kernel-chosen send socket.

    Above domain 101 the RTPS ports lie in the kernel's ephemeral range, so a send socket's
    port can be an RTPS port number by chance (Jazzy, domain 120: 192.0.2.2:37558 = participant
    74's metatraffic port). A participant binds its two unicast ports (base+10+2p, base+11+2p)
    together, so an RTPS port counts as announced when its partner is bound on the same address
    too (or it is the multicast port); any TCP socket or fixed port counts.
    """
    proto, addr, port = sock
    if 'tcp' in proto or not ephemeral(port):
        return True
    base = 7400 + 250 * domain
    if port == base:
        return True
    if port not in rtps_ports(domain):
        return False
    partner = port + 1 if (port - base - 10) % 2 == 0 else port - 1
    return (proto, addr, partner) in found
