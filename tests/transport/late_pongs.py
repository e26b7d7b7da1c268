"""Late pongs from the emulator, as the live service sends them (8-30 s after the ping).

The emulator's pongs are websockets' own, written the moment a ping is read. Until the
emulator has a switch for their latency, :func:`late_pongs` delays them the smallest way: each
emulator connection's protocol holds a pong back ``delay`` seconds (or for ever) before
writing it, behind the emulator's simulated network like every other frame.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from realtime_resumption.emulator import server as emulator_server


class Pings:
    """How many pings the emulator's connections received."""

    def __init__(self) -> None:
        self.count = 0


def late_pongs(monkeypatch: pytest.MonkeyPatch, delay: float | None) -> Pings:
    """Emulators started from now on (in this test) answer pings ``delay`` seconds late;
    None: never. Returns the count of pings they received."""
    pings = Pings()
    plain = emulator_server.connection_class

    def connection_class(one_way: float) -> type[ServerConnection]:
        class LatePongs(plain(one_way)):  # type: ignore[misc]
            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                self._late: set[asyncio.TimerHandle] = set()
                protocol = self.protocol
                send_frame = protocol.send_frame

                def pong(frame: Frame, timer: list[asyncio.TimerHandle]) -> None:
                    self._late.discard(timer[0])
                    if protocol.state is State.OPEN:
                        send_frame(frame)
                        self.send_data()

                def hold_pongs(frame: Frame) -> None:
                    if frame.opcode is not Opcode.PONG:
                        send_frame(frame)
                        return
                    pings.count += 1
                    if delay is not None:
                        timer: list[asyncio.TimerHandle] = []
                        timer.append(self.loop.call_later(delay, pong, frame, timer))
                        self._late.add(timer[0])

                protocol.send_frame = hold_pongs  # type: ignore[method-assign]

            def connection_lost(self, exc: Exception | None) -> None:
                for timer in self._late:
                    timer.cancel()
                self._late.clear()
                super().connection_lost(exc)

        return LatePongs

    monkeypatch.setattr(emulator_server, "connection_class", connection_class)
    return pings
