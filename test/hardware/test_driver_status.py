"""The driver's one-line status: which condition of a diagnostics period wins."""

from dataclasses import replace

from simreal_ros.hardware.dynamixel.driver_status import (
    FAILED_READS_ERROR,
    DriverSnapshot,
    driver_status,
)

QUIET = DriverSnapshot(joints=[('shoulder', 1), ('elbow', 2)], rejected_window=0,
                       last_rejection='', watchdog_active=False, watchdog='hold',
                       health=([0, 0], [30.0, 31.0]), torque_commanded=True,
                       torque_read=[1, 1], reads_period=100, failures_period=0,
                       consecutive_failures=0, last_error='', connected=True, stalled_ns=0,
                       fatal='')


def status(**changes: object) -> tuple[str, str]:
    return driver_status(replace(QUIET, **changes), lambda bits: f'bits {bits:#x}')


def test_a_quiet_period_is_ok():
    assert status() == ('ok', 'running')


def test_the_watchdog_replaces_rejected_commands():
    assert status(rejected_window=3, last_rejection='NaN') == (
        'warn', '3 joint commands rejected: NaN')
    assert status(rejected_window=3, watchdog_active=True) == (
        'warn', 'no joint command: watchdog hold')


def test_a_hardware_error_names_the_servo_and_wins_over_torque_read_off():
    assert status(health=([0, 0x20], [30.0, 70.0]), torque_read=[1, 0]) == (
        'error', 'hardware error: servo 2 (elbow): bits 0x20')
    assert status(torque_read=[1, 0]) == (
        'error', 'torque off at elbow although enabled (servo power lost or reset?): call '
                 '~/reset to configure them again')
    assert status(torque_read=[1, 0], torque_commanded=False) == ('ok', 'running')


def test_failed_reads_warn_only_over_ok_and_error_over_anything():
    assert status(failures_period=20, last_error='timeout') == (
        'warn', '20 of 100 state reads failed (20 % > 10 %): timeout')
    assert status(failures_period=20, watchdog_active=True) == (
        'warn', 'no joint command: watchdog hold')
    assert status(failures_period=100, watchdog_active=True, last_error='timeout') == (
        'error', 'bus not answering: all 100 state reads of the period failed: timeout')
    assert status(consecutive_failures=FAILED_READS_ERROR, last_error='timeout') == (
        'error', 'bus not answering: timeout')


def test_port_lost_then_stall_then_a_failed_thread_take_precedence():
    lost = {'connected': False, 'last_error': 'EIO'}
    assert status(**lost) == ('error', 'port lost, reconnecting: EIO')
    assert status(**lost, stalled_ns=2_500_000_000) == (
        'error', 'bus thread stalled: no cycle for 2.5 s')
    assert status(**lost, stalled_ns=1, fatal='boom') == ('error', 'bus thread failed: boom')
