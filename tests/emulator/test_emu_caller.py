"""The scripted caller against the emulator, through GeminiLiveTransport's public API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerEvent, ScriptedCaller
from realtime_resumption.testing.emulator.ledger import LedgerSummary, SessionSummary, TurnSummary
from realtime_resumption.transport import CancelResponseOptions, GenerationEndReason

MODEL = "gemini-live-2.5-flash-preview"
SCALE = 0.05
TOOL = "lookup"
CHUNK_MS = 20
PACE = 0.25
# The emulator's end-of-turn silence (0.5 s of audio, scaled), plus a chunk.
TURN_SILENCE = 0.5 * SCALE + CHUNK_MS / 1000


@pytest.fixture(params=["gemini", "vertex"])
async def emu(request: pytest.FixtureRequest) -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(profile=request.param, time_scale=SCALE)) as emulator:
        yield emulator


def _transport(emu: Emulator, **options: Any) -> GeminiLiveTransport:
    return GeminiLiveTransport(
        client=emu.client(vertex=emu.config.profile == "vertex"),
        model=MODEL,
        tools=[{"name": TOOL}],
        tool_call_grace=0.02,
        **options,
    )


def _caller(transport: GeminiLiveTransport, **options: Any) -> ScriptedCaller:
    options.setdefault("chunk_ms", CHUNK_MS)
    options.setdefault("pace", PACE)
    options.setdefault("turn_silence", TURN_SILENCE)
    return ScriptedCaller(transport, **options)


async def _settle_audio(emu: Emulator, caller: ScriptedCaller) -> None:
    """Stop the microphone and wait until the emulator received the last accepted chunk."""
    await caller.stop_microphone()
    last = caller.record.audio[-1].seq

    def arrived() -> bool:
        return any(last in s.audio_received for s in emu.ledger.sessions.values())

    async with asyncio.timeout(5):
        while not arrived():  # noqa: ASYNC110 - the ledger has no change notification
            await asyncio.sleep(0.005)


async def test_spoken_turn_is_recorded_and_matches_the_ledger(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport) as caller:
        await transport.connect()
        caller.start_microphone()
        utterance = await caller.ask(["hello", "there"], speech_chunks=4)
        await _settle_audio(emu, caller)
        await transport.disconnect()
    await emu.wait_disconnected()

    record = caller.record
    assert utterance.spoken and len(utterance.seqs) == 4
    assert "".join(record.input_transcript) == "hello there"
    (session,) = record.session_ids
    summary = caller.summary()
    assert summary.sessions == (session,)
    (answer,) = summary.answers
    assert answer.chunks == tuple(range(emu.config.answer_chunks)) and answer.repeats == 0
    assert summary.generations == 1 and summary.unpaired_generations == ()
    assert summary.generation_ends == {"generation_complete": 1}
    assert summary.turns_completed == 1
    comparison = summary.compare(emu.ledger.summary())
    assert comparison.clean, comparison
    assert comparison.answers == comparison.answers_fully_received == 1
    # Every chunk the transport accepted, silence included, is in the session's state.
    consumed = emu.ledger.summary().sessions[session].audio_consumed
    assert list(consumed) == [a.seq for a in record.audio]
    assert utterance.seqs == [a.seq for a in record.audio if a.speech]


async def test_utterances_are_separated_by_enough_silence_to_end_each_turn(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport) as caller:
        await transport.connect()
        caller.start_microphone()
        first = caller.say(["one"], speech_chunks=2)
        second = caller.say(["two"], speech_chunks=2)
        await caller.wait_spoken(second)
        # The second utterance may barge in on the first answer: count turns, not answers.
        await caller.wait_until(lambda r: len(r.turn_completes) == 2, what="two turns")
        await caller.stop_microphone()
        await transport.disconnect()

    seqs = [a.seq for a in caller.record.audio]
    between = seqs.index(second.seqs[0]) - seqs.index(first.seqs[-1]) - 1
    assert between >= TURN_SILENCE * 1000 / CHUNK_MS
    turns = emu.ledger.sessions[caller.record.session_ids[0]].turns
    assert [t.user_text for t in turns.values()] == ["one", "two"]


async def test_tool_calls_are_answered_after_the_delay(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport, tool_delay=0.02) as caller:
        await transport.connect()
        caller.start_microphone()
        await caller.ask(["please", TOOL, "flights"])
        await caller.stop_microphone()
        await transport.disconnect()

    record = caller.record
    (call,) = record.tool_calls
    (answer,) = record.tool_answers
    assert (answer.call_id, answer.name, answer.outcome) == (call.id, TOOL, "sent")
    call_event = next(e for e in record.events if e.kind == "tool_call")
    assert answer.at - call_event.at >= 0.02
    summary = caller.summary()
    assert summary.tool_calls == summary.tool_results_sent == 1
    assert summary.generations == 1 and summary.unpaired_generations == ()
    comparison = summary.compare(emu.ledger.summary())
    assert comparison.stranded_tool_responses == () and comparison.chunks_missing == {}


async def test_a_cancelled_tool_call_is_not_answered(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport, tool_delay=0.3) as caller:
        await transport.connect()
        caller.start_microphone()
        caller.say([TOOL, "please"])
        await caller.wait_until(lambda r: bool(r.tool_calls), what="a tool call")
        # Speaking again interrupts the answer that waits for the tool: the call is cancelled.
        caller.say(["never", "mind"])
        await caller.wait_until(lambda r: bool(r.tool_answers), what="the tool answer")
        await caller.stop_microphone()
        await transport.disconnect()
    record = caller.record
    assert record.tool_cancellations == [record.tool_calls[0].id]
    ((call_id, outcome),) = [(a.call_id, a.outcome) for a in record.tool_answers]
    assert (call_id, outcome) == (record.tool_calls[0].id, "skipped")
    session = emu.ledger.sessions[record.session_ids[0]]
    assert session.unawaited_tool_responses == session.stranded_tool_responses == []


@pytest.mark.parametrize("via", ["live_text", "content"])
async def test_typed_text_is_answered(emu: Emulator, via: str) -> None:
    transport = _transport(emu)
    async with _caller(transport) as caller:
        await transport.connect()
        assert caller.type_text("hi there", via=via)  # type: ignore[arg-type]
        await caller.wait_until(lambda r: r.completed_generations == 1, what="an answer")
        await transport.disconnect()
    (typed,) = caller.record.typed
    assert typed[1:] == ("hi there", True)
    assert caller.summary().compare(emu.ledger.summary()).clean


async def test_text_answers_are_recorded_by_their_ids(emu: Emulator) -> None:
    transport = _transport(emu, response_modality="text")
    async with _caller(transport) as caller:
        await transport.connect()
        await caller.ask_typed("hello")
        await transport.disconnect()
    (answer,) = caller.summary().answers
    assert answer.chunks == tuple(range(emu.config.answer_chunks))
    assert caller.record.foreign_outputs == 0
    assert caller.summary().compare(emu.ledger.summary()).clean


async def test_refused_sends_are_recorded_not_raised(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport) as caller:
        caller.start_microphone()  # before connect: every chunk is refused
        await caller.wait_until(lambda r: len(r.audio_refused) >= 3, what="refused chunks")
        assert not caller.type_text("hello")
        await caller.stop_microphone()
    record = caller.record
    assert record.audio == [] and len(record.audio_refused) >= 3
    assert record.send_failure_count == len(record.audio_refused) + 1
    assert all("NotConnectedError" in f.error for f in record.send_failures[:-1])
    assert record.send_failures[-1].what == "text"
    assert record.typed[0][2] is False
    # One event per run of refused audio, one for the text.
    failed = [e.detail for e in record.events if e.kind == "send_failed"]
    assert len(failed) == 2 and failed[0].startswith("audio: NotConnectedError")


async def test_callbacks_already_set_are_chained_and_restored(emu: Emulator) -> None:
    transport = _transport(emu)
    completed: list[int | None] = []
    own = completed.append
    transport.on_turn_complete = own
    caller = _caller(transport)
    assert transport.on_turn_complete is not own
    await transport.connect()
    caller.type_text("hello")
    await caller.wait_until(lambda r: len(r.turn_completes) == 1, what="a turn")
    await transport.disconnect()
    await caller.aclose()
    assert completed == caller.record.turn_completes == [1]
    assert transport.on_turn_complete is own
    assert transport.on_audio_output is None


async def test_go_away_and_close_are_recorded(emu: Emulator) -> None:
    transport = _transport(emu)
    async with _caller(transport) as caller:
        await transport.connect()
        await emu.faults.go_away(10.0, close_at_deadline=False)
        await caller.wait_until(lambda r: bool(r.go_aways), what="a goAway")
        await transport.disconnect()
    record = caller.record
    ((_, seconds),) = record.go_aways
    assert seconds == pytest.approx(10.0 * SCALE)
    assert record.closes and record.closes[-1][1] == 1000
    kinds = [e.kind for e in record.events]
    assert kinds.index("session") < kinds.index("go_away") < kinds.index("close")


async def test_listeners_see_events_as_they_happen(emu: Emulator) -> None:
    transport = _transport(emu)
    seen: list[CallerEvent] = []
    async with _caller(transport) as caller:
        remove = caller.add_listener(seen.append)
        await transport.connect()
        caller.type_text("hello")
        await caller.wait_until(lambda r: r.completed_generations == 1, what="an answer")
        remove()
        caller.type_text("again")
        await caller.wait_until(lambda r: r.completed_generations == 2, what="an answer")
        await transport.disconnect()
    chunks = [(e.turn, e.chunk) for e in seen if e.kind == "answer_chunk"]
    assert chunks == [(0, k) for k in range(emu.config.answer_chunks)]
    assert seen == caller.record.events[: len(seen)]
    assert len(caller.record.events) > len(seen)


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_comparison_reports_chunks_the_caller_never_heard(profile: str) -> None:
    config = EmulatorConfig(profile=profile, time_scale=SCALE, answer_chunks=100)  # type: ignore[arg-type]
    async with Emulator(config) as emu, _caller(transport := _transport(emu)) as caller:
        await transport.connect()
        caller.type_text("hello")
        await caller.wait_until(lambda r: bool(r.answer_chunks), what="a first chunk")
        # Cancelling suppresses the rest of the answer the server goes on producing.
        await transport.cancel_response(CancelResponseOptions(wait_for_done=True))
        await caller.wait_until(lambda r: not r.open_generations, what="the end")
        await transport.disconnect()
        await emu.wait_disconnected()
        ledger = emu.ledger
    summary = caller.summary()
    assert summary.generation_ends == {GenerationEndReason.CANCELLED.value: 1}
    comparison = summary.compare(ledger.summary())
    assert not comparison.clean
    assert comparison.answers == 1 and comparison.answers_fully_received == 0
    ((key, missing),) = comparison.chunks_missing.items()
    assert key == (caller.record.session_ids[0], 0)
    heard = set(summary.answers[0].chunks)
    assert set(missing) == set(range(ledger.sessions[key[0]].turns[0].produced)) - heard


def test_comparison_of_audio_against_a_ledger() -> None:
    def session(sid: str, received: tuple[int, ...], consumed: tuple[int, ...]) -> SessionSummary:
        turn = TurnSummary(0, 2, 2, 2, "complete", False)
        duplicates = tuple(sorted({s for s in consumed if consumed.count(s) > 1}))
        return SessionSummary(
            sid, 1, 0, (turn,), (), received, consumed, (), duplicates, ("fc-x",), ()
        )

    ledger = LedgerSummary(
        {
            "a": session("a", (1, 2, 3, 4), (1, 2, 2, 4)),
            "b": session("b", (5,), (5,)),
            "other": session("other", (6, 7), (6, 7)),
        }
    )
    from realtime_resumption.testing.emulator.caller import AnswerSeen, CallerSummary

    summary = CallerSummary(
        sessions=("a", "b"),
        audio_accepted=(1, 2, 3, 4, 5, 6, 8),
        audio_refused=0,
        utterances=0,
        typed=0,
        answers=(AnswerSeen("a", 0, (0, 1), 0), AnswerSeen("b", 0, (1,), 0)),
        generations=0,
        generation_ends={},
        unpaired_generations=("gen_9",),
        turns_completed=0,
        interruptions=0,
        tool_calls=0,
        tool_results_sent=0,
        tool_results_refused=0,
        tool_results_skipped=0,
        go_aways=0,
        moves_started=0,
        moves=(),
        closes=0,
        errors=0,
        send_failures=0,
    )
    comparison = summary.compare(ledger)
    assert comparison.answers == 2 and comparison.answers_fully_received == 1
    assert comparison.chunks_missing == {("b", 0): (0,)}
    # 3 was received then rolled back; 6 belongs to another session; 8 never arrived.
    assert comparison.audio_missing == (3, 6, 8)
    assert comparison.audio_unreceived == (6, 8)
    assert comparison.audio_duplicated == (2,)
    assert comparison.stranded_tool_responses == ("fc-x", "fc-x")
    assert comparison.unpaired_generations == ("gen_9",)
    assert not comparison.clean
    assert "1/2 fully received" in str(comparison)


async def test_aclose_leaves_no_task_behind(emu: Emulator) -> None:
    before = asyncio.all_tasks()
    transport = _transport(emu)
    caller = _caller(transport, tool_delay=30.0)
    await transport.connect()
    caller.start_microphone()
    caller.say([TOOL])
    await caller.wait_until(lambda r: bool(r.tool_calls), what="a tool call")
    assert caller.streaming
    await caller.aclose()
    await caller.aclose()
    assert not caller.streaming
    await transport.disconnect()
    await emu.wait_disconnected()
    mine = {t for t in asyncio.all_tasks() - before if t.get_name().startswith("scripted-caller")}
    assert mine == set()
    with pytest.raises(RuntimeError, match="closed"):
        caller.start_microphone()


async def test_bad_arguments_are_refused(emu: Emulator) -> None:
    transport = _transport(emu)
    for bad in ({"chunk_ms": 0}, {"pace": 0.0}, {"turn_silence": -1.0}, {"tool_delay": -1.0}):
        with pytest.raises(ValueError):
            ScriptedCaller(transport, **bad)  # type: ignore[arg-type]
    async with _caller(transport) as caller:
        with pytest.raises(RuntimeError, match="microphone"):
            caller.say(["hello"])
        caller.start_microphone()
        with pytest.raises(ValueError, match="speech chunk"):
            caller.say(["a", "b"], speech_chunks=1)
        with pytest.raises(TimeoutError, match="nothing"):
            await caller.wait_until(lambda r: False, timeout=0.01, what="nothing")
