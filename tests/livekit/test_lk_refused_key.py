"""HTTP 403 end to end in a real AgentSession: a move's dial refused as the service refuses a key
that lost its permission ends the session at once, with one ``error`` event that is
``recoverable=False`` and says to check the key, and the AgentSession closes (README, LiveKit
and Limits)."""

from __future__ import annotations

from livekit.agents.voice.events import CloseReason
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import text_call, until


async def test_a_403_during_a_move_is_one_unrecoverable_error_that_says_to_check_the_key() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(api_key="emulator-key", http_options=emu.http_options())
        async with text_call(model) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            emu.faults.refuse_next(1, "http403")
            emu.faults.drop()
            await until(lambda: bool(recorder.closed))
            outcomes = [a.outcome for a in emu.ledger.attempts]

    assert outcomes[1:] == ["http403"], "one refused attempt, never retried"
    (error,) = recorder.errors
    assert not error.recoverable
    assert "HTTP 403" in str(error.error) and "check the API key" in str(error.error)
    assert [m.report.outcome for m in recorder.moves] == [MoveOutcome.LOST]
    assert recorder.reconnected == 0
    assert recorder.closed[0].reason is CloseReason.ERROR
