"""The environment of every ROS process: loopback discovery, no static peers, disjoint domains."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess

import pytest

from simreal_ros.core.netenv import (
    BENCH_DOMAINS,
    PROFILE_VARS,
    TEST_DOMAINS,
    bench_domain,
    loopback_profile,
    ros_env,
)
from simreal_ros.errors import LaunchError

REPO = Path(__file__).resolve().parents[2]

PEER = {'ROS_STATIC_PEERS': '192.0.2.7'}  # TEST-NET-1: never contacted, only looked at


def test_localhost_discovery_drops_static_peers():
    env = ros_env(PEER)
    assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert 'ROS_STATIC_PEERS' not in env
    assert 'ROS_STATIC_PEERS' not in ros_env(PEER, discovery='localhost')


def test_humble_which_has_no_discovery_range_is_kept_on_loopback_by_localhost_only():
    assert ros_env({'ROS_DISTRO': 'humble'})['ROS_LOCALHOST_ONLY'] == '1'
    assert 'ROS_LOCALHOST_ONLY' not in ros_env({'ROS_DISTRO': 'jazzy'})  # deprecated there
    assert 'ROS_LOCALHOST_ONLY' not in ros_env({'ROS_DISTRO': 'humble'}, discovery='subnet')


def test_an_explicit_subnet_keeps_the_users_static_peers():
    env = ros_env(PEER, discovery='subnet', domain_id=7)
    assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'SUBNET'
    assert env['ROS_STATIC_PEERS'] == '192.0.2.7' and env['ROS_DOMAIN_ID'] == '7'


def test_bad_discovery_and_domain_are_refused():
    with pytest.raises(LaunchError, match='--discovery must be one of'):
        ros_env({}, discovery='planet')
    with pytest.raises(LaunchError, match=r'ROS_DOMAIN_ID must be in \[0, 232\], got 233'):
        ros_env({}, domain_id=233)


def test_benchmark_domains_never_overlap_the_tests():
    assert not set(TEST_DOMAINS) & set(BENCH_DOMAINS)
    assert max(BENCH_DOMAINS) == 232  # the highest id Fast DDS maps to valid ports
    slots = [bench_domain(s) for s in range(5)]
    assert len(set(slots)) == 5 and set(slots) <= set(BENCH_DOMAINS)
    assert 0 < int(os.environ['ROS_DOMAIN_ID']) <= 200  # this test run's own id


def test_the_makefile_unexports_static_peers_for_localhost():
    probe = ['make', '-s', '-C', str(REPO), '--eval', 'peers: ; @echo "[$$ROS_STATIC_PEERS]"',
             'peers']
    env = {**os.environ, **PEER}
    env.pop('ROS_AUTOMATIC_DISCOVERY_RANGE')
    assert subprocess.run(probe, env=env, capture_output=True, text=True,
                          check=True).stdout == '[]\n'
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'SUBNET'  # a multi-machine robot keeps its peers
    assert subprocess.run(probe, env=env, capture_output=True, text=True,
                          check=True).stdout == '[192.0.2.7]\n'


def profiles(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in PROFILE_VARS}


def test_localhost_gets_the_loopback_profile_in_the_variable_its_fast_dds_reads():
    ours = str(loopback_profile())
    assert profiles(ros_env({'ROS_DISTRO': 'kilted'})) == {'FASTDDS_DEFAULT_PROFILES_FILE': ours}
    assert profiles(ros_env({'ROS_DISTRO': 'jazzy'}, discovery='off')) == {
        'FASTRTPS_DEFAULT_PROFILES_FILE': ours}
    text = Path(ours).read_text()
    assert '<address>127.0.0.1</address>' in text
    assert '<useBuiltinTransports>false</useBuiltinTransports>' in text


def test_a_wider_range_gets_no_profile_and_drops_an_inherited_one():
    inherited = ros_env({'ROS_DISTRO': 'kilted'})
    assert profiles(ros_env(inherited, discovery='subnet')) == {}
    assert profiles(ros_env(inherited, discovery='system_default')) == {}


def test_the_users_own_profile_file_wins(tmp_path):
    mine = {'ROS_DISTRO': 'kilted', 'FASTRTPS_DEFAULT_PROFILES_FILE': str(tmp_path / 'my.xml')}
    assert profiles(ros_env(mine)) == {'FASTRTPS_DEFAULT_PROFILES_FILE': str(tmp_path / 'my.xml')}
    assert profiles(ros_env(mine, discovery='subnet')) == {
        'FASTRTPS_DEFAULT_PROFILES_FILE': str(tmp_path / 'my.xml')}
