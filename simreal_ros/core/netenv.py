"""The environment every ROS process of the stack runs with (network safety first).

DDS discovery multicasts on every interface unless told otherwise. The stack defaults to
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; a multi-machine robot opts in to ``SUBNET``.
``ROS_STATIC_PEERS`` names hosts that discovery contacts whatever the range, so it is removed
wherever the range is LOCALHOST. Humble (a system install, ``ROS_DISTRO=humble``) predates the
range and gets ``ROS_LOCALHOST_ONLY=1`` instead; Jazzy and Kilted honour the range.

The range alone does not keep Fast DDS off the network: with LOCALHOST it still bound its
discovery and data sockets to 0.0.0.0 and its send sockets to the machine's own address
(measured: 0.0.0.0 x4 and 192.0.2.2 per participant, Kilted and Jazzy wheels). So for LOCALHOST
(and OFF) :func:`ros_env` also points Fast DDS at :func:`loopback_profile`, an XML profile
whose only transport is UDPv4 allowed on 127.0.0.1 (``FASTDDS_DEFAULT_PROFILES_FILE`` for Fast
DDS 3 / Kilted, ``FASTRTPS_DEFAULT_PROFILES_FILE`` for Fast DDS 2 / Jazzy and Humble, the one
each reads without a deprecation warning). Every socket a peer sends to then binds 127.0.0.1.
What it cannot change: in LOCALHOST mode rmw_fastrtps appends a UDPv4 transport of its own
after the profile, whose two send-only sockets (kernel-chosen ports) still bind 0.0.0.0 and
the machine's address (docs/architecture.md, "Networking"). A profile file the user set wins;
SUBNET and SYSTEM_DEFAULT get none.

The profile also announces a new participant 30 times at 100 ms (Fast DDS: 5), so one that
starts next to a participant still in its first seconds finds it at once instead of at the
next periodic announcement, 3 s later. Measured with a client participant and a node started
0.2 s after it: without, 9 of 28 discoveries took 1.5-2.9 s (a 3 s demo observed 5 of 1200
states once); with, 0 of 12 took longer than 0.22 s (median 0.07 s). It costs 25 more
announcements per participant in its first 3 s, on loopback, and nothing after.

Domain ids: tests take theirs from ``TEST_DOMAINS`` (``SIMREAL_TEST_DOMAINS`` narrows it for
concurrent runs), benchmarks from ``BENCH_DOMAINS``, so a benchmark never joins a test's graph.
"""

from __future__ import annotations

from importlib import metadata
import os
from pathlib import Path
import sys
import tempfile
from typing import Mapping, MutableMapping

from simreal_ros.errors import LaunchError

DISCOVERY_CHOICES = ('localhost', 'subnet', 'system_default', 'off')
#: the environment variables a Fast DDS profile file is given in (Fast DDS 3, Fast DDS 2)
PROFILE_VARS = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE')
#: the discovery ranges that keep every socket a peer sends to on loopback
LOOPBACK_RANGES = ('LOCALHOST', 'OFF')

LOOPBACK_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by simreal_ros (core/netenv.py): DDS on loopback only; see docs/architecture.md -->
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>simreal_loopback_udpv4</transport_id>
        <type>UDPv4</type>
        <interfaceWhiteList>
          <address>127.0.0.1</address>
        </interfaceWhiteList>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="simreal_loopback" is_default_profile="true">
      <rtps>
        <userTransports>
          <transport_id>simreal_loopback_udpv4</transport_id>
        </userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
        <builtin>
          <discovery_config>
            <initialAnnouncements>
              <count>30</count>
              <period><sec>0</sec><nanosec>100000000</nanosec></period>
            </initialAnnouncements>
          </discovery_config>
        </builtin>
      </rtps>
    </participant>
  </profiles>
</dds>
"""
TEST_DOMAINS = range(1, 201)
BENCH_DOMAINS = range(201, 233)


def bench_domain(slot: int) -> int:
    """Return the domain id of benchmark ``slot`` (0, 1, ...) of this process (BENCH_DOMAINS)."""
    return BENCH_DOMAINS[(os.getpid() * 5 + slot) % len(BENCH_DOMAINS)]


def loopback_profile(directory: Path | None = None) -> Path:
    """Write the loopback-only Fast DDS profile (once; atomically) and return its path.

    The file name carries a hash of the text: two versions of the stack running at once on
    one machine (a CI clone beside a checkout) each keep their own file instead of rewriting
    one shared file under the other's starting processes.
    """
    import hashlib
    digest = hashlib.sha256(LOOPBACK_PROFILE.encode()).hexdigest()[:12]
    name = f'simreal_ros_fastdds_loopback_{digest}.xml'
    path = (directory or Path(tempfile.gettempdir())) / name
    try:
        if path.read_text(encoding='utf-8') == LOOPBACK_PROFILE:
            return path
    except OSError:
        pass
    tmp = path.with_name(f'{path.name}.{os.getpid()}.tmp')
    tmp.write_text(LOOPBACK_PROFILE, encoding='utf-8')
    os.replace(tmp, path)  # concurrent writers all write the same text
    return path


def profile_var(env: Mapping[str, str]) -> str:
    """Return the profile variable the Fast DDS of ``env`` reads without a deprecation warning.

    ``ROS_DISTRO`` (a system install) decides; otherwise the ROS wheels of this interpreter:
    ``ros-fastrtps`` is Fast DDS 2 (Jazzy), anything else Fast DDS 3 (Kilted), whose rmw warns
    on every start when ``FASTRTPS_DEFAULT_PROFILES_FILE`` is set.
    """
    distro = env.get('ROS_DISTRO', '')
    if distro:
        fast_dds_2 = distro in ('humble', 'iron', 'jazzy')
    else:
        try:
            metadata.version('ros-fastrtps')
            fast_dds_2 = True
        except metadata.PackageNotFoundError:
            fast_dds_2 = False
    return PROFILE_VARS[1] if fast_dds_2 else PROFILE_VARS[0]


def apply_loopback_profile(env: MutableMapping[str, str]) -> None:
    """Give ``env`` the loopback profile for its (already set) discovery range, in place.

    LOCALHOST and OFF get it unless ``env`` names a profile file of its own; other ranges lose
    it if they inherited it from a loopback run.
    """
    ours = str(loopback_profile())
    if env['ROS_AUTOMATIC_DISCOVERY_RANGE'] not in LOOPBACK_RANGES:
        for var in PROFILE_VARS:  # inherited from a loopback run: not for a wider range
            if env.get(var) == ours:
                del env[var]
        return
    if any(env.get(var) and env[var] != ours for var in PROFILE_VARS):
        return  # the user's own profile wins
    for var in PROFILE_VARS:
        env.pop(var, None)
    env[profile_var(env)] = ours


def ros_env(base: Mapping[str, str] | None = None, *, discovery: str | None = None,
            domain_id: int | None = None) -> dict[str, str]:
    """Return ``base`` (default ``os.environ``) completed for starting ROS 2 processes.

    ``discovery=None`` keeps an explicit ``ROS_AUTOMATIC_DISCOVERY_RANGE`` from ``base`` and
    otherwise sets LOCALHOST. ``domain_id=None`` keeps ``ROS_DOMAIN_ID`` from ``base`` or sets
    0. ``ROS_LOG_DIR``, ``HOME`` and (in a venv) ``AMENT_PREFIX_PATH`` are filled in so rclpy
    starts in a bare environment. LOCALHOST and OFF get the loopback-only Fast DDS profile
    (module docstring) unless ``base`` names a profile file of its own.
    """
    env = dict(os.environ if base is None else base)
    if discovery is not None:
        if discovery.lower() not in DISCOVERY_CHOICES:
            raise LaunchError(f'--discovery must be one of {DISCOVERY_CHOICES}, got '
                              f'{discovery!r}')
        env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = discovery.upper()
    else:
        env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    if env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST':
        env.pop('ROS_STATIC_PEERS', None)  # static peers are contacted whatever the range
        if env.get('ROS_DISTRO') == 'humble':  # no discovery range before Iron: only this
            env['ROS_LOCALHOST_ONLY'] = '1'
    if domain_id is not None:
        if not 0 <= domain_id <= 232:
            raise LaunchError(f'ROS_DOMAIN_ID must be in [0, 232], got {domain_id}')
        env['ROS_DOMAIN_ID'] = str(domain_id)
    else:
        env.setdefault('ROS_DOMAIN_ID', '0')
    apply_loopback_profile(env)
    env.setdefault('HOME', tempfile.gettempdir())
    env.setdefault('ROS_LOG_DIR', str(Path(tempfile.gettempdir()) / 'simreal_ros_logs'))
    if sys.prefix != sys.base_prefix:  # a venv with the PyPI ROS wheels
        prefixes = env.get('AMENT_PREFIX_PATH', '')
        if sys.prefix not in prefixes.split(os.pathsep):
            env['AMENT_PREFIX_PATH'] = os.pathsep.join(p for p in (sys.prefix, prefixes) if p)
    return env


def apply_to_current_process() -> None:
    """Complete ``os.environ`` in place before ``rclpy.init`` (nodes started by hand)."""
    os.environ.update(ros_env())
