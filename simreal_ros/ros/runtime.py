"""Start-up and shutdown shared by every node's ``main()``."""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable, NoReturn, Sequence

from simreal_ros.core.netenv import apply_to_current_process
from simreal_ros.core.realtime import (
    RtSettings,
    ThreadRt,
    apply_to_current_thread,
    apply_to_threads,
    process_threads,
)
from simreal_ros.errors import SimrealError
from simreal_ros.ros import teardown

log = logging.getLogger('simreal_ros')

#: GIL switch interval of the nodes with a timing-critical thread next to the executor: with
#: Python's default 5 ms, the executor holding the GIL showed up as ~1.8 ms p99 jitter.
FAST_SWITCH_INTERVAL_S = 0.0002


def fast_thread_switching() -> None:
    """Let a timing-critical thread take the GIL from the executor within 0.2 ms."""
    sys.setswitchinterval(FAST_SWITCH_INTERVAL_S)


def start_rt(node: object, settings: RtSettings, thread: str, others: bool = True
             ) -> ThreadRt:
    """Apply ``settings`` to the calling thread and log the outcome on the node's logger.

    The first refusal for want of permission in the process is the node's one WARN (with how
    to grant it); other refusals are logged at INFO, pointing at it.

    With a priority and ``others``, every other thread of the process so far (the executor, the
    middleware's) goes to SCHED_FIFO one below, stored as ``node.rt_others``: a FIFO thread
    that needs the GIL waits for whichever thread holds it, and a holder on the default
    scheduler can be preempted by any CPU-bound process for milliseconds (priority
    inversion through the GIL). Measured with the policy loop under load: 50 Hz period error
    p99 2.98 ms with only the loop under FIFO, 0.41 ms with the rest one below.
    """
    result = apply_to_current_thread(settings, thread)
    log_rt(node, result)
    if others and settings.priority > 1 and result.applied:
        me = threading.get_native_id()
        tids = sorted(t for t in process_threads() if t != me)
        if tids:
            rest = apply_to_threads(RtSettings(settings.priority - 1, settings.cpus), tids,
                                    f'{thread}_others')
            log_rt(node, rest)
            node.rt_others = rest  # type: ignore[attr-defined]
    return result


def log_rt(node: object, result: ThreadRt) -> None:
    """Log what :func:`start_rt` (or ``apply_to_threads``) achieved."""
    logger = node.get_logger()  # type: ignore[attr-defined]
    asked = result.asked
    if result.warning:
        logger.warning(result.warning)
    elif result.errors:
        logger.info(f'{result.thread}: real-time settings not applied '
                    f'({"; ".join(result.errors)})')
    elif asked.enabled:
        logger.info(f'{result.thread} thread: {result.policy} priority {result.priority}, CPUs '
                    f'{",".join(map(str, result.cpus))}'
                    + (', memory locked' if result.memory_locked else ''))


#: Set by the SIGINT handler of :func:`note_stop_requests`; :func:`run_node` stops on it.
_STOP_REQUESTED = threading.Event()


def note_stop_requests() -> None:
    """Make SIGINT also set a flag that :func:`run_node` checks, then raise KeyboardInterrupt.

    A KeyboardInterrupt can be swallowed: raised in a callback whose exceptions Python only
    prints (seen: ``Exception ignored in: <function _get_module_lock.<locals>.cb>``, importlib's
    weakref callback during the imports of a start-up), in a finalizer, or in a pybind11 init
    whose ImportError an optional import drops. The stop request was then lost and the node spun
    on: 1 of 60 SIGINTs sent 0.3-1.5 s after a sim bridge's start on a loaded host (Jazzy), still
    spinning 10 s later. The flag outlives the exception. Called by ``node_main`` before
    anything is imported; rclpy's own handler, installed later, passes SIGINT on to this one.
    """
    def handler(signum: int, frame: object) -> None:
        _STOP_REQUESTED.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)


# The start of the RuntimeError of a take that a Ctrl-C interrupted (see run_node).
_TAKE_RACE = 'Unable to convert call argument'


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by a KeyboardInterrupt (a stop request) somewhere down its chain.

    A SIGINT that lands while a pybind11 extension initializes (``import mujoco`` during a
    node's start-up) does not surface as KeyboardInterrupt: the module init catches it and
    raises ``ImportError('initialization failed')`` from it. Seen once in CI: a launch test stopped
    the sim bridge while it imported MuJoCo (Jazzy).
    """
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _context_shuts_down(rclpy: Any, timeout_s: float) -> bool:
    """Whether rclpy's default context is shut down within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while rclpy.ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def run_node(factory: Callable[[], object], args: Sequence[str] | None = None,
             executor_factory: Callable[[], object] | None = None) -> NoReturn:
    """Create the node from ``factory`` and spin it until Ctrl-C, SIGTERM or a fatal error.

    Ends the process (:func:`~simreal_ros.ros.teardown.exit_now`: no interpreter finalization
    after the teardown) with its exit code: 0 on a requested shutdown or when the node
    finished its job (``node.finished`` set), 1 on a configuration error (one-line reason on
    stderr), 2 on any other failure; an exception it does not handle propagates instead.
    Nodes may define ``close()`` for cleanup and ``exit_code`` (a non-zero one that
    ``close()`` sets is the exit code of a run that had none). ``executor_factory`` replaces
    the default SingleThreadedExecutor.

    Only the errors a shutdown itself causes count as a clean stop: rclpy's
    ExternalShutdownException, KeyboardInterrupt, and an RCLError / InvalidHandle raised after
    the context was shut down (Ctrl-C or SIGTERM during start-up invalidates it under the
    node being built), an ImportError caused by a KeyboardInterrupt (:func:`interrupted`), and
    the pybind11 RuntimeError of a take that a Ctrl-C interrupted.
    Any other exception propagates (traceback, non-zero exit) even when it happens while
    shutting down, and one raised by ``close()`` or ``destroy_node()`` prints
    ``error: shutdown failed`` with its traceback and makes the exit code 2. After
    ``close()``, the middleware's teardown (``destroy_node()``, then the context's shutdown, and
    the interpreter's exit) gets :data:`~simreal_ros.ros.teardown.TEARDOWN_LIMIT_S`; past it,
    every thread's stack is printed and the process exits with the code it had
    (:mod:`simreal_ros.ros.teardown`). Nodes destroy their extra participants in
    ``destroy_node()``, within that bound.
    """
    apply_to_current_process()
    import rclpy
    from rclpy.exceptions import InvalidHandle
    from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
    from rclpy.impl.implementation_singleton import rclpy_implementation

    # Executor.__init__ sets the attribute its __del__ reads (_sigint_gc) last: a Ctrl-C that
    # lands in between (a KeyboardInterrupt, or an RCLError from a guard condition on the
    # context rclpy's handler just shut down) left a half-built executor whose finalizer printed
    # "Exception ignored ... AttributeError" with a traceback: seen once in 11 SIGINTs sent as a
    # camera driver logged its first line (Jazzy). A class-level default makes that a no-op.
    if not hasattr(Executor, '_sigint_gc'):
        Executor._sigint_gc = None

    rclpy.init(args=list(args) if args is not None else sys.argv)
    node = None
    code = 0
    try:
        node = factory()
        # Everything imported and built so far (rclpy, numpy, MuJoCo, torch: 5e4+ objects)
        # lives as long as the process. Left to the collector, a full collection scans it all
        # with the GIL held: 20-160 ms measured here under load, a stall of every timing
        # thread of the node. Frozen, later collections only scan what is new (~0 ms).
        gc.collect()
        gc.freeze()
        executor = (executor_factory or SingleThreadedExecutor)()
        executor.add_node(node)  # type: ignore[attr-defined]
        while rclpy.ok() and not getattr(node, 'finished', False) \
                and not _STOP_REQUESTED.is_set():
            executor.spin_once(timeout_sec=0.1)  # type: ignore[attr-defined]
        code = int(getattr(node, 'exit_code', 0))
    except (KeyboardInterrupt, ExternalShutdownException):
        code = int(getattr(node, 'exit_code', 0)) if node is not None else 0
    except SimrealError as exc:
        print(f'error: {exc}', file=sys.stderr, flush=True)
        code = 1
    except ImportError as exc:
        if not interrupted(exc):
            raise
        code = 0  # Ctrl-C/SIGTERM arrived while a C extension was being imported
    except (rclpy_implementation.RCLError, InvalidHandle):
        if rclpy.ok():
            raise
        code = 0  # Ctrl-C/SIGTERM arrived during start-up and invalidated the context
    except RuntimeError as exc:
        # A Ctrl-C that lands while a subscription's take_message() builds the Python message
        # surfaces as this pybind11 RuntimeError instead of a KeyboardInterrupt: 1 of 40 SIGINTs
        # of a state publisher fed at 1 kHz with one core busy, on Jazzy (rclpy 7.1.6) and on
        # Kilted (9.1.2) alike. rclpy's own signal handler then shuts the context down.
        if not (str(exc).startswith(_TAKE_RACE) and _context_shuts_down(rclpy, 1.0)):
            raise
        code = int(getattr(node, 'exit_code', 0)) if node is not None else 0
    finally:
        try:
            if node is not None:
                close = getattr(node, 'close', None)
                if callable(close):
                    close()
                    # a cleanup that failed (a driver that could not disable torque) says so
                    # in its exit code, set by close() itself
                    code = code or int(getattr(node, 'exit_code', 0))
                # the node's own work is done: what follows is the middleware's, which can
                # deadlock (see ros/teardown.py), so it is bounded
                teardown.arm(code)
                node.destroy_node()  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - reported; the exit code says it failed
            print(f'error: shutdown failed: {exc!r}\n{traceback.format_exc()}',
                  file=sys.stderr, flush=True)
            code = 2
            teardown.arm(code)
        finally:
            rclpy.try_shutdown()
    teardown.exit_now(code)
