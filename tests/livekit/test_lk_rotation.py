"""Rotation through a real AgentSession: microphone audio in, real-time playout out, three
moves (a goAway during a tool call, a drop, a goAway mid-answer whose first attempt is
refused), checked against the emulator's ledger."""

from __future__ import annotations

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.emulator import Emulator, EmulatorConfig, answer_text_ids
from realtime_resumption.moves import MoveOutcome, MoveReason

from .lk_helpers import Microphone, Recorder, Speaker, until

SCALE = 0.25
"""Emulator time scale; the microphone streams at the same pace."""
CHUNKS = 10
NOTICE = 30.0
"""goAway notice (emulator seconds): scaled, it leaves the answer time to finish first."""

calls: list[str] = []


@function_tool
async def lookup(what: str = "") -> str:
    """Look something up."""
    calls.append(what)
    return "found it"


def _assistant_messages(session: AgentSession) -> list[llm.ChatMessage]:
    return [
        item
        for item in session.history.items
        if item.type == "message" and item.role == "assistant"
    ]


async def test_three_moves_in_a_voice_call_cut_nothing_and_lose_no_audio() -> None:
    """The AgentSession runs with ``aec_warmup_duration=None``: during its echo-cancellation
    warmup LiveKit replaces the caller's audio with silence by design, which would hide the
    microphone's frame numbers from the ledger (it is no loss of ours)."""
    calls.clear()
    async with Emulator(EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS)) as emu:
        mic = Microphone(pace=SCALE)
        speaker = Speaker()
        session = AgentSession(
            llm=rr.RealtimeModel(api_key="test-key", http_options=emu.http_options()),
            aec_warmup_duration=None,
        )
        session.input.audio = mic
        session.output.audio = speaker
        recorder = Recorder()
        recorder.attach(session)
        agent = Agent(instructions="You are helpful.", tools=[lookup])
        await session.start(agent)
        recorder.attach_realtime(agent.realtime_llm_session)

        async def answered(count: int) -> None:
            await until(
                lambda: (
                    len(_assistant_messages(session)) >= count
                    and session.agent_state == "listening"
                    and not speaker.playing
                )
            )

        try:
            # 1. goAway while the tool call is pending: the move waits for the answer.
            emu.faults.go_away_at(on_tool_call=True, time_left=NOTICE)
            mic.say(["please", "lookup", "flights"])
            await answered(1)
            await until(lambda: len(recorder.moves) == 1)
            # 2. The connection drops while idle.
            assert emu.faults.drop() == 1
            await until(lambda: len(recorder.moves) == 2)
            mic.say(["how", "are", "you"])
            await answered(2)
            # 3. goAway mid-answer, and the first attempt of the move is refused.
            emu.faults.refuse_next(1)
            emu.faults.go_away_at(turn=2, chunk=3, time_left=NOTICE)
            mic.say(["tell", "me", "more"])
            await answered(3)
            await until(lambda: len(recorder.moves) == 3)
            mic.say(["goodbye"])
            await answered(4)

            sent = list(mic.sent)
            (record,) = emu.ledger.sessions.values()
            await until(lambda: set(sent) <= set(record.audio_received))
            (summary,) = emu.ledger.summary().sessions.values()
            closed_during_the_call = list(recorder.closed)
        finally:
            mic.close()
            await session.aclose()
            await speaker.aclose()

    assert summary.answers_cut == ()
    assert summary.audio_lost == ()
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
    messages = _assistant_messages(session)
    assert [answer_text_ids(m.text_content or "") for m in messages] == [
        [(turn, k) for k in range(CHUNKS)] for turn in range(4)
    ]
    assert not any(m.interrupted for m in messages)
    assert sorted(speaker.heard) == [(turn, k) for turn in range(4) for k in range(CHUNKS)]
    users = [i for i in session.history.items if i.type == "message" and i.role == "user"]
    assert [u.text_content for u in users] == [
        "please lookup flights",
        "how are you",
        "tell me more",
        "goodbye",
    ]
    tool_items = [i.type for i in session.history.items if i.type.startswith("function_call")]
    assert tool_items == ["function_call", "function_call_output"]

    finals = [t.transcript for t in recorder.transcripts if t.is_final]
    assert finals == [u.text_content for u in users]
    assert any(not t.is_final for t in recorder.transcripts)
    answers = [m for m in recorder.metrics if m.request_id]
    assert len(answers) == 4
    assert all(m.ttft >= 0 and m.input_tokens > 0 for m in answers)
    assert sum(m.output_tokens for m in answers) == 4 * CHUNKS


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
