"""gemini-3.8-live through a real AgentSession: the connection's life ends with 1011
"Deadline expired" and no goAway while the user speaks, the resume after it is refused with
1007, and the session is rebuilt with the conversation so far and hears the whole question."""

from __future__ import annotations

from livekit.agents import Agent

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..ledger_checks import assert_rebuilt_after_the_deadline
from .lk_helpers import until, voice_call

SCALE = 0.25
CHUNKS = 10
CHUNK_INTERVAL = 0.2
"""As in ``test_lk_rotation``: an answer's handle comes well after the question's last words."""
CUT = ("and", "what", "about", "tomorrow")


async def test_a_deadline_close_then_1007_rebuilds_the_call_with_its_history() -> None:
    config = EmulatorConfig.model(
        "gemini-3.8-live", time_scale=SCALE, answer_chunks=CHUNKS, chunk_interval=CHUNK_INTERVAL
    )
    agent = Agent(instructions="You are helpful.")
    async with Emulator(config) as emu, voice_call(emu, agent, pace=SCALE) as call:
        mic, recorder = call.mic, call.recorder
        mic.say(["what", "is", "new"])
        await call.settled(messages=2)
        (old,) = emu.ledger.sessions.values()
        # The handle that follows the answer (the service issues none before it).
        await until(lambda: bool(old.handles))
        before = len(mic.spoken)
        mic.say(CUT, speech_chunks=12)
        # The connection's life ends in the middle of the question.
        await until(lambda: len(mic.spoken) >= before + 6)
        assert await emu.faults.deadline_close() == 1
        await until(lambda: len(recorder.moves) == 1)
        await call.settled(messages=4)
        cut_seqs = mic.spoken[before:]
        new = next(s for s in emu.ledger.sessions.values() if s is not old)
        await until(lambda: set(cut_seqs) <= set(new.audio_received))
        users = [m.text_content for m in call.messages("user")]
        closed_during_the_call = list(recorder.closed)

    (move,) = recorder.moves
    assert (move.report.reason, move.report.outcome) == (MoveReason.LOST, MoveOutcome.REBUILT)
    # The rebuilt session was seeded with the first question, and heard the whole second one.
    assert_rebuilt_after_the_deadline(old, new, "what is new")
    said = " ".join(CUT)
    assert [said in t.user_text for t in new.turns.values()] == [True]
    assert [t.outcome for t in new.turns.values()] == ["complete"]
    assert users[0] == "what is new" and said in " ".join(u or "" for u in users[1:])
    assert recorder.fatal_errors == []
    assert closed_during_the_call == []
