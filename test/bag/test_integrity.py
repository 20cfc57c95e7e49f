"""Bag integrity: CRCs written and checked, damage one line (exit 3), salvage of intact chunks.

Real bags written with the project's writer, damaged by seeded byte flips and truncations, and
every bag-reading ``simreal`` command called in-process through ``simreal_ros.cli.main``.
"""

from __future__ import annotations

from pathlib import Path
import random
import shutil
import struct
import sys

from mcap.reader import make_reader
from mcap.stream_reader import StreamReader
import pytest

from simreal_ros.bag import BagReader, BagWriter, repair_bag
from simreal_ros.cli import main
from simreal_ros.errors import EXIT_CORRUPT_INPUT, BagCorruptError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from episode_bags import make_episode_bag  # noqa: E402
from test_bag import joint_state_cdr, write_bag  # noqa: E402


def _file(bag: Path) -> Path:
    return bag / f'{bag.name}_0.mcap'


def _chunks(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, end, uncompressed_crc) of each chunk record of an MCAP file."""
    out, o = [], 8
    while o + 9 <= len(data) and data[o] != 0x0F:
        n = struct.unpack_from('<Q', data, o + 1)[0]
        if data[o] == 0x06:
            out.append((o, o + 9 + n, struct.unpack_from('<I', data, o + 9 + 24)[0]))
        o += 9 + n
    return out


def _messages(bag: Path) -> list[tuple[str, int, bytes]]:
    with BagReader(bag) as r:
        return [(m.topic, m.timestamp, m.data) for m in r.messages()]


@pytest.mark.parametrize('compression', ['none', 'zstd'])
def test_written_crcs_validate_with_the_independent_mcap_reader(tmp_path, compression):
    bag = write_bag(tmp_path / 'bag', n=20000, compression=compression)
    data = _file(bag).read_bytes()
    chunks = _chunks(data)
    assert len(chunks) > 1
    assert all(crc != 0 for _a, _b, crc in chunks)
    with _file(bag).open('rb') as f:
        records = list(StreamReader(f, validate_crcs=True).records)
    data_end = [r for r in records if type(r).__name__ == 'DataEnd'][0]
    footer = [r for r in records if type(r).__name__ == 'Footer'][0]
    assert data_end.data_section_crc != 0
    assert footer.summary_crc != 0
    with _file(bag).open('rb') as f:
        n = sum(1 for _ in make_reader(f, validate_crcs=True).iter_messages())
    assert n == 20001


def test_a_flip_inside_a_chunk_fails_mcaps_own_crc_check(tmp_path):
    bag = write_bag(tmp_path / 'bag', n=20000)
    data = bytearray(_file(bag).read_bytes())
    a, b, _crc = _chunks(bytes(data))[1]
    data[(a + b) // 2] ^= 0x01
    _file(bag).write_bytes(data)
    with _file(bag).open('rb') as f, pytest.raises(Exception, match='crc validation failed'):
        list(make_reader(f, validate_crcs=True).iter_messages())


def test_flipped_bytes_are_one_line_naming_the_chunk_and_exit_3(tmp_path, capsys):
    bag = tmp_path / 'ep'
    make_episode_bag(bag, seconds=20)
    data = bytearray(_file(bag).read_bytes())
    # the writer closes a chunk at each flush (time-driven), so the count varies with the load
    chunks = _chunks(bytes(data))
    mid = len(data) // 2
    for i in range(64):
        data[mid + i] ^= 0x5A
    _file(bag).write_bytes(data)
    assert main(['check', str(bag)]) == EXIT_CORRUPT_INPUT
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    (k,) = [i for i, (a, b, _crc) in enumerate(chunks) if a <= mid < b]
    assert err.startswith(f'simreal check: error: {_file(bag)}: chunk {k + 1} of {len(chunks)} '
                          f'(bytes ')
    assert 'fails its CRC' in err
    assert f'run `simreal bag repair {bag}`' in err


def test_a_killed_recording_is_exit_3_naming_repair(tmp_path, capsys):
    w = BagWriter(tmp_path / 'killed')
    h = w.add_topic('/s', 'std_msgs/msg/String')
    w.write(h, 10**9, b'\x00\x01\x00\x00\x02\x00\x00\x00a\x00')
    w.flush()  # never closed: what a SIGKILL leaves
    assert main(['check', str(tmp_path / 'killed')]) == EXIT_CORRUPT_INPUT
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert 'was not closed cleanly' in err
    assert f'run `simreal bag repair {tmp_path / "killed"}`' in err


def test_killed_recording_with_a_damaged_chunk_skips_it_and_says_so(tmp_path, capsys):
    bag = tmp_path / 'killed'
    w = BagWriter(bag)
    h = w.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    written = set()
    for i in range(3000):
        data = joint_state_cdr(i, 10**9 + i * 10**6)
        w.write(h, 10**9 + i * 10**6, data)
        written.add(('/joint_states', 10**9 + i * 10**6, data))
        if i % 500 == 499:
            w.flush()  # one chunk per 500 messages; never closed: what a SIGKILL leaves
    data = bytearray(_file(bag).read_bytes())
    # the chunk holding message 1000 (the writer also closes a chunk every flush_period_s, so
    # on a loaded host a 500-message run can span more than one: 10 chunks instead of 6 seen)
    t_1000 = 10**9 + 1000 * 10**6
    (a, b, start, end), = [(a, b, *struct.unpack_from('<QQ', data, a + 9))
                           for a, b, _crc in _chunks(bytes(data))
                           if struct.unpack_from('<Q', data, a + 9)[0] <= t_1000
                           <= struct.unpack_from('<Q', data, a + 17)[0]]
    in_chunk = {m for m in written if start <= m[1] <= end}
    assert len(in_chunk) == (end - start) // 10**6 + 1
    data[(a + b) // 2] ^= 0x20
    _file(bag).write_bytes(data)
    assert main(['bag', 'repair', str(bag)]) == 0
    out = capsys.readouterr().out.splitlines()
    after = _messages(bag)
    assert set(after) == written - in_chunk
    assert out[1] == (f'  killed_0.mcap: lost 1 damaged chunk(s): chunk at bytes {a}-{b} '
                      f'(log time {start}-{end} ns)')


def test_corrupt_bag_is_salvaged_and_the_loss_named(tmp_path, capsys):
    bag = tmp_path / 'ep'
    make_episode_bag(bag, seconds=20)
    before = _messages(bag)
    data = bytearray(_file(bag).read_bytes())
    a, b, _crc = _chunks(bytes(data))[2]
    data[(a + b) // 2] ^= 0xFF
    _file(bag).write_bytes(data)
    assert main(['bag', 'repair', str(bag)]) == 0
    out = capsys.readouterr().out.splitlines()
    after = _messages(bag)
    lost = len(before) - len(after)
    assert lost > 0
    assert out[0] == (f'salvaged {bag}: {len(after)} messages readable in 1 file(s), '
                      f'{lost} lost')
    assert out[1].startswith(f'  {bag.name}_0.mcap: {lost} of {len(before)} messages lost; '
                             f'lost 1 chunk(s): chunk 3 (log time ')
    assert set(after) < set(before)
    assert (bag / f'{bag.name}_0.mcap.damaged').read_bytes() == bytes(data)
    assert main(['check', str(bag)]) == 1  # readable again; the gap is a failed check
    with _file(bag).open('rb') as f:
        assert sum(1 for _ in make_reader(f, validate_crcs=True).iter_messages()) == len(after)


def test_truncated_finished_bag_keeps_its_intact_first_half(tmp_path, capsys):
    bag = tmp_path / 'ep'
    make_episode_bag(bag, seconds=20)
    before = _messages(bag)
    data = _file(bag).read_bytes()
    a, b, _crc = _chunks(data)[2]
    cut = (a + b) // 2  # inside the third chunk (not at half the file: that moves with the
    _file(bag).write_bytes(data[:cut])  # size of the custom_data the bag carries)
    assert main(['bag', 'info', str(bag)]) == EXIT_CORRUPT_INPUT
    assert 'has no valid end (truncated' in capsys.readouterr().err
    r = repair_bag(bag)
    after = _messages(bag)
    intact = [c for c in _chunks(data) if c[1] <= cut]
    assert len(intact) == 2
    assert r.message_count == len(after)
    assert r.lost_messages == len(before) - len(after)
    assert after == before[:len(after)]
    assert 'everything after log time' in r.lost[0]


def test_zstd_split_bag_salvages_only_the_damaged_file(tmp_path):
    bag = write_bag(tmp_path / 'bag', n=40000, compression='zstd', split_duration_s=20.0)
    files = sorted(bag.glob('*.mcap'))
    assert len(files) == 2
    before = _messages(bag)
    data = bytearray(files[0].read_bytes())
    chunks = _chunks(bytes(data))
    a, b, _crc = chunks[len(chunks) // 2]
    data[(a + b) // 2] ^= 0x04  # inside the compressed bytes: the chunk does not decompress
    files[0].write_bytes(data)  # or decompresses to bytes that fail its CRC
    second = files[1].read_bytes()
    with pytest.raises(BagCorruptError, match=f'{files[0].name}: chunk '):
        BagReader(bag)
    r = repair_bag(bag)
    after = _messages(bag)
    assert r.lost_messages == len(before) - len(after)
    assert r.lost_messages > 0
    assert set(after) < set(before)
    assert files[1].read_bytes() == second
    assert sorted(p.name for p in bag.glob('*.damaged')) == [files[0].name + '.damaged']


def test_bags_without_crcs_still_open(tmp_path):
    """Bags written before the CRCs (rosbags' own writer leaves them 0) read as before."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore
    ts = get_typestore(Stores.ROS2_KILTED)
    with Writer(tmp_path / 'old', version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = w.add_connection('/s', 'std_msgs/msg/String', typestore=ts)
        for i in range(3000):
            w.write(c, 10**9 + i, bytes(ts.serialize_cdr(
                ts.types['std_msgs/msg/String'](f'm{i}'), 'std_msgs/msg/String')))
    mcap_file = next((tmp_path / 'old').glob('*.mcap'))
    assert {crc for _a, _b, crc in _chunks(mcap_file.read_bytes())} == {0}
    with BagReader(tmp_path / 'old') as r:
        assert [r.deserialize(m).data for m in r.messages()][-1] == 'm2999'


def test_a_damaged_chunk_size_is_named_not_allocated(tmp_path, capsys):
    bag = write_bag(tmp_path / 'bag', n=20000, compression='zstd')
    before = _messages(bag)
    data = bytearray(_file(bag).read_bytes())
    a, _b, _crc = _chunks(bytes(data))[1]
    struct.pack_into('<Q', data, a + 9 + 16, 2**62)  # uncompressed_size
    _file(bag).write_bytes(data)
    assert main(['bag', 'info', str(bag)]) == EXIT_CORRUPT_INPUT
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert f'chunk 2 of {len(_chunks(bytes(data)))} (bytes {a}-' in err
    assert f'declares {2**62} bytes (damaged header)' in err
    r = repair_bag(bag)
    assert r.lost_messages > 0
    assert set(_messages(bag)) < set(before)


def test_salvage_with_a_damaged_metadata_yaml_is_one_line(tmp_path, capsys):
    bag = write_bag(tmp_path / 'bag', n=2000)
    data = bytearray(_file(bag).read_bytes())
    data[len(data) // 2] ^= 0x01
    _file(bag).write_bytes(data)
    meta = (bag / 'metadata.yaml').read_text(encoding='utf-8')
    (bag / 'metadata.yaml').write_text(meta.replace('topic_metadata:', 'topic_metadat:'),
                                       encoding='utf-8')
    assert main(['bag', 'repair', str(bag)]) == EXIT_CORRUPT_INPUT
    err = capsys.readouterr().err
    assert err == (f'simreal bag: error: {bag / "metadata.yaml"} is damaged (KeyError); '
                   f'simreal cannot salvage a bag without it\n')
    assert _file(bag).read_bytes() == bytes(data)  # nothing was changed


def test_summary_damage_is_detected(tmp_path):
    bag = write_bag(tmp_path / 'bag', n=2000)
    data = bytearray(_file(bag).read_bytes())
    data[len(data) - 8 - 29 - 20] ^= 0x10  # inside the summary section
    _file(bag).write_bytes(data)
    with pytest.raises(BagCorruptError, match='summary .* fails its CRC'):
        BagReader(bag)


#: every simreal command that reads a bag; BAG and DIR are filled in per case
COMMANDS = [
    ['check', 'BAG'],
    ['gap', 'BAG', '--out', 'DIR/gap', '--quiet'],
    ['bag', 'info', 'BAG'],
    ['sysid', 'validate', 'BAG'],
    ['sysid', 'BAG', '--out', 'DIR/fit.yaml', '--quiet', '--holdout', '0.1'],
    ['residual', 'fit', 'BAG', '--overlay', 'DIR/overlay.yaml', '--out', 'DIR/r.pt', '--quiet'],
    ['export', 'BAG', '--out', 'DIR/lerobot', '--all', '--state-topic', '/sim_a/joint_states'],
]


def test_fuzz_truncations_and_flips_are_detected_by_every_command_and_salvaged(
        tmp_path, capsys):
    """Seeded damage: never a traceback, never a silent change, salvage keeps only originals."""
    rng = random.Random(20261205)
    master = tmp_path / 'master' / 'ep'
    master.parent.mkdir()
    make_episode_bag(master, seconds=8)
    (master.parent / 'overlay.yaml').write_text('robot: simreal_arm\n', encoding='utf-8')
    original = _file(master).read_bytes()
    before = set(_messages(master))
    cases: list[tuple[str, bytes]] = []
    for _ in range(10):
        cut = rng.randrange(1, len(original))
        cases.append((f'truncated to {cut} bytes', original[:cut]))
    for _ in range(16):
        data = bytearray(original)
        at = rng.randrange(len(data))
        data[at] ^= rng.randrange(1, 256)
        cases.append((f'byte {at} flipped', bytes(data)))
    for _ in range(4):
        data = bytearray(original)
        at = rng.randrange(len(data) - 64)
        for i in range(64):
            data[at + i] ^= rng.randrange(1, 256)
        cases.append((f'64 bytes from {at} flipped', bytes(data)))
    assert len(cases) == 30
    for k, (what, data) in enumerate(cases):
        case = tmp_path / f'case{k}'
        shutil.copytree(master.parent, case)
        bag = case / 'ep'
        _file(bag).write_bytes(data)
        for cmd in COMMANDS:
            argv = [a.replace('BAG', str(bag)).replace('DIR', str(case)) for a in cmd]
            rc = main(argv)
            out, err = capsys.readouterr()
            assert 'Traceback' not in out + err, (what, cmd)
            assert rc == EXIT_CORRUPT_INPUT, (what, cmd, err)
            lines = [line for line in err.splitlines() if 'error:' in line]
            assert len(lines) == 1, (what, cmd, err)
            assert str(_file(bag)) in lines[0] or f'the bag {bag}' in lines[0], (what, err)
        r = repair_bag(bag)
        after = _messages(bag)
        assert set(after) <= before, what  # nothing salvaged is changed
        assert r.message_count + r.lost_messages == len(before), what
        assert main(['bag', 'info', str(bag)]) == 0, what
        capsys.readouterr()
