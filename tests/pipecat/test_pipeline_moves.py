"""A whole Pipecat pipeline (microphone streaming at the emulator's pace, the context
aggregator pair, our service, a speaker playing in real time) through three moves: a goAway
mid-answer, a dropped connection, and a move whose first attempt is refused, with a tool call
across that one. Checked against the emulator's ledger and the frames the service pushed."""

from __future__ import annotations

from collections import Counter

from pipecat.frames.frames import (
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMRunFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair

from realtime_resumption.emulator import Emulator, answer_chunk_id, answer_text_ids
from realtime_resumption.frames import (
    GenerationEndedFrame,
    GenerationStartedFrame,
    SessionMovedFrame,
    SessionMovingFrame,
)
from realtime_resumption.moves import MoveOutcome, MoveReason

from . import services
from .devices import Microphone, Speaker
from .rig import PushLog, Rig, emulator_config, until

SCALE = 0.2
"""Emulator time at 1/5: a 20 ms chunk streams every 4 ms."""
CHUNKS = 20


async def test_three_moves_lose_nothing_and_keep_every_answer_whole() -> None:
    config = emulator_config(time_scale=SCALE, answer_chunks=CHUNKS)
    async with Emulator(config) as emu:
        context = LLMContext()
        pair = LLMContextAggregatorPair(context)
        mic, speaker = Microphone(SCALE), Speaker(SCALE)
        service = services.ours(emu, tools=True)
        log = PushLog()
        log.source = service

        def moved(n: int) -> bool:
            return log.count(SessionMovedFrame) >= n

        def answered(n: int) -> bool:
            return log.count(GenerationEndedFrame) >= n

        def heard(n: int) -> bool:
            """The bot finished speaking answer ``n``: it is in the context."""
            return sum(m.get("role") == "assistant" for m in _messages(context)) >= n

        async with Rig(
            [mic, pair.user(), service, speaker, pair.assistant()], observers=[log]
        ) as rig:
            await rig.queue(LLMRunFrame())  # as a bot starts: the context reaches the service
            # 1: goAway in the middle of the first answer (6 s of notice).
            emu.faults.go_away_at(turn=0, chunk=5, time_left=30.0)
            mic.say(["hello"])
            await rig.wait(lambda: answered(1) and moved(1))
            await until(lambda: heard(1))
            # 2: the connection drops between answers.
            mic.say(["tell", "me", "more"])
            await rig.wait(lambda: answered(2))
            await until(lambda: heard(2))
            assert emu.faults.drop() == 1
            await rig.wait(lambda: moved(2))
            # 3: goAway while a tool call is pending; the first attempt is refused.
            emu.faults.refuse_next(1)
            emu.faults.go_away_at(on_tool_call=True, time_left=30.0)
            mic.say(["please", "lookup", "flights"])
            await rig.wait(lambda: answered(3) and moved(3))
            # Everything streamed until now reaches the service (a bounded wait).
            streamed = mic.sent
            await until(lambda: streamed in emu.ledger.sessions[_only(emu)].audio_received)
            await mic.mute()
            errors = rig.of(ErrorFrame, up=True) + rig.of(ErrorFrame)

    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    # The ledger: no answer cut, no client audio lost, nothing stranded.
    assert summary.answers_cut == ()
    assert summary.audio_lost == ()
    assert summary.stranded_tool_responses == ()
    assert session.unawaited_tool_responses == []
    assert set(range(1, streamed + 1)) <= set(summary.audio_received)
    assert "http503" in [a.outcome for a in emu.ledger.attempts]
    # The tool call was answered on the connection that issued it.
    (call_id,) = session.tool_calls_issued
    issued = [
        c.index
        for c in session.connections
        if any(m.kind == "tool_call" and m.delivered for m in c.server_messages)
    ]
    answered_on = [
        c.index
        for c in session.connections
        if any(call_id in m.tool_response_ids for m in c.client_messages)
    ]
    assert issued == answered_on and len(issued) == 1

    # One SessionMovedFrame per move, each resumed.
    reports = [f.report for f in log.frames() if isinstance(f, SessionMovedFrame)]
    assert [(r.reason, r.outcome) for r in reports] == [
        (MoveReason.PLANNED, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.RESUMED),
        (MoveReason.PLANNED, MoveOutcome.RESUMED),
    ]
    assert reports[2].attempts == 2
    assert log.count(SessionMovingFrame) == 3
    assert errors == []

    # Start/End pairs intact: each brackets one whole answer, never two or a part.
    pushed = log.frames()
    pairs: list[list[tuple[int, int] | None]] = []
    current: list[tuple[int, int] | None] | None = None
    for frame in pushed:
        if isinstance(frame, LLMFullResponseStartFrame):
            assert current is None
            current = []
        elif isinstance(frame, TTSAudioRawFrame):
            assert current is not None
            current.append(answer_chunk_id(frame.audio))
        elif isinstance(frame, LLMFullResponseEndFrame):
            assert current is not None
            pairs.append(current)
            current = None
    assert current is None
    assert pairs == [[(turn, k) for k in range(CHUNKS)] for turn in (0, 1, 2)]
    starts = [f.generation_id for f in pushed if isinstance(f, GenerationStartedFrame)]
    ends = [f.generation_id for f in pushed if isinstance(f, GenerationEndedFrame)]
    assert starts == ends and len(starts) == 3

    # Each answer once and whole in the context.
    heard = [
        answer_text_ids(str(m.get("content") or ""))
        for m in context.get_messages()
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content")
    ]
    assert [sorted({t for t, _ in ids}) for ids in heard] == [[0], [1], [2]]
    assert all(Counter(ids) == Counter((ids[0][0], k) for k in range(CHUNKS)) for ids in heard)
    users = [m for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "user"]
    assert [m.get("content") for m in users] == ["hello", "tell me more", "please lookup flights"]


def _only(emu: Emulator) -> str:
    (session_id,) = emu.ledger.sessions
    return session_id


def _messages(context: LLMContext) -> list[dict[str, object]]:
    return [m for m in context.get_messages() if isinstance(m, dict)]
