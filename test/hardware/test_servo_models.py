"""Servo families and models: each Dynamixel model's table through the real SDK, bad specs.

Every model runs as ``simreal emulate`` of a spec whose joints are that model, and the official
``dynamixel_sdk`` (raw, and through :class:`DynamixelBus`) reads what the e-Manual says its
registers hold; the bus configures each model in its own units. Bad specs (unknown family or
model, a model number that contradicts the model, current control asked of an XL430) and a bus
that answers wrongly (a missing ID, another model) are one line each.
"""

from __future__ import annotations

from pathlib import Path
import sys
import types

import dynamixel_sdk as sdk
import dynamixel_sdk.port_handler as sdk_port
import pytest
from sdk_timeouts import sdk_latency_timer
import yaml

from simreal_ros.cli import main
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import BusError, ConfigError
from simreal_ros.hardware import family as fam
from simreal_ros.hardware.dynamixel import protocol as p
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess

REPO = Path(__file__).resolve().parents[2]
ARM = REPO / 'config' / 'robots' / 'simreal_arm.yaml'

# register addresses of the X series (the same on every model)
CURRENT_LIMIT, VELOCITY_LIMIT, TEMPERATURE_LIMIT, MAX_VOLTAGE = 38, 44, 31, 32
OPERATING_MODE, GOAL_PWM, GOAL_CURRENT, INPUT_VOLTAGE = 11, 100, 102, 144

# model -> (model number, Current Limit (None: no such item), Velocity Limit, Temperature
# Limit, Max Voltage Limit, Present Input Voltage as the emulator reports it), e-Manual values
TABLES = {
    'XM430-W350': (1020, 1193, 200, 80, 160, 120),
    'XM430-W210': (1030, 1193, 330, 80, 160, 120),
    'XL430-W250': (1060, None, 265, 72, 140, 120),
    'XL330-M288': (1200, 1750, 445, 70, 70, 50),
}
# model -> (Operating Mode the driver writes, the register holding the effort limit, its value
# for a 0.5 N*m limit: 0.5 / (torque_per_amp * current unit), or 0.5 / stall torque * 885)
CONFIGURED = {
    'XM430-W350': (5, GOAL_CURRENT, 104),   # 0.5 / (1.78 * 0.00269)
    'XM430-W210': (5, GOAL_CURRENT, 143),   # 0.5 / (1.30 * 0.00269)
    'XL430-W250': (3, GOAL_PWM, 295),       # 0.5 / 1.5 * 885
    'XL330-M288': (5, GOAL_CURRENT, 1412),  # 0.5 / (0.354 * 0.001)
}


# 500 ms: with 100 ms the emulator's reply came too late once in a CI run with one core busy
# (``There is no status packet!``, XM430-W350 table); no test here waits a timeout out
patient_timeouts = sdk_latency_timer(sdk_port, 500, scope='module')


def arm_of(tmp: Path, model: str | None = None, edit=None, name: str = 'arm.yaml') -> Path:
    """simreal_arm with every joint a ``model`` (numbers from its table), light gains/limits."""
    data = yaml.safe_load(ARM.read_text())
    data['urdf'] = str(REPO / 'urdf' / 'simreal_arm.urdf')
    if model is not None:
        data['servo_defaults'] = {'model': model, 'ticks_per_rev': 4096, 'zero_tick': 2048}
        for j in data['joints']:
            # within the weakest model's registers (XL330: 0.62 N*m, kd < 0.24)
            j['limits']['effort'] = 0.5
            j['gains'] = {'kp': 2.0, 'kd': 0.05}
    if edit is not None:
        edit(data)
    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return path


def ok(result: int, error: int = 0) -> None:
    assert result == sdk.COMM_SUCCESS, sdk.PacketHandler(2.0).getTxRxResult(result)
    assert error == 0, sdk.PacketHandler(2.0).getRxPacketError(error)


@pytest.fixture(scope='module', params=sorted(TABLES))
def model_bus(request, tmp_path_factory):
    """(model name, emulator, spec path) of an arm whose six servos are all that model."""
    tmp = tmp_path_factory.mktemp(request.param)
    spec = arm_of(tmp, request.param)
    with EmulatorProcess(link=tmp / 'ttyDXL', robot=str(spec)) as emu:
        yield request.param, emu, spec


def test_each_model_answers_its_table_through_the_sdk(model_bus) -> None:
    model, emu, _spec = model_bus
    number, current_limit, velocity_limit, temperature, max_voltage, voltage = TABLES[model]
    port = sdk.PortHandler(emu.port)
    assert port.openPort() and port.setBaudRate(1_000_000)
    ph = sdk.PacketHandler(2.0)
    try:
        found, result = ph.broadcastPing(port)
        ok(result)
        assert {sid: v[0] for sid, v in found.items()} == dict.fromkeys(range(1, 7), number)
        value, result, error = ph.read4ByteTxRx(port, 3, VELOCITY_LIMIT)
        ok(result, error)
        assert value == velocity_limit
        value, result, error = ph.read1ByteTxRx(port, 3, TEMPERATURE_LIMIT)
        ok(result, error)
        assert value == temperature
        value, result, error = ph.read2ByteTxRx(port, 3, MAX_VOLTAGE)
        ok(result, error)
        assert value == max_voltage
        value, result, error = ph.read2ByteTxRx(port, 3, INPUT_VOLTAGE)
        ok(result, error)
        assert value == voltage
        if current_limit is None:  # the XL430 has no Current Limit: a write is refused
            result, error = ph.write2ByteTxRx(port, 3, CURRENT_LIMIT, 500)
            assert (result, error) == (sdk.COMM_SUCCESS, p.ERR_ACCESS)
        else:
            value, result, error = ph.read2ByteTxRx(port, 3, CURRENT_LIMIT)
            ok(result, error)
            assert value == current_limit
    finally:
        port.closePort()


def test_each_model_is_configured_in_its_own_mode_and_units(model_bus) -> None:
    model, emu, spec = model_bus
    mode, limit_address, limit_value = CONFIGURED[model]
    bus = DynamixelBus(load_robot(spec), emu.port, 1_000_000, latency_timer_ms=100)
    bus.open()
    try:
        bus.check_servos(5.0)
        bus.configure()
        assert bus.read_address(2, OPERATING_MODE, 1) == mode
        assert bus.read_address(2, limit_address, 2) == limit_value
        state = bus.read_state()
        assert state.position.shape == (6,)
    finally:
        bus.set_torque(False)
        bus.close()


def test_only_the_models_with_current_sensing_take_current_modes(model_bus) -> None:
    model, emu, _spec = model_bus
    refused = model == 'XL430-W250'  # no current sensing: no modes 0 and 5, no Goal Current
    port = sdk.PortHandler(emu.port)
    assert port.openPort() and port.setBaudRate(1_000_000)
    ph = sdk.PacketHandler(2.0)
    try:
        for current_mode in (0, 5):  # current, current-based position (torque is off)
            result, error = ph.write1ByteTxRx(port, 1, OPERATING_MODE, current_mode)
            assert (result, error) == (sdk.COMM_SUCCESS, p.ERR_DATA_LIMIT if refused else 0)
        result, error = ph.write2ByteTxRx(port, 1, GOAL_CURRENT, 100)
        assert (result, error) == (sdk.COMM_SUCCESS, p.ERR_ACCESS if refused else 0)
    finally:
        port.closePort()


# ---- bad specs: one line each ---------------------------------------------------------------

def test_an_unknown_model_is_one_line_naming_the_known_ones(tmp_path) -> None:
    spec = arm_of(tmp_path, 'XL320')
    with pytest.raises(ConfigError) as exc:
        fam.resolve_servos(load_robot(spec))
    assert str(exc.value) == (
        f"{spec}: joints[0].model (base_yaw): expected a dynamixel model: XL330-M288, "
        f"XL430-W250, XM430-W210, XM430-W350 (or servo_defaults.model), got 'XL320'")


def test_a_model_number_contradicting_the_model_is_one_line(tmp_path) -> None:
    def edit(data: dict) -> None:
        data['joints'][2]['model_number'] = 1020

    spec = arm_of(tmp_path, 'XL330-M288', edit)
    with pytest.raises(ConfigError) as exc:
        fam.resolve_servos(load_robot(spec))
    assert str(exc.value) == (
        f'{spec}: joints[2].model_number (elbow_pitch): expected 1200, the model number of '
        f'the XL330-M288 (or leave it out), got 1020')


def test_current_based_position_on_an_xl430_is_refused(tmp_path) -> None:
    def edit(data: dict) -> None:
        data['joints'][1]['operating_mode'] = 'current_based_position'

    spec = arm_of(tmp_path, 'XL430-W250', edit)
    with pytest.raises(ConfigError) as exc:
        DynamixelBus(load_robot(spec), '/dev/null', 1_000_000)
    assert str(exc.value) == (
        f"{spec}: joints[1].operating_mode (shoulder_pitch): expected 'position': the "
        f"XL430-W250 has no current sensing, so no current-based position control (use a "
        f"model with it, e.g. XM430 or XL330), got 'current_based_position'")


def test_gravity_compensation_needs_current_control(tmp_path) -> None:
    spec = arm_of(tmp_path, 'XL430-W250')
    with pytest.raises(ConfigError) as exc:
        fam.require_current_control(load_robot(spec), 'compensation:=true')
    assert str(exc.value) == (
        f"{spec}: joints[0].model (base_yaw): expected a model with current control for "
        f"compensation:=true (the XL430-W250 has no current sensing), got 'XL430-W250'")


def test_the_planner_refuses_a_bad_model_in_one_line(tmp_path, capsys) -> None:
    spec = arm_of(tmp_path, 'XM540-W270')
    rc = main(['launch', 'backend:=real', 'port:=/dev/null', f'robot:={spec}', '--dry-run'])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ''
    assert err.splitlines() == [
        f"simreal launch: error: robot:={spec}: servo models: {spec}: joints[0].model "
        f"(base_yaw): expected a dynamixel model: XL330-M288, XL430-W250, XM430-W210, "
        f"XM430-W350 (or servo_defaults.model), got 'XM540-W270'"]


def test_an_unknown_family_is_one_line_naming_the_registered_ones() -> None:
    with pytest.raises(ConfigError) as exc:
        fam.get_family('herkulex', 'arm.yaml')
    assert str(exc.value) == ("arm.yaml: bus.family: expected one of dynamixel, feetech, "
                              "got 'herkulex'")


def test_a_registered_family_that_is_not_installed_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(fam.FAMILIES, 'herkulex', 'simreal_ros.hardware.herkulex_not_here')
    with pytest.raises(ConfigError) as exc:
        fam.get_family('herkulex', 'arm.yaml')
    assert str(exc.value) == (
        "arm.yaml: bus.family: expected a servo family this installation ships (the herkulex "
        "family, module simreal_ros.hardware.herkulex_not_here, is not installed), "
        "got 'herkulex'")


def test_a_family_module_registers_through_its_family_attribute(monkeypatch) -> None:
    """How a new family plugs in: a module defining FAMILY, named in FAMILIES."""
    from simreal_ros.hardware.dynamixel.family import XL330_M288
    module = types.ModuleType('simreal_test_family')
    module.FAMILY = fam.ServoFamily(name='testfam', bus='simreal_test_family:Bus',
                                    models={'XL330-M288': XL330_M288})
    module.Bus = DynamixelBus
    monkeypatch.setitem(sys.modules, 'simreal_test_family', module)
    monkeypatch.setitem(fam.FAMILIES, 'testfam', 'simreal_test_family')
    assert fam.get_family('testfam').models == {'XL330-M288': XL330_M288}
    module.FAMILY = 'not a family'
    with pytest.raises(ConfigError) as exc:
        fam.get_family('testfam', 'arm.yaml')
    assert str(exc.value) == ("arm.yaml: bus.family: expected a family module defining "
                              "FAMILY = ServoFamily(...) (simreal_test_family does not), "
                              "got 'testfam'")


def test_each_family_names_its_error_bits_and_its_wire_limit() -> None:
    """What the driver reads from the family of the spec it drives (no per-family branch)."""
    from simreal_ros.hardware.dynamixel import control_table as dxl_table
    from simreal_ros.hardware.dynamixel import wire as dxl_wire
    from simreal_ros.hardware.feetech import control_table as sts_table
    from simreal_ros.hardware.feetech import wire as sts_wire
    arm, so101 = load_robot('simreal_arm'), load_robot('so101')
    assert fam.error_names(arm) is dxl_table.describe_hardware_error
    assert fam.error_names(so101) is sts_table.describe_status
    assert fam.byte_time_limit_hz(arm, 1_000_000, 0.0) == dxl_wire.byte_time_limit_hz(6, 1_000_000)
    assert fam.byte_time_limit_hz(so101, 1_000_000, 2e-6) == sts_wire.byte_time_limit_hz(
        6, 1_000_000, return_delay_s=2e-6)
    # the STS packets of the same 6 servos are shorter than Dynamixel's protocol 2.0 ones
    assert fam.byte_time_limit_hz(so101, 1_000_000, 0.0) > fam.byte_time_limit_hz(
        arm, 1_000_000, 0.0)


def test_a_spec_leaving_numbers_to_the_model_gets_the_models(tmp_path) -> None:
    robot = fam.resolve_robot(load_robot(arm_of(tmp_path, 'XL330-M288')))
    s = robot.joints[4].servo
    assert (s.model_number, s.torque_per_amp, s.operating_mode) == (
        1200, 0.354, 'current_based_position')
    xl430 = fam.resolve_robot(load_robot(arm_of(tmp_path, 'XL430-W250', name='b.yaml')))
    assert xl430.joints[0].servo.operating_mode == 'position'


# ---- a bus that answers wrongly: one line each -----------------------------------------------

@pytest.fixture(scope='module')
def xm430_bus(tmp_path_factory):
    """The shipped arm (six XM430-W350) on the virtual bus."""
    with EmulatorProcess(link=tmp_path_factory.mktemp('xm') / 'ttyDXL') as emu:
        yield emu


def check(spec: Path, port: str) -> str:
    bus = DynamixelBus(load_robot(spec), port, 1_000_000, latency_timer_ms=100)
    bus.open()
    try:
        with pytest.raises(BusError) as exc:
            bus.check_servos(1.0)
    finally:
        bus.close()
    return str(exc.value)


def test_another_model_at_an_id_is_one_line_naming_joint_id_model_and_number(
        xm430_bus, tmp_path) -> None:
    def edit(data: dict) -> None:
        data['joints'][4]['model'] = 'XL330-M288'
        data['joints'][4]['gains'] = {'kp': 2.0, 'kd': 0.05}
        data['joints'][4]['limits']['effort'] = 0.5

    spec = arm_of(tmp_path, None, edit)
    message = check(spec, xm430_bus.port)
    assert message == (
        f'{xm430_bus.port} at 1000000 baud: wrong servo at ID 5 (wrist_pitch): expected '
        f'XL330-M288 (model number 1200), got model number 1020 (XM430-W350) (check wiring, '
        f'power, IDs and baud rate of the robot spec {spec})')


def test_ids_that_do_not_answer_are_listed_in_one_line(xm430_bus, tmp_path) -> None:
    def edit(data: dict) -> None:
        data['joints'][4]['servo_id'] = 17
        data['joints'][5]['servo_id'] = 18

    spec = arm_of(tmp_path, None, edit)
    message = check(spec, xm430_bus.port)
    assert message == (
        f'{xm430_bus.port} at 1000000 baud: no answer from servo ID 17 (wrist_pitch), '
        f'18 (wrist_roll) (check wiring, power, IDs and baud rate of the robot spec {spec})')
