"""PublisherGaps: messages a publisher sent that never arrived, from DDS sequence numbers."""

from simreal_ros.ros.publisher_gaps import PublisherGaps


def info(seq: int, gid: int | None = None) -> dict:
    out: dict = {'publication_sequence_number': seq}
    if gid is not None:
        out['publisher_gid'] = {'data': [gid] * 16}
    return out


def test_gaps_of_each_publisher_are_counted_apart():
    g = PublisherGaps()
    got = [g.count(info(s, 1), single_writer=False) for s in (1, 2, 5, 6)]
    got += [g.count(info(s, 2), single_writer=False) for s in (1, 3)]
    assert got == [0, 0, 2, 0, 0, 1]
    assert (g.missed, g.unattributed) == (3, 0)


def test_without_a_gid_only_a_lone_publisher_is_counted():
    g = PublisherGaps()
    assert [g.count(info(s), single_writer=True) for s in (1, 4)] == [0, 2]
    assert g.count(info(9), single_writer=False) == 0       # two publishers: not attributable
    assert g.count(info(11), single_writer=True) == 0       # numbering restarts after that
    assert g.count(info(13), single_writer=True) == 1
    assert (g.missed, g.unattributed) == (3, 1)


def test_a_message_without_a_sequence_number_is_unattributed():
    g = PublisherGaps()
    assert g.count({}, single_writer=True) == 0 and g.count(None, single_writer=True) == 0
    assert (g.missed, g.unattributed) == (0, 2)
