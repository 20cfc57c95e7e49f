"""What a servo-bus fit absorbs: the driver's pipeline latency, measured, and the delay it adds.

The bags are the virtual bus's own arm (:class:`VirtualArm`, the emulator's servo law, delay
line and encoder ticks) driven in lockstep as the driver drives it
(:func:`synth.record_servo_bag`), so the pipeline latency is exactly what the test sets and no
host timing is in the data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sysid.api import identify
from simreal_ros.sysid.pipeline import measure
from simreal_ros.sysid.synth import record_servo_bag

ROBOT = load_robot('simreal_arm')
#: the measured pipeline of the virtual bus at 1 Mbaud (docs/sysid.md): the state read is
#: 2.9 ms old at its stamp, the goal write arrives 0.8 ms after it
SAMPLE_TO_STAMP_NS = 2_900_000
STAMP_TO_WRITE_NS = 800_000
REALITY = """robot: simreal_arm
joints:
  base_yaw:    {damping: 0.16}
  elbow_pitch: {damping: 0.09}
command_delay_s: 0.010
"""


@pytest.fixture(scope='module')
def reality(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reality with two damping values off nominal and a 10 ms servo delay."""
    p = tmp_path_factory.mktemp('pipeline') / 'reality.yaml'
    p.write_text(REALITY, encoding='utf-8')
    return p


@pytest.fixture(scope='module')
def servo_bag(tmp_path_factory: pytest.TempPathFactory, reality: Path) -> tuple[Path, Path]:
    """12 s of the virtual bus's arm at 6 Hz excitation, and its bus trace (both tests read it).

    One recording for the module: the latency test read a 3 s bag of its own before (the
    lockstep sets the latencies exactly, whatever the length or the excitation).
    """
    d = tmp_path_factory.mktemp('servo_bag')
    bag = record_servo_bag(d / 'bag', ROBOT, load_overlay(reality),
                           ExcitationConfig(pattern='sysid', duration_s=12.0, seed=2,
                                            f_max_hz=6.0),
                           sample_to_stamp_ns=SAMPLE_TO_STAMP_NS,
                           stamp_to_write_ns=STAMP_TO_WRITE_NS, trace=d / 'trace.txt')
    return bag, d / 'trace.txt'


def test_measure_gives_the_latencies_the_bus_had(servo_bag: tuple[Path, Path]) -> None:
    bag, trace = servo_bag
    got = measure(trace, bag, ROBOT)
    assert got['unmatched_states'] == 0
    assert got['sample_to_stamp']['median_ms'] == 2.9
    assert got['sample_to_stamp']['p90_ms'] == 2.9
    assert got['stamp_to_write']['median_ms'] == 0.8
    assert got['unmodelled_ms'] == 3.7


def test_the_fitted_delay_is_the_servos_plus_the_pipeline(
        tmp_path: Path, servo_bag: tuple[Path, Path]) -> None:
    """At 6 Hz the fit separates delay from damping; the delay holds the pipeline.

    The goal write lands 3.7 ms after the cycle's stamp, in the arm's physics step 3 ms after
    it, so the true model replays best at 10 + 3 = 13 ms (measured: 0.52 mrad against 0.61
    and 0.66 at 12 and 14 ms, the encoder's 0.44 mrad floor under all). With the excitation's
    2 Hz default the same data gave 11 ms and every damping 20-39 % high at the same cost.
    """
    bag, _trace = servo_bag
    summary = identify(bag, 'simreal_arm', ['damping', 'command_delay'],
                       tmp_path / 'fit.yaml', joints=['base_yaw', 'elbow_pitch'])
    rows = {r['key']: r['estimate'] for r in summary['parameters']}
    assert round(rows['command_delay_s'] * 1e3, 6) == 13.0
    for joint, want in (('base_yaw', 0.16), ('elbow_pitch', 0.09)):
        got = rows[f'joints.{joint}.damping']
        assert abs(got - want) / want <= 0.10, (joint, got, want)


def test_the_feetech_trace_is_read_at_its_own_addresses(tmp_path: Path) -> None:
    # the virtual STS bus's trace (simreal emulate --robot so101 --trace): Present Position
    # is the first 2 bytes of a state block at 56, Goal Position a 2-byte write at 42, both
    # sign-magnitude with the sign in bit 15 (0x8005 is -5, not 32773 or -32763)
    rest = '00' * 13
    ids = range(1, 7)
    trace = tmp_path / 'trace.txt'
    trace.write_text(
        'sync_read 56 15 1000 ' + ' '.join(f'{i}:0008{rest}' for i in ids) + '\n'
        + 'sync_write 42 2 2000 ' + ' '.join(f'{i}:{"0580" if i == 2 else "ff07"}'
                                            for i in ids) + '\n'
        # a wider read holds Present Position 16 bytes in; a read of other items does not
        + 'sync_read 40 26 3000 ' + ' '.join(f'{i}:{"00" * 16}0a00{"00" * 8}' for i in ids)
        + '\nsync_read 3 2 4000 ' + ' '.join(f'{i}:0903' for i in ids) + '\n',
        encoding='utf-8')
    from simreal_ros.sysid.pipeline import parse_trace
    ev = parse_trace(trace, load_robot('so101'))
    assert ev.read_ns.tolist() == [1000, 3000]
    assert ev.read_ticks.tolist() == [[2048] * 6, [10] * 6]
    assert ev.write_ns.tolist() == [2000]
    assert ev.write_ticks.tolist() == [[2047, -5, 2047, 2047, 2047, 2047]]
