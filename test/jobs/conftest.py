"""Fixtures of the evaluation tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def started_emulators(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every virtual servo bus an evaluation starts, in order (to check none leaks)."""
    from simreal_ros.hardware.emulator import virtual_bus
    started: list = []

    class Recorded(virtual_bus.EmulatorProcess):
        def start(self):  # type: ignore[no-untyped-def]
            started.append(self)
            return super().start()

    monkeypatch.setattr(virtual_bus, 'EmulatorProcess', Recorded)
    return started
