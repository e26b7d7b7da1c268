"""The unplanned end of a session (a dropped socket, a cap close that came early, a refused
redial): the transport rebuilds a new session from the conversation state, replays the input
no committed item holds, reports a cut answer as interrupted and has the cut question
answered. The ``openai`` SDK over real WebSockets to the bundled emulator; its ledger is the
ground truth. On loop time (looptime, the emulator in the same loop): every wait is bounded on
that clock, so a loaded machine slows a test down but cannot time it out."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.openai import (
    FunctionTool,
    InputTranscription,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.transport import (
    GenerationEndReason,
    ReconnectState,
    ReplayItem,
    SessionLostError,
    ToolResult,
)
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import config, speech

pytestmark = pytest.mark.looptime

HEARD = SessionConfig(instructions="Answer briefly.", transcription=InputTranscription("whisper-1"))
COMPLETE = GenerationEndReason.GENERATION_COMPLETE


def talk(t: OpenAIRealtimeTransport, first: int, count: int, words: list[str]) -> list[int]:
    """Say ``count`` chunks of speech numbered from ``first`` (then a little silence); the
    ids of the speech chunks (no item need hold the silence)."""
    for chunk in speech(first, count, words):
        t.send_audio(chunk)
    return list(range(first, first + count))


async def test_a_drop_mid_answer_has_the_cut_question_answered_by_a_new_session_with_the_context() -> (
    None
):
    said: list[int] = []
    async with OpenAIEmulator(config(answer_chunks=60, chunk_ms=100)) as emu:
        t = transport(emu, HEARD)
        rec = Recorder(t)
        await t.connect()
        said += talk(t, 0, 5, ["pineapple"])
        await rec.ended(1, timeout=10)
        said += talk(t, 20, 5, ["long", "story"])
        await rec.until(lambda r: len(r.named("on_first_audio_chunk")) == 2)
        assert emu.faults.drop() == 1
        await rec.ended(3, timeout=10)
        said += talk(t, 40, 5, ["recall"])
        await rec.ended(4, timeout=10)
        await t.disconnect()

    reasons = [reason for _, reason in rec.ends]
    assert reasons == [COMPLETE, GenerationEndReason.INTERRUPTED, COMPLETE, COMPLETE]
    assert len(rec.named("on_interrupted")) == 1
    first, second = emu.ledger.sessions
    assert first.closed_by == "drop" and first.answers[1].outcome == "cut"
    # The new session was given the conversation (the cut answer as far as it was received)
    # and answered the cut question.
    seeded = [(i.role, i.text) for i in second.seeded]
    assert seeded[:2] == [("user", "pineapple"), ("assistant", first.items[1].text)]
    assert ("user", "long story") in seeded
    answers = rec.transcript
    assert answers.count("heard long story") == 2  # cut, then answered whole
    # A word said before the drop is recalled after it.
    assert "recall pineapple" in answers
    summary = emu.ledger.summary()
    assert summary.speech_lost(said) == [] and summary.speech_heard_twice == ()
    assert rec.named("on_close") == [(1000, "disconnect")]
    assert [m.outcome for (m,) in rec.named("on_move")] == ["rebuilt"]


async def test_a_question_spoken_across_a_drop_reaches_the_new_session_once_and_whole() -> None:
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu, HEARD)
        rec = Recorder(t)
        await t.connect()
        question = speech(0, 10, ["what", "is", "the", "weather"])
        for chunk in question[:4]:
            t.send_audio(chunk)
        await rec.until(lambda r: bool(r.named("on_speech_started")))
        emu.faults.drop()
        # The rest is said while no session takes it: it is held, then given to the new one.
        for chunk in question[4:]:
            t.send_audio(chunk)
        await rec.ended(1, timeout=10)
        await t.disconnect()

    first, second = emu.ledger.sessions
    assert first.committed_speech == []
    assert [q for q in second.committed_speech if q < 10] == list(range(10))
    assert "heard what is the weather" in rec.transcript
    assert emu.ledger.summary().speech_heard_twice == ()


async def test_a_cap_close_before_the_planned_move_is_rebuilt_like_a_drop() -> None:
    async with OpenAIEmulator(config(answer_chunks=3, session_cap=150)) as emu:
        # No cap counted by the transport: the service's close comes first.
        t = transport(emu, HEARD, session_cap=None)
        rec = Recorder(t)
        await t.connect()
        for chunk in speech(0, 5, ["pineapple"]):
            t.send_audio(chunk)
        await rec.ended(1)
        await rec.until(lambda r: len(r.named("on_connection_lifecycle")) >= 5, timeout=10)
        for chunk in speech(20, 5, ["recall"]):
            t.send_audio(chunk)
        await rec.ended(2, timeout=10)
        await t.disconnect()
    first = emu.ledger.sessions[0]
    assert first.closed_by == "cap" and first.close_code == 1001
    assert "recall pineapple" in rec.transcript
    kinds = [a[0].kind for a in rec.named("on_connection_lifecycle")]
    assert kinds[:5] == ["attempt", "setup-ok", "generation-close", "attempt", "setup-ok"]
    assert rec.named("on_close") == [(1000, "disconnect")]


async def test_refused_redials_are_retried_and_a_session_that_cannot_be_rebuilt_is_lost() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu, retry_delays=(0.0, 0.01, 0.01))
        rec = Recorder(t)
        await t.connect()
        emu.faults.refuse_dials(503, count=2)
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        retried = [e for (e,) in rec.named("on_error") if e.recoverable]
        assert len(retried) == 2 and "503" in str(retried[0].error)

        emu.faults.refuse_dials(503, count=10)
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_close")), timeout=10)
        (lost,) = [e for (e,) in rec.named("on_error") if not e.recoverable]
        assert isinstance(lost.error, SessionLostError)
        assert not t.is_connected
        await t.disconnect()
    assert len(rec.named("on_close")) == 1


async def test_a_tool_call_in_flight_at_a_drop_is_answered_once_in_the_new_session() -> None:
    weather = FunctionTool("weather", parameters={"type": "object", "properties": {}})
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu, SessionConfig(tools=(weather,)))
        rec = Recorder(t)
        await t.connect()
        for chunk in speech(0, 5, ["weather", "please"]):
            t.send_audio(chunk)
        await rec.until(lambda r: bool(r.tool_calls))
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        (call,) = rec.tool_calls
        t.send_tool_result(ToolResult(call.id, call.name, {"sky": "sunny"}))
        await rec.ended(1, timeout=10)
        # A later turn, answered: what the transport sent before it reached the service first.
        talk(t, 20, 5, ["thanks"])
        await rec.ended(2)
        await t.disconnect()
    first, second = emu.ledger.sessions
    # The call was run once, its output given once, in the session that holds the call.
    assert "sunny" in rec.transcript and "heard thanks" in rec.transcript
    assert [r for _, r in rec.ends] == [COMPLETE, COMPLETE]
    assert len(rec.tool_calls) == 1
    assert [i.call_id for i in second.seeded if i.type == "function_call"] == [call.id]
    outputs = [i for s in (first, second) for i in s.items if i.type == "function_call_output"]
    assert len(outputs) == 1 and outputs[0] in second.items
    assert rec.named("on_tool_call_cancel") == []


async def test_reconnect_moves_the_call_to_a_new_session_that_keeps_the_conversation() -> None:
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu, HEARD)
        rec = Recorder(t)
        await t.connect()
        talk(t, 0, 5, ["pineapple"])
        await rec.ended(1)
        await rec.until(lambda r: bool(r.named("on_input_transcription")))
        await asyncio.wait_for(t.reconnect(), 10)
        (report,) = [m for (m,) in rec.named("on_move")]
        assert report.reason == "requested" and report.outcome == "rebuilt"
        talk(t, 20, 5, ["recall"])
        await rec.ended(2)
        await t.disconnect()
    first, second = emu.ledger.sessions
    assert first.closed_by == "client"
    assert [(i.role, i.text) for i in second.seeded][:1] == [("user", "pineapple")]
    assert "recall pineapple" in rec.transcript


async def test_reconnect_before_any_session_gives_the_new_one_the_stored_history() -> None:
    history = (
        ReplayItem("user", text="my name is pineapple"),
        ReplayItem("model", text="hello pineapple"),
    )
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu, HEARD)
        rec = Recorder(t)
        await t.reconnect(ReconnectState(conversation_history=history))
        talk(t, 0, 5, ["recall"])
        await rec.ended(1)
        await t.disconnect()
    (session,) = emu.ledger.sessions
    assert [(i.role, i.text) for i in session.seeded] == [
        ("user", "my name is pineapple"),
        ("assistant", "hello pineapple"),
    ]
    assert "recall my name is pineapple" in rec.transcript


async def test_the_conversation_given_to_a_new_session_is_bounded_by_the_token_budget() -> None:
    async with OpenAIEmulator(config(answer_chunks=2)) as emu:
        # About two turns' worth: each question and answer costs a dozen tokens or so.
        t = transport(emu, HEARD, seed_budget_tokens=40)
        rec = Recorder(t)
        await t.connect()
        for n in range(5):
            talk(t, 20 * n, 5, ["turn", str(n)])
            await rec.ended(n + 1)
            await rec.until(lambda r, n=n: len(r.named("on_input_transcription")) == n + 1)
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        # A later turn, answered by the new session: its seed had reached it before.
        talk(t, 100, 5, ["recall"])
        await rec.ended(6)
        await t.disconnect()
    first, second = emu.ledger.sessions
    seeded = [i.text for i in second.seeded if i.role == "user"]
    # The oldest turns went first; the newest were kept, in order.
    assert seeded and seeded == [f"turn {n}" for n in range(5)][-len(seeded) :]
    assert len(seeded) < 5
    assert len(second.seeded) < len([i for i in first.items if not i.deleted])
    # The new session's answer recalls the kept turns and nothing older.
    assert f"heard recall, recall {' '.join(seeded)} [" in rec.transcript


async def test_on_azure_the_beta_protocol_is_spoken_and_a_drop_is_rebuilt_the_same_way() -> None:
    async with OpenAIEmulator(config(profile="azure", answer_chunks=3)) as emu:
        t = transport(emu, HEARD, client=emu.azure_client(), model="my-deployment")
        rec = Recorder(t)
        await t.connect()
        talk(t, 0, 5, ["pineapple"])
        await rec.ended(1)
        await rec.until(lambda r: bool(r.named("on_input_transcription")))
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        talk(t, 20, 5, ["recall"])
        await rec.ended(2)
        await t.disconnect()
    first, second = emu.ledger.sessions
    assert first.flavour == second.flavour == "beta"
    assert "/openai/realtime" in first.path
    assert [(i.role, i.text) for i in second.seeded][:1] == [("user", "pineapple")]
    assert "recall pineapple" in rec.transcript


async def test_reconnect_during_a_move_waits_for_that_move_instead_of_starting_another() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu, retry_delays=(0.0, 0.05, 0.05))
        rec = Recorder(t)
        await t.connect()
        emu.faults.refuse_dials(503, count=1)
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move_started")))
        await asyncio.wait_for(t.reconnect(), 10)
        assert t.is_connected
        # A later turn, answered: no other move came between.
        talk(t, 0, 5, ["hello"])
        await rec.ended(1)
        await t.disconnect()
    assert len(rec.named("on_move")) == 1 and len(emu.ledger.sessions) == 2
    assert [len(s.answers) for s in emu.ledger.sessions] == [0, 1]
