"""A ``disconnect()`` whose caller is cancelled, at any moment from the task's creation on,
still closes the socket and ends every task of the transport, within the close's bound. The
sweep: cancelled after 0 to 20 yields of the event loop, then after 1 to 50 ms; each timing on
a session answering (its socket busy, its receive and write tasks running), against the
emulator's own count of its open connections."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import ContentTurn

from .transport_helpers import Recorder, emulator_config, make_transport

YIELDS = tuple(range(21))
DELAYS = (0.001, 0.005, 0.01, 0.02, 0.05)
SETTLE_BOUND = 5.0
"""Seconds the close gets, without its caller, to leave nothing open (the drain and a close
handshake at the emulator's round trip take milliseconds; the bound only ends a failing run)."""


def _transport_tasks() -> list[asyncio.Task[object]]:
    """The transport's tasks still running (its connections' and its own): every task it
    makes is named ``gemini-live-...``."""
    current = asyncio.current_task()
    return [
        task
        for task in asyncio.all_tasks()
        if task is not current and not task.done() and task.get_name().startswith("gemini-live")
    ]


def _open_connections(emu: Emulator) -> int:
    return sum(
        conn.closed_at is None
        for session in emu.ledger.sessions.values()
        for conn in session.connections
    )


async def _settled(emu: Emulator) -> None:
    """Wait, bounded, for the close to finish; the caller then asserts what is left."""
    with contextlib.suppress(TimeoutError):
        await emu.wait_disconnected(timeout=SETTLE_BOUND)
    running = _transport_tasks()
    if running:
        await asyncio.wait(running, timeout=SETTLE_BOUND)


async def _cancel_after(transport: GeminiLiveTransport, yields: int, delay: float) -> None:
    caller = asyncio.create_task(transport.disconnect())
    for _ in range(yields):
        await asyncio.sleep(0)
    if delay:
        await asyncio.sleep(delay)
    caller.cancel()
    await asyncio.wait({caller})


@pytest.mark.parametrize(
    ("yields", "delay"),
    [(n, 0.0) for n in YIELDS] + [(0, d) for d in DELAYS],
    ids=[f"yields-{n}" for n in YIELDS] + [f"{d * 1000:g}ms" for d in DELAYS],
)
async def test_a_disconnect_cancelled_at_any_moment_leaves_no_socket_and_no_task(
    yields: int, delay: float
) -> None:
    async with Emulator(emulator_config(answer_chunks=200)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_audio_output")
        assert _open_connections(emu) == 1 and _transport_tasks() != []

        await _cancel_after(transport, yields, delay)
        await _settled(emu)

        assert _open_connections(emu) == 0, "the socket stays open"
        assert _transport_tasks() == [], "a task of the transport keeps running"
        assert not transport.is_connected
        assert [args for name, args in rec.events if name == "on_close"] == [
            (1000, "closed by the client")
        ]
        # A later disconnect finds nothing left to do.
        await transport.disconnect()
        assert rec.count("on_close") == 1
        assert _transport_tasks() == []


def test_a_disconnect_made_before_its_loop_runs_closes_when_the_loop_runs_it() -> None:
    """``loop.run_until_complete(transport.disconnect())``: the coroutine is made where no loop
    runs, and the close begins when the loop runs it."""

    async def connect_and_answer() -> tuple[Emulator, GeminiLiveTransport, Recorder]:
        emu = Emulator(emulator_config())
        await emu.start()
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_generation_end")
        return emu, transport, rec

    loop = asyncio.new_event_loop()
    try:
        emu, transport, rec = loop.run_until_complete(connect_and_answer())
        try:
            loop.run_until_complete(transport.disconnect())
            loop.run_until_complete(_settled(emu))
            assert _open_connections(emu) == 0
            assert rec.of("on_close") == [(1000, "closed by the client")]
        finally:
            loop.run_until_complete(emu.stop())
    finally:
        loop.close()
