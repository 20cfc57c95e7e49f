"""The environment every ROS process of the stack runs with (network safety first).

DDS discovery multicasts on every interface unless told otherwise. The stack defaults to
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; a multi-machine robot opts in to ``SUBNET``.
``ROS_STATIC_PEERS`` names hosts that discovery contacts whatever the range, so it is removed
wherever the range is LOCALHOST. Humble (a system install, ``ROS_DISTRO=humble``) predates the
range and gets ``ROS_LOCALHOST_ONLY=1`` instead; Jazzy and Kilted honour the range.

Domain ids: tests take theirs from ``TEST_DOMAINS`` (``SIMREAL_TEST_DOMAINS`` narrows it for
concurrent runs), benchmarks from ``BENCH_DOMAINS``, so a benchmark never joins a test's graph.
"""

from __future__ import annotations

import os
from pathlib import Path
import sys
import tempfile
from typing import Mapping

from simreal_ros.errors import LaunchError

DISCOVERY_CHOICES = ('localhost', 'subnet', 'system_default', 'off')
TEST_DOMAINS = range(1, 201)
BENCH_DOMAINS = range(201, 233)


def bench_domain(slot: int) -> int:
    """Return the domain id of benchmark ``slot`` (0, 1, ...) of this process (BENCH_DOMAINS)."""
    return BENCH_DOMAINS[(os.getpid() * 5 + slot) % len(BENCH_DOMAINS)]


def ros_env(base: Mapping[str, str] | None = None, *, discovery: str | None = None,
            domain_id: int | None = None) -> dict[str, str]:
    """Return ``base`` (default ``os.environ``) completed for starting ROS 2 processes.

    ``discovery=None`` keeps an explicit ``ROS_AUTOMATIC_DISCOVERY_RANGE`` from ``base`` and
    otherwise sets LOCALHOST. ``domain_id=None`` keeps ``ROS_DOMAIN_ID`` from ``base`` or sets
    0. ``ROS_LOG_DIR``, ``HOME`` and (in a venv) ``AMENT_PREFIX_PATH`` are filled in so rclpy
    starts in a bare environment.
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
