"""A bound on a node's middleware teardown: a node whose DDS shutdown deadlocks still exits.

Why: Fast DDS 3.2 (under rmw_fastrtps on Kilted and Jazzy) can deadlock while a participant
removes a remote endpoint. Caught with gdb in a sim bridge stopped ~0.3 s after it started,
with the three other processes of its launch stopping at the same moment (2 of ~280
``sim2sim`` launches stopped that way with the other core busy): a receive thread holds the
discovery (PDP) lock while ``WriterProxy::stop`` waits in ``ResourceEvent::unregister_timer``
for the event thread, whose participant-announcement timer waits for that same lock; the main
thread, destroying a publisher, waits for the event thread too. The same cycle is reported
upstream (eProsima/Fast-DDS#6502, open). Nothing inside the process can undo it, and the
launcher's SIGINT and SIGTERM go unanswered: the deadlocked main thread holds the GIL
(``PyGILState_Check()`` is 1 at a breakpoint in ``rcl_publisher_fini``), so no Python code,
signal handlers and threads included, runs again.

So :func:`arm` starts a POSIX timer whose expiry calls ``_exit(code)`` on a thread of its own
(``SIGEV_THREAD``: C, no GIL), and ``faulthandler`` prints every thread's Python stack
:data:`STACKS_BEFORE_S` earlier, so the log says where the teardown was stuck. The node's own
work is finished by then (``close()``: threads joined, files flushed), so the exit code stays
the node's. Arm it only after that work: what it bounds is the middleware's part.

After a teardown that finished, :func:`exit_now` ends the process without the interpreter's
finalization and the C++ static destructors: a sim bridge stopped right after start-up died
of SIGSEGV there once in ~50 ``sim2sim`` launches with a test suite running next to them
(``faulthandler``: the only Python thread, the main one, had no frame left, and the crashing
thread was not a Python thread, so a middleware thread crashed while the process was
exiting), and in CI both bridges of such a launch exited with -11. Nothing a node owns is left
to finalize by then: ``close()`` joined its threads and closed its files.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import sys
from typing import NoReturn

#: How long the middleware teardown may take before the process exits anyway (s). A clean one
#: (``destroy_node()`` to the interpreter's exit handlers) took 21-43 ms here for a sim bridge
#: (two participants) and a state publisher, with the other core busy; the launcher escalates
#: to SIGTERM after 5 s.
TEARDOWN_LIMIT_S = 2.0
#: The stacks are printed this long before the exit (s).
STACKS_BEFORE_S = 0.3

_CLOCK_MONOTONIC = 1
_SIGEV_THREAD = 2


class _SigEvent(ctypes.Structure):
    """glibc's ``struct sigevent`` (64 bytes) with the ``SIGEV_THREAD`` members."""

    _fields_ = [('sigev_value', ctypes.c_void_p), ('sigev_signo', ctypes.c_int),
                ('sigev_notify', ctypes.c_int), ('function', ctypes.c_void_p),
                ('attribute', ctypes.c_void_p), ('_pad', ctypes.c_int * 8)]


class _TimeSpec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [('it_interval', _TimeSpec), ('it_value', _TimeSpec)]


_timer: ctypes.c_void_p | None = None


def arm(code: int, limit_s: float = TEARDOWN_LIMIT_S) -> bool:
    """Exit the process with ``code`` in ``limit_s`` seconds unless it has exited by then.

    Calling it again replaces the deadline and the code. Returns whether the timer runs; where
    the C library has no ``timer_create`` (not glibc), only the stacks are printed and the
    process is left to the launcher's escalation.
    """
    global _timer
    faulthandler.dump_traceback_later(max(limit_s - STACKS_BEFORE_S, 0.05), exit=False,
                                      file=sys.stderr)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime, delete = libc.timer_create, libc.timer_settime, libc.timer_delete
        exit_now = ctypes.cast(libc._exit, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return False
    if _timer is not None:  # a timer's sigevent (the code) is fixed at its creation
        delete(_timer)
        _timer = None
    event = _SigEvent(sigev_value=code, sigev_notify=_SIGEV_THREAD, function=exit_now)
    timer = ctypes.c_void_p()
    if create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return False
    _timer = timer
    whole = int(limit_s)
    spec = _ITimerSpec(it_value=_TimeSpec(whole, int(round((limit_s - whole) * 1e9))))
    return bool(settime(_timer, 0, ctypes.byref(spec), None) == 0)


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr and end the process with ``code``, finalizing nothing."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a reader that went away
            pass
    os._exit(code)
