"""The plugin's shipped bounds, measured on loop time (looptime, with the emulator in the same
loop): ``GENERATE_REPLY_TIMEOUT`` (5 s) and ``UPDATE_TIMEOUT`` (10 s), each against a service
that never answers. The other tests shorten both; these hold the values the README promises."""

from __future__ import annotations

import asyncio
import logging

import pytest
from livekit.agents import APIConnectOptions, llm
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import Recorder, until

pytestmark = pytest.mark.looptime

BOUND = 120.0
"""Loop-time bound of each wait: beyond any bound under test, so a wrong one shows as a wrong
time, not as a hang."""


def _watched(model: rr.RealtimeModel) -> tuple[llm.RealtimeSession, Recorder, list[float]]:
    """A session of ``model``, its events recorded, and the loop times its moves ended."""
    rt = model.session()
    recorder = Recorder()
    recorder.attach_realtime(rt)
    moved_at: list[float] = []
    loop = asyncio.get_running_loop()
    rt.on("session_moved", lambda _: moved_at.append(loop.time()))
    return rt, recorder, moved_at


async def _answered(rt: llm.RealtimeSession) -> None:
    """One reply, to its end, then its resumable handle: the session can move."""
    generation = await asyncio.wait_for(rt.generate_reply(), BOUND)
    async for message in generation.message_stream:
        async for _ in message.audio_stream:
            pass
    await until(lambda: rt.session_resumption_handle is not None, BOUND)  # type: ignore[attr-defined]


async def test_a_reply_the_service_never_begins_fails_5_s_after_the_move_it_waited_for() -> None:
    loop = asyncio.get_running_loop()
    async with Emulator(EmulatorConfig()) as emu:
        model = rr.RealtimeModel(api_key="k", http_options=emu.http_options())
        rt, recorder, moved_at = _watched(model)
        try:
            await _answered(rt)
            # The connection drops; its resume takes 6 s (longer than the bound) and lands
            # on a connection that never answers.
            emu.faults.slow_setups(1, 6.0)
            emu.faults.dead_after_resume(1)
            emu.faults.drop()
            (record,) = emu.ledger.sessions.values()
            await until(lambda: len(record.connections) == 2, BOUND)
            asked = loop.time()
            with pytest.raises(llm.RealtimeError):
                await asyncio.wait_for(rt.generate_reply(), BOUND)
            failed = loop.time()
        finally:
            await rt.aclose()
    (moved,) = moved_at
    assert moved - asked == pytest.approx(6.0, abs=0.1)
    assert failed - moved == pytest.approx(5.0, abs=0.01)
    assert [m.report.outcome for m in recorder.moves] == [MoveOutcome.RESUMED]


async def test_an_update_whose_setup_never_completes_returns_after_10_s_and_the_move_still_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    async with Emulator(EmulatorConfig()) as emu:
        # Each attempt may take 25 s, so the hung one outlasts the update's bound.
        model = rr.RealtimeModel(
            api_key="k",
            http_options=emu.http_options(),
            conn_options=APIConnectOptions(timeout=25.0),
            resumption=ResumptionOptions(attempt_timeout=25.0),
        )
        rt, recorder, moved_at = _watched(model)
        try:
            await _answered(rt)
            emu.faults.hang_next(1)  # the new setup never completes
            asked = loop.time()
            with caplog.at_level(logging.WARNING, logger="livekit.plugins.realtime_resumption"):
                await asyncio.wait_for(rt.update_instructions("New instructions."), BOUND)
            returned = loop.time()
            assert recorder.moves == []
            await until(lambda: len(recorder.moves) == 1, BOUND)
        finally:
            await rt.aclose()
    assert returned - asked == pytest.approx(10.0, abs=0.01)
    (warning,) = [r for r in caplog.records if "new setup is not live" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    (report,) = [m.report for m in recorder.moves]
    assert (report.reason, report.outcome) == (MoveReason.CONFIG, MoveOutcome.RESUMED)
    assert moved_at[0] - asked > 25.0
    (record,) = emu.ledger.sessions.values()
    last = record.connections[-1].setup
    assert last is not None and last.system_instruction == "New instructions."
