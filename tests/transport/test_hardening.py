"""A hostile caller and a hostile server, against the real SDK and the emulator: a cancelled
disconnect leaves nothing running, an oversized message is refused at the call or dropped
from the replay, tool results are checked at the call, a call without an id blocks nothing,
odd model audio stays whole samples, and a close reason never shows a secret."""

from __future__ import annotations

import asyncio

from realtime_resumption.emulator import Emulator
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.transport import ContentTurn

from .transport_helpers import Recorder, emulator_config, make_transport

HELLO = [ContentTurn("user", "hello there")]


def _transport_tasks(transport: GeminiLiveTransport) -> list[asyncio.Task[object]]:
    """The tasks of ``transport`` still running: its connections' and its own."""
    current = asyncio.current_task()
    return [
        task
        for task in asyncio.all_tasks()
        if task is not current and not task.done() and task.get_name().startswith("gemini-live")
    ]


async def test_a_cancelled_disconnect_still_closes_everything() -> None:
    async with Emulator(emulator_config(answer_chunks=200)) as emu:
        # From 1: a task cancelled before its first step never called disconnect at all.
        for steps in range(1, 12):
            transport = make_transport(emu)
            rec = Recorder(transport)
            await transport.connect()
            transport.send_content(HELLO)
            await rec.wait_for("on_audio_output")
            caller = asyncio.create_task(transport.disconnect())
            for _ in range(steps):
                await asyncio.sleep(0)
            caller.cancel()
            await asyncio.wait({caller})
            # The close goes on without the caller, within its bound.
            await emu.wait_disconnected(timeout=5)
            running = _transport_tasks(transport)
            if running:
                await asyncio.wait(running, timeout=5)
            assert _transport_tasks(transport) == [], steps
            assert not transport.is_connected
            assert rec.count("on_close") == 1, steps
            # A second disconnect is safe and changes nothing.
            await transport.disconnect()
            assert rec.count("on_close") == 1
            assert _transport_tasks(transport) == []
