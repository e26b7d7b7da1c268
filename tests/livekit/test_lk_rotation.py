"""Rotation through a real AgentSession: microphone audio in, real-time playout out, three
moves (a goAway during a tool call, a drop, a goAway mid-answer whose first attempt is
refused), checked against the emulator's ledger; and a drop while a tool call runs."""

from __future__ import annotations

from livekit.agents import Agent, AgentSession, function_tool
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, answer_text_ids

from ..ledger_checks import assert_nothing_said_lost
from .lk_helpers import Recorder, until, voice_call

SCALE = 0.25
"""Emulator time scale; the microphone streams at the same pace."""
CHUNKS = 10
CHUNK_INTERVAL = 0.2
"""Emulator seconds between answer chunks (50 ms scaled): an answer ends, and its handle comes,
more than the transport's arrival margin (at most 0.3 s, wall clock) after the question's
last words, as with the real service; a quicker one would have them replayed on resume."""
NOTICE = 30.0
"""goAway notice (emulator seconds): scaled, it leaves the answer time to finish first."""

calls: list[str] = []


@function_tool
async def lookup(what: str = "") -> str:
    """Look something up."""
    calls.append(what)
    return "found it"


async def test_three_moves_in_a_voice_call_cut_nothing_and_lose_no_audio() -> None:
    calls.clear()
    agent = Agent(instructions="You are helpful.", tools=[lookup])
    async with (
        Emulator(
            EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS, chunk_interval=CHUNK_INTERVAL)
        ) as emu,
        voice_call(emu, agent, pace=SCALE) as call,
    ):
        mic, recorder = call.mic, call.recorder
        # 1. goAway while the tool call is pending: the move waits for the answer.
        emu.faults.go_away_at(on_tool_call=True, time_left=NOTICE)
        mic.say(["please", "lookup", "flights"])
        await call.settled(messages=2)
        await until(lambda: len(recorder.moves) == 1)
        # 2. The connection drops while idle (once the one the move left has closed).
        (record,) = emu.ledger.sessions.values()
        await until(lambda: sum(1 for c in record.connections if c.closed_at is None) == 1)
        assert emu.faults.drop() == 1
        await until(lambda: len(recorder.moves) == 2)
        mic.say(["how", "are", "you"])
        await call.settled(messages=4)
        # 3. goAway mid-answer, and the first attempt of the move is refused.
        emu.faults.refuse_next(1)
        emu.faults.go_away_at(turn=2, chunk=3, time_left=NOTICE)
        mic.say(["tell", "me", "more"])
        await call.settled(messages=6)
        await until(lambda: len(recorder.moves) == 3)
        mic.say(["goodbye"])
        await call.settled(messages=8)

        # Every word reaches the service (a move may skip silence between them).
        spoken = list(mic.spoken)
        await until(lambda: set(spoken) <= set(record.audio_received))
        (summary,) = emu.ledger.summary().sessions.values()
        closed_during_the_call = list(recorder.closed)
        history = list(call.session.history.items)

    assert summary.answers_cut == ()
    assert_nothing_said_lost(summary)
    assert summary.stranded_tool_responses == ()
    assert [t.outcome for t in summary.turns] == ["complete"] * 4

    assert [m.report.reason for m in recorder.moves] == [
        MoveReason.PLANNED,
        MoveReason.LOST,
        MoveReason.PLANNED,
    ]
    assert all(m.report.outcome is MoveOutcome.RESUMED for m in recorder.moves)
    assert recorder.moves[2].report.attempts == 2
    assert recorder.reconnected == 3
    assert recorder.fatal_errors == []
    assert closed_during_the_call == []

    assert calls == [""]
    messages = [i for i in history if i.type == "message" and i.role == "assistant"]
    assert [answer_text_ids(m.text_content or "") for m in messages] == [
        [(turn, k) for k in range(CHUNKS)] for turn in range(4)
    ]
    assert not any(m.interrupted for m in messages)
    assert sorted(call.speaker.heard) == [(turn, k) for turn in range(4) for k in range(CHUNKS)]
    users = [i for i in history if i.type == "message" and i.role == "user"]
    assert [u.text_content for u in users] == [
        "please lookup flights",
        "how are you",
        "tell me more",
        "goodbye",
    ]
    tool_items = [i.type for i in history if i.type.startswith("function_call")]
    assert tool_items == ["function_call", "function_call_output"]

    finals = [t.transcript for t in recorder.transcripts if t.is_final]
    assert finals == [u.text_content for u in users]
    assert any(not t.is_final for t in recorder.transcripts)
    moved = [m for m in recorder.metrics if isinstance(m, rr.SessionMoveMetrics)]
    assert [m.request_id for m in moved] == ["move-1", "move-2", "move-3"]
    answers = [m for m in recorder.metrics if m.request_id and m not in moved]
    assert len(answers) == 4
    assert all(m.ttft >= 0 and m.input_tokens > 0 for m in answers)
    assert sum(m.output_tokens for m in answers) == 4 * CHUNKS


async def test_a_drop_during_a_tool_call_strands_nothing_and_the_question_is_answered() -> None:
    """The resumed session predates the call (Gemini issues no handle while a tool call is
    pending): the call's result is not sent to a session that never issued it (a recoverable
    ``error``), the question is replayed and the model asks for the tool again."""
    recorder = Recorder()
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:

        @function_tool
        async def search(what: str = "") -> str:
            """Search for something."""
            if not recorder.moves:
                assert emu.faults.drop() == 1
                await until(lambda: len(recorder.moves) == 1)
            return "found it"

        session = AgentSession(
            llm=rr.RealtimeModel(api_key="test-key", http_options=emu.http_options()),
            aec_warmup_duration=None,
        )
        agent = Agent(instructions="You are helpful.", tools=[search])
        await session.start(agent)
        recorder.attach_realtime(agent.realtime_llm_session)
        try:
            # A first turn, so the session has a handle from after a turn to resume from.
            await session.run(user_input="hello")
            result = await session.run(user_input="please search flights")
            result.expect.next_event().is_function_call(name="search")
            await session.run(user_input="thanks")
            history = list(session.history.items)
        finally:
            await session.aclose()
    # Which run LiveKit files the repeated call under depends on timing; the history does not.
    kinds = [
        item.type if item.type != "message" else f"{item.role}: {item.text_content}"
        for item in history
        if item.type in ("message", "function_call", "function_call_output")
    ]
    assert kinds[:3] == ["user: hello", "assistant: " + _answer(0), "user: please search flights"]
    assert kinds[3:] == [
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "assistant: " + _answer(2),
        "user: thanks",
        "assistant: " + _answer(3),
    ]
    (summary,) = emu.ledger.summary().sessions.values()
    assert summary.stranded_tool_responses == ()
    assert [(type(e.error).__name__, e.recoverable) for e in recorder.errors] == [
        ("ToolCallOrphanedError", True)
    ]
    assert [m.report.outcome for m in recorder.moves] == [MoveOutcome.RESUMED]
    assert recorder.reconnected == 1


def _answer(turn: int, chunks: int = 10) -> str:
    return "".join(f"[{turn}.{k}] " for k in range(chunks))
