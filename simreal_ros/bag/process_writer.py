"""A :class:`~simreal_ros.bag.writer.BagWriter` in a child process.

The recorder's take thread needs the GIL for every message it takes from DDS, and a
writer thread in the same process that builds MCAP records takes the GIL from it; a writer
process avoids that. (The 0.9-3 s the recorder once fell behind a 640x480 30 Hz image stream
next to four 1 kHz topics was DDS, not the GIL: see :mod:`simreal_ros.ros.image_participant`.)
:class:`ProcessBagWriter` has the writer's
interface (``add_topic``, ``write``, ``flush_due``, ``flush``, ``update_custom``, ``close``,
``custom``, ``bytes_in``, ``path``) but ``write`` only appends to a batch; ``flush`` sends the
batch through a pipe (one pickle, one ``send``: the copy and the system call release the GIL)
to a spawned process that owns the real writer. On the loaded 2-core machine it measured no
better than the thread (docs/recording.md, Benchmark), so the recorder uses it only with
``writer_process:=true``. Crash safety is the writer's own: the child flushes the
storage after every batch, and a parent that dies leaves the child reading EOF, which closes
the bag.

The child ignores SIGINT (a terminal's Ctrl-C reaches the whole process group): the bag is
closed when the parent says so, after the last batch. An error in the child (disk full) comes
back as :class:`~simreal_ros.errors.BagError` from the next call.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path
import signal
import time
from typing import Any, Mapping, Sequence

from simreal_ros.bag.options import BagOptions, QosSpec
from simreal_ros.errors import BagError, SimrealError

#: A batch is sent when this many bytes wait, even before the flush period.
BATCH_BYTES = 8_000_000


def _serve(conn: Connection, path: str, options: BagOptions, custom: dict[str, str]) -> None:
    """Run the child: own a BagWriter, apply the parent's requests until 'close' or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from simreal_ros.bag.writer import BagWriter
    try:
        writer = BagWriter(path, options, custom)
    except (SimrealError, OSError) as exc:
        conn.send(('error', str(exc)))
        return
    conn.send(('ok', str(writer.path)))
    try:
        while True:
            try:
                req = conn.recv()
            except EOFError:
                break
            kind = req[0]
            if kind == 'topic':
                conn.send(('ok', writer.add_topic(req[1], req[2], req[3])))
            elif kind == 'write':
                if req[2] is not None:
                    writer.update_custom(req[2])
                for handle, stamp, data in req[1]:
                    writer.write(handle, stamp, data)
                writer.flush()
            elif kind == 'close':
                writer.custom = req[1]
                break
    except (SimrealError, OSError) as exc:
        conn.send(('error', str(exc)))
    finally:
        writer.close()
    conn.send(('closed', writer.message_count))


class ProcessBagWriter:
    """The BagWriter interface, writing in a child process (see the module docstring)."""

    def __init__(self, path: str | Path, options: BagOptions | None = None,
                 custom_data: Mapping[str, str] | None = None) -> None:
        self.options = options or BagOptions()
        self.custom = {str(k): str(v) for k, v in (custom_data or {}).items()}
        self._sent_custom = dict(self.custom)
        ctx = multiprocessing.get_context('spawn')
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, name='bag_writer', daemon=True,
                                 args=(child, str(Path(path).expanduser()), self.options,
                                       dict(self.custom)))
        self._proc.start()
        child.close()
        self.path = Path(self._reply())
        self._batch: list[tuple[int, int, bytes]] = []
        self._batch_bytes = 0
        self._last_flush = time.monotonic()
        self.bytes_in = 0
        self.closed = False

    def _reply(self) -> Any:
        try:
            kind, value = self._conn.recv()
        except (EOFError, OSError):
            raise BagError('the bag writer process ended unexpectedly') from None
        if kind == 'error':
            raise BagError(value)
        return value

    def _send(self, req: tuple[Any, ...]) -> None:
        if self._conn.poll():  # the child only speaks unasked to report an error
            self._reply()
        try:
            self._conn.send(req)
        except (BrokenPipeError, OSError):
            raise BagError('the bag writer process ended unexpectedly') from None

    def add_topic(self, name: str, msgtype: str, qos: Sequence[QosSpec] = ()) -> int:
        """Register a topic in the child's writer; returns its handle."""
        self.flush()
        self._send(('topic', name, msgtype, list(qos)))
        return int(self._reply())

    def write(self, handle: int, timestamp_ns: int, data: bytes | memoryview) -> None:
        """Queue one message for the next batch."""
        self._batch.append((handle, timestamp_ns, bytes(data)))
        self._batch_bytes += len(data)
        self.bytes_in += len(data)
        if self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def update_custom(self, values: Mapping[str, str]) -> None:
        """Add or change ``custom_data`` entries (in the child's side-car after the next flush)."""
        self.custom.update({str(k): str(v) for k, v in values.items()})

    def flush_due(self) -> bool:
        """Whether a flush period has passed since the last batch was sent."""
        return time.monotonic() - self._last_flush >= self.options.flush_period_s

    def flush(self) -> None:
        """Send the batch (and changed custom data) to the child, which writes and flushes."""
        self._last_flush = time.monotonic()
        changed = self.custom if self.custom != self._sent_custom else None
        if not self._batch and changed is None:
            return
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        self._send(('write', batch, dict(changed) if changed is not None else None))
        self._sent_custom = dict(self.custom)

    def close(self) -> None:
        """Write what is left, close the bag in the child and wait for it; idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            self.flush()
            self._send(('close', dict(self.custom)))
            while True:
                kind, value = self._conn.recv()
                if kind == 'error':
                    raise BagError(value)
                if kind == 'closed':
                    break
        except (EOFError, OSError):
            raise BagError('the bag writer process ended before closing the bag') from None
        finally:
            self._proc.join(timeout=30)
            self._conn.close()
