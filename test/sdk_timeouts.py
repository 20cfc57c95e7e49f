"""The vendor SDKs' packet timeout in tests: one fixture maker for every bus test module.

dynamixel_sdk and scservo_sdk time a reply out after ``LATENCY_TIMER`` (a module global, the
USB adapter's latency in ms) plus the bytes' time, twice over: about ``2 * LATENCY_TIMER`` ms
(34 ms at the default 16). On this shared 2-core test machine the emulator's reply missed that
when the other core was busy, so a test module picks a longer one; the SDK returns as soon as
the reply is in, so a longer timeout costs nothing when the emulator answers. A bus opened in
a test sets the global from its own ``latency_timer_ms``; the fixture restores the value the
module found either way.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Iterator

import pytest


def sdk_latency_timer(sdk_port: ModuleType, ms: int | None,
                      scope: str = 'function') -> Callable[[], Iterator[None]]:
    """An autouse fixture setting ``sdk_port.LATENCY_TIMER`` to ``ms`` (None: leave it) for
    each test (``scope='module'``: for the module's module-scoped fixtures too), restored
    after it."""
    @pytest.fixture(scope=scope, autouse=True)  # type: ignore[misc]
    def patient_timeouts() -> Iterator[None]:
        old = sdk_port.LATENCY_TIMER
        if ms is not None:
            sdk_port.LATENCY_TIMER = ms
        yield
        sdk_port.LATENCY_TIMER = old
    return patient_timeouts
