"""``generate_reply`` has one outcome, a reply or an error: a request made while the session
moves waits for the new connection, and its timeout runs from then."""

from __future__ import annotations

import logging

import pytest
from livekit.agents import Agent
from livekit.plugins import realtime_resumption as rr
from livekit.plugins.realtime_resumption.gemini import session as rr_session

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import text_call, until

SCALE = 0.25
TIMEOUT = 1.0
"""``GENERATE_REPLY_TIMEOUT`` for these tests (5 s in use), against setups of 1.5 s: the
same proportions as the reported 6 s "reconnect penalty" against LiveKit's 5 s."""


async def test_a_reply_asked_for_during_a_slow_move_is_answered_once_and_never_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rr_session, "GENERATE_REPLY_TIMEOUT", TIMEOUT)
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        model = rr.RealtimeModel(api_key="k", http_options=emu.http_options())
        agent = Agent(instructions="Be brief.")
        async with text_call(model, agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            await until(lambda: agent.realtime_llm_session.session_resumption_handle is not None)  # type: ignore[attr-defined]
            emu.faults.slow_setups(1, 6.0)  # 1.5 s at this scale
            emu.faults.drop()
            with caplog.at_level(logging.ERROR, logger="livekit.agents"):
                handle = session.generate_reply(instructions="say hi")
                await handle.wait_for_playout()
                await until(lambda: len(recorder.moves) == 1)
    assert [r.getMessage() for r in caplog.records if "generate a reply" in r.getMessage()] == []
    assistant = [
        item
        for item in session.history.items
        if item.type == "message" and item.role == "assistant"
    ]
    assert len(assistant) == 2
    assert recorder.moves[0].report.gap_ms > TIMEOUT * 1000
    assert recorder.fatal_errors == []
