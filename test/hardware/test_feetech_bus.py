"""FeetechBus and the vendor's scservo_sdk against the virtual STS bus over a pty."""

from __future__ import annotations

import math
from pathlib import Path
import subprocess
import sys
import time

import numpy as np
import pytest
import scservo_sdk as sdk
import scservo_sdk.port_handler as sdk_port
from sdk_timeouts import sdk_latency_timer
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import BusError, ConfigError, PortLostError
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.feetech import control_table as ct
from simreal_ros.hardware.feetech import protocol
from simreal_ros.hardware.feetech.bus import FeetechBus
from simreal_ros.hardware.feetech.protocol import encode_sm

BASE = load_robot('simreal_arm')
REPO = Path(__file__).resolve().parents[2]


# the buses of these tests set it (100 ms, a loaded host); restored after each test
patient_timeouts = sdk_latency_timer(sdk_port, None)


def sts_spec(tmp_path: Path, edit=None) -> Path:
    """simreal_arm on a Feetech bus of STS3215 servos, changed by ``edit(data)``."""
    data = yaml.safe_load(BASE.source.read_text())
    data.update(robot='sts_arm', urdf=str(BASE.urdf), bus={'family': 'feetech'},
                servo_defaults={'model': 'STS3215', 'model_number': 777, 'ticks_per_rev': 4096,
                                'zero_tick': 2048, 'torque_per_amp': 0.71})
    data.pop('cameras', None)
    for joint in data['joints']:
        joint['limits']['effort'] = 1.8
    if edit is not None:
        edit(data)
    path = tmp_path / 'sts_arm.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


def emulator(tmp_path: Path, spec: Path, faults: str = '', trace: str = '') -> EmulatorProcess:
    return EmulatorProcess(link=tmp_path / 'ttySTS', robot=str(spec), faults=faults,
                           trace=trace)


def make_bus(spec: Path, port: str, **kw) -> FeetechBus:
    kw.setdefault('latency_timer_ms', 100.0)
    bus = FeetechBus(load_robot(spec), port, 1_000_000, **kw)
    bus.open()
    return bus


def poll(what: str, fn, timeout_s: float = 30.0):
    """Wait until ``fn()`` is true; a transaction that fails on the loaded host is retried.

    (A sync read can time out when the emulator is starved of CPU; the driver retries it in
    the next cycle too. The port going away is not retried.)
    """
    deadline = time.monotonic() + timeout_s
    failures = []
    while time.monotonic() < deadline:
        try:
            value = fn()
        except PortLostError:
            raise
        except BusError as exc:
            failures.append(str(exc))
            value = None
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f'{what} within {timeout_s} s (bus errors: {failures[-3:]})')


def test_the_vendor_sdk_pings_and_reads_the_model_number(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        port = sdk.PortHandler(emu.port)
        ph = sdk.PacketHandler(0)
        sdk_port.LATENCY_TIMER = 100
        assert port.openPort()
        assert ph.ping(port, 3) == (777, sdk.COMM_SUCCESS, 0)
        assert ph.read2ByteTxRx(port, 3, 3) == (777, sdk.COMM_SUCCESS, 0)
        model, result, _ = ph.ping(port, 9)  # nobody there
        assert (model, result) == (0, sdk.COMM_RX_TIMEOUT)
        port.closePort()


def test_a_model_number_other_than_the_models_is_one_config_line_before_the_port_opens(
        tmp_path):
    """The family layer checks the spec's model_number against the STS3215's (777)."""
    def edit(data: dict) -> None:
        data['joints'][2]['model_number'] = 2825

    spec = sts_spec(tmp_path, edit)
    with pytest.raises(ConfigError) as info:
        FeetechBus(load_robot(spec), str(tmp_path / 'nothing-here'), 1_000_000)
    assert str(info.value) == (f'{spec}: joints[2].model_number (elbow_pitch): expected 777, '
                               f'the model number of the STS3215 (or leave it out), got 2825')


def test_configure_writes_the_protections_from_the_spec_and_locks_eeprom(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.check_servos()
        bus.configure()
        # effort 1.8 N*m of 1.91 N*m stall: 943 (0.1 %); 1.8 / 0.71 A in 6.5 mA: 391 * 1.2
        expected = {'max_torque_limit': 943, 'torque_limit': 943, 'overload_torque': 94,
                    'protection_current': 469, 'protection_time': 200, 'protective_torque': 20,
                    'unloading_condition': 0x2C, 'lock': 1, 'torque_enable': 1}
        got = {name: bus.read_register(5, name) for name in expected}
        assert got == expected
        bus.close()


def test_negative_positions_cross_the_bus_in_sign_magnitude(tmp_path):
    """A homing offset of 2047 puts elbow_pitch (1265 ticks at home) at negative positions."""
    def edit(data: dict) -> None:
        data['joints'][2]['zero_tick'] = 2048 - 2047

    trace = tmp_path / 'trace.txt'
    with emulator(tmp_path, sts_spec(tmp_path), trace=str(trace)) as emu:
        bus = make_bus(sts_spec(tmp_path, edit), emu.port)
        bus.check_servos()
        # angle limits 0/0 (off): 0..4095 would clamp a negative goal to 0
        bus.write_eeprom(3, {'homing_offset': 2047, 'max_position_limit': 0})
        # the offset crosses as 0x07FF; -2047 as 0x0FFF (sign in bit 11)
        ph, port = bus.ph, bus.port
        assert ph.read2ByteTxRx(port, 3, 31) == (0x07FF, sdk.COMM_SUCCESS, 0)
        bus.configure()
        state = poll('a state', bus.read_state)
        assert state.ticks[2] < 0
        raw, result, _ = ph.read2ByteTxRx(port, 3, 56)
        assert (result, raw & 0x8000) == (sdk.COMM_SUCCESS, 0x8000)
        goal = state.position.copy()
        goal[2] = 1.0
        sent = bus.write_goal(goal)
        assert sent[2] == 1 + round(-1.0 * 4096 / (2 * math.pi)) == -651
        wire = encode_sm(-651, 15).to_bytes(2, 'little').hex()
        poll('the goal on the wire', lambda: f' 3:{wire}' in trace.read_text())
        poll('elbow_pitch at 1.0 rad', lambda: abs(bus.read_state().position[2] - 1.0) < 0.03)
        bus.close()


def test_homing_offset_stops_at_2047(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        with pytest.raises(BusError, match=r'homing_offset=2048: outside the register '
                                           r'\(-2047\.\.2047\)'):
            bus.write_register(1, 'homing_offset', 2048)
        bus.write_register(1, 'homing_offset', -2047)
        assert bus.read_register(1, 'homing_offset') == -2047
        assert bus.ph.read2ByteTxRx(bus.port, 1, 31) == (0x0FFF, sdk.COMM_SUCCESS, 0)
        bus.close()


def test_eeprom_written_unlocked_survives_a_power_cycle_and_locked_does_not(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path), faults='power_cycle_at=6') as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.check_servos()
        bus.write_eeprom(1, {'max_torque_limit': 600})
        bus.write_register(2, 'max_torque_limit', 600)  # locked: until the power cycle only
        bus.write_register(1, 'torque_enable', 1)
        assert (bus.read_register(1, 'max_torque_limit'),
                bus.read_register(2, 'max_torque_limit')) == (600, 600)
        assert 'power off' not in emu.lines, 'set-up took longer than 6 s: test invalid'
        emu.wait_for_line('power on', 30)
        bus.check_servos(timeout_s=5)
        after = [bus.read_register(sid, name) for sid, name in (
            (1, 'max_torque_limit'), (2, 'max_torque_limit'), (1, 'torque_limit'),
            (1, 'torque_enable'), (1, 'lock'))]
        assert after == [600, 1000, 600, 0, 1]
        bus.close()


def test_homing_offsets_are_written_absolute_and_survive_a_power_cycle(tmp_path):
    """The calibration's offsets (calibration:=): written as given, never added to what the
    servo holds (LeRobot users' overflow after repeated calibrations), and kept in EEPROM
    (their lost calibration after a restart)."""
    with emulator(tmp_path, sts_spec(tmp_path), faults='power_cycle_at=6') as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.check_servos()
        want = tuple(range(-300, -300 + 100 * len(bus.ids), 100))
        for _ in range(3):  # three calibrations in a row: the same offsets, no accumulation
            bus.write_homing_offsets(want)
            assert bus.read_homing_offsets() == want
        assert 'power off' not in emu.lines, 'set-up took longer than 6 s: test invalid'
        emu.wait_for_line('power on', 30)
        bus.check_servos(timeout_s=5)
        assert bus.read_homing_offsets() == want
        assert [bus.read_register(sid, 'lock') for sid in bus.ids] == [1] * len(bus.ids)
        bus.close()


def test_a_joint_held_at_its_limit_falls_to_protective_torque(tmp_path):
    """base_yaw pushed past its joint limit: overload after Protection Time, 20 % output."""
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port, protection_time_s=0.3)
        bus.check_servos()
        bus.configure()
        goal = poll('a state', bus.read_state).position.copy()
        goal[0] = 3.0  # beyond the joint's upper limit of 2.7 rad
        bus.write_goal(goal)
        poll('overload of base_yaw', lambda: bus.read_health().error_bits[0] == ct.ST_OVERLOAD)
        assert poll('health', bus.read_health).error_bits == (ct.ST_OVERLOAD, 0, 0, 0, 0, 0)
        # Protective Torque 20 % of the stall torque: 200 in 0.1 %
        poll('load at protective torque', lambda: abs(bus.read_register(1, 'present_load'))
             in (199, 200, 201))
        with pytest.raises(BusError, match=r'servo ID 1 \(base_yaw\): overload \(0x20\)'):
            bus.clear_hardware_errors(reboot=False)
        assert bus.clear_hardware_errors(reboot=True) == [1]
        assert bus.read_register(1, 'torque_enable') == 0
        bus.close()


def test_what_the_sts_does_not_have_is_said(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.arm_watchdog(10)  # accepted, nothing to arm
        assert bus.has_watchdog is False
        assert poll('health', bus.read_health).bus_watchdog == (0,) * 6
        with pytest.raises(BusError, match='no current-control mode'):
            bus.set_current_mode()
        bus.close()


@pytest.mark.parametrize('one_read', [False, True], ids=['sdk_receive', 'one_read'])
@pytest.mark.parametrize('faults, message', [
    ('timeout=1.0', 'sync read: timeout'),
    ('crc=1.0,seed=3', r'sync read: corrupt \(checksum\)'),
])
def test_bus_faults_are_bus_errors(tmp_path, faults, message, one_read):
    with emulator(tmp_path, sts_spec(tmp_path), faults=faults) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port, one_read_sync=one_read)
        with pytest.raises(BusError, match=message):
            bus.read_state()
        bus.close()


@pytest.mark.parametrize('one_read', [False, True], ids=['sdk_receive', 'one_read'])
def test_a_late_answer_of_a_longer_read_is_stale_not_a_state(tmp_path, one_read):
    """The health read's late 26-byte answer (Torque Enable 1 first) arriving during the next
    state read: the SDK keeps its first 15 bytes, which read as tick 1 (-3.14 rad) on every
    joint; the bus checks each answer's length and refuses it."""
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port, one_read_sync=one_read)
        port = bus.port
        health = bytes([1]) + bytes(25)  # Torque Enable (40) .. Status (65)
        late = protocol.status(1, 0, health)
        clear = port.clearPort

        def clear_then_the_late_answer() -> None:  # what the SDK calls right before sending
            clear()
            port._rx += late
            port.clearPort = clear

        port.clearPort = clear_then_the_late_answer
        with pytest.raises(BusError, match='sync read: stale'):
            bus.read_state()
        state = poll('a state read', bus.read_state)  # the next request is answered
        assert min(state.ticks) > 1000  # simreal_arm's home, not tick 1
        bus.close()


def _leave_unanswered(bus: FeetechBus, tx: list[int]) -> None:
    """Send ``tx`` (its checksum filled in) and leave its answer on the line, unread."""
    port = bus.port
    assert bus.ph.txPacket(port, tx) == sdk.COMM_SUCCESS
    port.is_using = False  # the SDK clears it only when it reads an answer


def test_a_stale_answer_to_a_ping_is_pinged_again(tmp_path):
    """At start-up a ping whose answer the SDK indexes short (a late answer to an earlier
    request: what ``_guard`` reports as stale) is a miss like no answer: pinged again within
    the timeout, counted, not a failed start-up."""
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        ping, cut = bus.ph.ping, [bus.ids[3]]

        def ping_cut_short_once(port, sid):
            if sid in cut:
                cut.remove(sid)
                raise IndexError('list index out of range')  # what the SDK raises then
            return ping(port, sid)

        bus.ph.ping = ping_cut_short_once
        try:
            bus.check_servos(5.0)
        finally:
            bus.close()
    assert cut == [] and bus.comm_errors['stale'] == 1  # (a starved emulator may time out)


def test_a_late_answer_of_a_longer_read_is_not_read_as_status(tmp_path):
    """Every answer 20 ms late: the answer to an earlier 2-byte READ of the Model Number (777 =
    0x0309) arrives after the Status read was sent, and the SDK copies its first byte as Status
    (0x09: input voltage + over-current). On simreal_quad the late 15-byte state answers read
    as 0x7c/0x96/0x61 per leg ("servo protection" on ~/reset). The bus checks the length of
    the raw answer (stale, retried)."""
    with emulator(tmp_path, sts_spec(tmp_path), faults='late=1.0,late_s=0.02,seed=1') as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        try:
            bus.check_servos(5.0)
            sid = bus.ids[2]
            model = ct.BY_NAME['model_number']
            _leave_unanswered(bus, [0xFF, 0xFF, sid, 4, sdk.INST_READ, model.address, 2, 0])
            value = bus.read_register(sid, 'status')
        finally:
            bus.close()
    assert value == 0  # the SDK alone reads 9


def test_a_late_answer_of_the_same_length_is_not_reported_as_a_protection(tmp_path):
    """A late 1-byte answer (Present Temperature, ~25) passes every check of the packet: the
    bits a Status read finds are confirmed by a second read after the line is quiet."""
    with emulator(tmp_path, sts_spec(tmp_path), faults='late=1.0,late_s=0.02,seed=1') as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        try:
            bus.check_servos(5.0)
            sid = bus.ids[0]
            temp = ct.BY_NAME['present_temperature']
            _leave_unanswered(bus, [0xFF, 0xFF, sid, 4, sdk.INST_READ, temp.address, 1, 0])
            errors = bus.hardware_errors()
        finally:
            bus.close()
    assert errors == {}


def test_an_unplugged_adapter_is_port_lost(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path), faults='unplug_at=1.0') as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.check_servos()

        def lost() -> bool:
            try:
                bus.read_state()
            except PortLostError:
                return True
            except BusError:
                pass
            return False

        poll('PortLostError after unplug', lost)
        assert not bus.is_open
        emu.wait_for_line('unplugged', 10)


@pytest.mark.parametrize('key, value, message', [
    ('gains.kp', 200.0, 'joints[1].gains.kp (shoulder_pitch, servo ID 2)'),
    ('limits.effort', 2.5, 'joints[1].limits.effort (shoulder_pitch, servo ID 2)'),
])
def test_spec_values_outside_the_registers_fail_naming_the_key(tmp_path, key, value, message):
    group, name = key.split('.')

    def edit(data: dict) -> None:
        data['joints'][1][group][name] = value

    with pytest.raises(ConfigError) as info:
        FeetechBus(load_robot(sts_spec(tmp_path, edit)), '/unused', 1_000_000)
    assert message in str(info.value)


def test_emulate_with_a_rate_the_sts_lacks_is_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'emulate', '--robot',
                        str(sts_spec(tmp_path)), '--link', str(tmp_path / 'tty'), '--baud',
                        '2000000'], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr
    assert '--baud' in lines[0] and '1000000' in lines[0]


def test_state_is_in_si_units(tmp_path):
    with emulator(tmp_path, sts_spec(tmp_path)) as emu:
        bus = make_bus(sts_spec(tmp_path), emu.port)
        bus.check_servos()
        bus.configure()
        robot = load_robot(sts_spec(tmp_path))
        bus.write_goal(robot.home)
        poll('the arm settled at home', lambda: np.allclose(
            bus.read_state().position, robot.home, atol=0.05))
        bus.close()
