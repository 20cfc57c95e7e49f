"""``key=number`` option parsing shared by ``simreal emulate --faults`` and ``--operator``."""

from __future__ import annotations

import pytest

from simreal_ros.core.validate import key_numbers
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.emulator.emulator import Faults
from simreal_ros.hardware.emulator.operator import OperatorConfig


def test_parts_become_numbers_and_empty_parts_are_skipped() -> None:
    assert key_numbers(['crc=0.01', '', ' seed=3 '], ('crc', 'seed'), '--faults') == {
        'crc': 0.01, 'seed': 3.0}


@pytest.mark.parametrize('parts,finite,message', [
    (['crc'], False, "--faults: crc: expected key=value with a key among ['crc', 'seed']"),
    (['late=1'], False, "--faults: late=1: expected key=value with a key among ['crc', 'seed']"),
    (['crc=x'], False, "--faults: crc: expected a number, got 'x'"),
    (['crc=inf'], True, "--faults: crc: expected a finite number, got 'inf'"),
])
def test_bad_parts_are_one_clear_error(parts: list[str], finite: bool, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        key_numbers(parts, ('crc', 'seed'), '--faults', finite=finite)
    assert str(exc.value) == message


def test_both_emulator_options_use_it() -> None:
    assert Faults.parse('crc=0.01,seed=2') == Faults(crc=0.01, seed=2)
    assert OperatorConfig.parse('waypoints,amplitude=0.2').amplitude == 0.2
    with pytest.raises(ConfigError, match='--operator: amplitude: expected a finite number'):
        OperatorConfig.parse('chirp,amplitude=nan')
    with pytest.raises(ConfigError, match=r"--faults: crc: expected a number, got 'x'"):
        Faults.parse('crc=x')
