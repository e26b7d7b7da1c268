"""``disconnect`` and ``abort_incumbent`` at any moment of a move leave nothing running: no
task, no socket, no timer; the move still ends with exactly one outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator

from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import Recorder, emulator_config, make_transport

SLOW_RETRIES = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 30.0), attempt_timeout=2)


async def _dialling(emu: Emulator, transport: GeminiLiveTransport, rec: Recorder) -> None:
    """A planned move whose replacement never completes its setup."""
    emu.faults.hang_next(1)
    emu.faults.go_away(60.0)
    await rec.wait(lambda r: len(r.lifecycle("attempt")) == 2)


async def _waiting_to_retry(emu: Emulator, transport: GeminiLiveTransport, rec: Recorder) -> None:
    """A lost connection whose first attempt was refused; the next one is 30 s away."""
    emu.faults.refuse_next(1)
    emu.faults.drop()
    await rec.wait(lambda r: len(r.lifecycle("setup-failed")) == 1)


async def _between_break_and_make(
    emu: Emulator, transport: GeminiLiveTransport, rec: Recorder
) -> None:
    """The resume was refused while the old connection was open (the service's terms): it is
    closed, and the second dial (its socket opened before that close, its setup sent after
    it) hangs."""
    emu.faults.go_away(60.0)
    await rec.wait(lambda r: len(r.lifecycle("setup-failed")) == 1)
    emu.faults.hang_next(1)
    await rec.wait(
        lambda r: len(r.lifecycle("attempt")) == 3 and len(r.lifecycle("generation-close")) == 1
    )


Phase = Callable[[Emulator, GeminiLiveTransport, Recorder], Awaitable[None]]


@pytest.mark.parametrize("phase", [_dialling, _waiting_to_retry, _between_break_and_make])
@pytest.mark.parametrize("abort", [False, True])
async def test_nothing_outlives_a_disconnect_or_an_abort_during_a_move(
    phase: Phase, abort: bool
) -> None:
    baseline = asyncio.all_tasks()
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, resumption=SLOW_RETRIES, setup_timeout=5)
        rec = await connected_and_answered(transport)
        await phase(emu, transport, rec)
        assert transport.moving
        started = asyncio.get_running_loop().time()
        if abort:
            assert await transport.abort_incumbent() == "closed"
            events = len(rec.events)
        await transport.disconnect()
        assert asyncio.get_running_loop().time() - started < 2.0
        await emu.wait_disconnected()
        await asyncio.sleep(0)
        assert asyncio.all_tasks() - baseline == set()
        if abort:
            assert len(rec.events) == events  # nothing after the abort
    (move,) = rec.moves
    assert move.outcome is MoveOutcome.LOST
    assert move.error is not None
    assert rec.count("on_close") == (0 if abort else 1)
    assert rec.count("on_error") == 0
    assert not transport.is_connected and not transport.moving


async def test_nothing_outlives_a_disconnect_while_a_new_connection_settles() -> None:
    baseline = asyncio.all_tasks()
    async with Emulator(emulator_config("gemini")) as emu:
        emu.faults.dead_after_resume(first_update=False)
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        await emu.faults.go_away()
        # The replacement is set up but says nothing: the move waits for it to settle.
        await rec.wait(lambda r: len(r.lifecycle("setup-ok")) == 2)
        assert transport.moving
        await transport.disconnect()
        await emu.wait_disconnected()
        await asyncio.sleep(0)
        assert asyncio.all_tasks() - baseline == set()
    (move,) = rec.moves
    assert move.outcome is MoveOutcome.LOST
    assert rec.count("on_close") == 1
