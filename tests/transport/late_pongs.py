"""Counting the pings an emulator answers late (its ``pong_latency``), so a test can show the
client's keepalive really ran against the late pongs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from websockets.asyncio.server import ServerConnection

from realtime_resumption.testing.emulator import listener as emulator_listener


class Pings:
    """How many pings the emulator's connections received."""

    def __init__(self) -> None:
        self.count = 0


def count_pings(monkeypatch: pytest.MonkeyPatch) -> Pings:
    """Count the pings of emulators started from now on (in this test) whose pongs come late
    (``EmulatorConfig.pong_latency`` above 0): each one draws a pong delay."""
    pings = Pings()
    plain = emulator_listener.connection_class

    def connection_class(
        one_way: float, pong_delay: Callable[[], float] | None = None
    ) -> type[ServerConnection]:
        if pong_delay is None:
            return plain(one_way, None)
        delay = pong_delay

        def counted() -> float:
            pings.count += 1
            return delay()

        return plain(one_way, counted)

    monkeypatch.setattr(emulator_listener, "connection_class", connection_class)
    return pings
