"""Tool calls across moves: no planned move while a call is open; a result never goes to a
session that did not issue its call; an orphaned call's answer ends saying so."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from google.genai import types

from realtime_resumption.gemini import GeminiLiveTransport, loop_lag
from realtime_resumption.move_reports import HandleKind, MoveOutcome
from realtime_resumption.testing.emulator import Emulator, answer_chunk_id
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    ToolCallOrphanedError,
    ToolResult,
)

from ..transport.transport_helpers import MODEL_38, handle_after_the_answer, live38_config
from .rotation_helpers import (
    Recorder,
    answered_with_handle,
    emulator_config,
    established,
    make_transport,
    only_session,
    say,
)

TOOLS = [{"name": "lookup", "description": "Looks things up."}]
ASK = [ContentTurn("user", "lookup the weather")]


async def _connected(
    emu: Emulator, tools: Sequence[object] = TOOLS
) -> tuple[GeminiLiveTransport, Recorder]:
    """A transport with the lookup tool, connected. It holds no handle yet: the service
    issues the first after an answer."""
    transport = make_transport(emu, tools=tools)
    rec = Recorder(transport)
    await transport.connect()
    return transport, rec


class _LateLoop(loop_lag.LoopLag):
    """The loop-lag monitor of a loop that runs half a second late. A loaded event loop cannot
    be had on demand, so this stands in for the real monitor's reading (its turns are marked
    as usual): every handle's arrival is moved back by a second, to before the question and
    the tool result that came just before it."""

    def current(self, now: float) -> float:
        return 0.5

    def recent(self, now: float) -> float:
        return 0.5


@pytest.mark.parametrize(
    ("behavior", "proof"), [(None, True), (types.Behavior.NON_BLOCKING, False)]
)
async def test_a_late_loop_does_not_replay_an_answered_question_and_tool_result(
    monkeypatch: pytest.MonkeyPatch, behavior: types.Behavior | None, proof: bool
) -> None:
    """The late loop moves the handle's arrival back past the question and the tool result,
    yet the answer after the result places both in the snapshot. With a function that lets
    the model talk on while it runs, output proves nothing and the timing decides: both are
    replayed."""
    monkeypatch.setattr(loop_lag, "for_loop", lambda loop: _LateLoop())
    async with Emulator(emulator_config("gemini", answer_chunks=20)) as emu:
        tool = types.FunctionDeclaration(name="lookup", behavior=behavior)
        transport, rec = await _connected(emu, tools=[tool])
        emu.faults.go_away_at(on_tool_call=True, time_left=60.0)
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")
        ((calls,),) = rec.of("on_tool_call")
        transport.send_tool_result(ToolResult(calls[0].id, "lookup", {"sky": "blue"}))
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    session = only_session(emu)
    # By the connections the session was served on (a dial refused beside the open
    # connection was sent nothing but its setup).
    sent = [
        (position, m.kind)
        for position, c in enumerate(established(session))
        for m in c.client_messages
        if m.kind in ("tool_response", "client_content")
    ]
    if not proof:
        assert sent[:4] == [
            (0, "client_content"),
            (0, "tool_response"),
            (1, "client_content"),
            (1, "tool_response"),
        ]
        return
    # Neither went to the new connection: its session, resumed after the answer, has both.
    assert sent == [(0, "client_content"), (0, "tool_response")]
    assert [t.user_text for t in session.turns.values()] == ["lookup the weather"]
    assert rec.count("on_tool_call") == 1
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.stranded_tool_responses == ()


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_no_move_while_a_tool_call_is_open(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=20)) as emu:
        transport, rec = await _connected(emu)
        emu.faults.go_away_at(on_tool_call=True, time_left=60.0)
        transport.send_content(ASK)
        await rec.wait_for("on_go_away")
        ((calls,),) = rec.of("on_tool_call")
        assert transport.pending_tool_calls == (calls[0].id,)
        assert rec.count("on_move_started") == 0
        transport.send_tool_result(ToolResult(calls[0].id, "lookup", {"sky": "blue"}))
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    # The move came after the answer the result finished.
    assert rec.names("on_turn_complete", "on_move_started")[-2:] == [
        "on_turn_complete",
        "on_move_started",
    ]
    session = only_session(emu)
    (response,) = [
        (c.index, m.tool_response_ids)
        for c in session.connections
        for m in c.client_messages
        if m.kind == "tool_response"
    ]
    assert response == (0, (calls[0].id,))  # to the connection whose session issued it
    chunks = [answer_chunk_id(data) for (data,) in rec.of("on_audio_output")]
    assert chunks == [(0, k) for k in range(20)]
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.stranded_tool_responses == ()
    assert summary.answers_cut == ()


async def test_a_call_lost_with_its_session_is_orphaned_and_asked_again() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=20)) as emu:
        transport, rec = await _connected(emu)
        await answered_with_handle(transport, rec)
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")
        ((first,),) = rec.of("on_tool_call")[0]
        # The only handle predates the call: the resumed session never issued it.
        emu.faults.drop()
        await rec.wait_for("on_move")
        with pytest.raises(ToolCallOrphanedError) as caught:
            transport.send_tool_result(ToolResult(first.id, "lookup", {"sky": "blue"}))
        assert caught.value.call_id == first.id
        # The question was replayed: the model asks for the tool again, in its new session.
        await rec.wait_for("on_tool_call", 2)
        ((second,),) = rec.of("on_tool_call")[1]
        transport.send_tool_result(ToolResult(second.id, "lookup", {"sky": "blue"}))
        await rec.wait_for("on_generation_end", 3)
        await transport.disconnect()

    assert second.id != first.id
    assert rec.of("on_tool_call_cancel") == [([first.id],)]
    assert rec.ends() == [
        GenerationEndReason.GENERATION_COMPLETE,
        GenerationEndReason.TOOL_CALL_ORPHANED,
        GenerationEndReason.GENERATION_COMPLETE,
    ]
    rec.assert_paired()
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.stranded_tool_responses == ()
    sends = transport.get_diagnostics().total_sends["tool_response"]
    assert (sends.attempted, sends.refused, sends.sent) == (2, 1, 1)


async def test_a_rebuild_orphans_an_open_call_and_its_late_result_is_refused() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=5)) as emu:
        transport, rec = await _connected(emu)
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_generation_end")
        await rec.wait(lambda r: r.of("on_resumption_update")[-1][1])
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")
        ((call,),) = rec.of("on_tool_call")[0]
        emu.faults.expire_handles()
        emu.faults.drop()
        await rec.wait_for("on_move")
        with pytest.raises(ToolCallOrphanedError):
            transport.send_tool_result(ToolResult(call.id, "lookup", {"sky": "blue"}))
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.REBUILT
    assert rec.ends()[-1] is GenerationEndReason.TOOL_CALL_ORPHANED
    rec.assert_paired()
    assert all(s.stranded_tool_responses == () for s in emu.ledger.summary().sessions.values())
    # The seeded history has the completed turn and the cut question, but not the call
    # without its result (a session cannot be seeded with half an exchange).
    _, rebuilt = emu.ledger.sessions.values()
    seeded = rebuilt.connections[0].client_messages[1]
    assert seeded.text == "hello there [0.0] [0.1] [0.2] [0.3] [0.4] lookup the weather"
    assert rebuilt.tool_calls_issued == []


async def test_a_call_open_when_its_answer_is_cut_is_orphaned_even_if_the_session_knows_it() -> (
    None
):
    # Vertex AI issues a resumable handle right after the call, so the resumed session knows
    # the call; but it does not continue the cut answer, so nothing awaits the result.
    async with Emulator(emulator_config("vertex", answer_chunks=20)) as emu:
        transport, rec = await _connected(emu)
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")
        ((call,),) = rec.of("on_tool_call")[0]
        await rec.wait(lambda r: r.names()[-1] == "on_resumption_update")
        emu.faults.drop()
        await rec.wait_for("on_tool_call_cancel")
        # Refused at once, during the gap as after it.
        with pytest.raises(ToolCallOrphanedError):
            transport.send_tool_result(ToolResult(call.id, "lookup", {"sky": "blue"}))
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.MID_TURN, MoveOutcome.RESUMED)
    assert rec.of("on_tool_call_cancel") == [([call.id],)]
    assert rec.ends() == [GenerationEndReason.TOOL_CALL_ORPHANED]
    assert transport.pending_tool_calls == ()
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.stranded_tool_responses == ()
    assert only_session(emu).unawaited_tool_responses == []


# --- non-blocking calls (gemini-3.8-live) ---------------------------------------------------

SPOKEN = ["lookup", "the", "weather"]


async def test_non_blocking_calls_across_three_moves_are_each_answered_once() -> None:
    """gemini-3.8-live talks on while a function runs: the call holds no move, yet its
    result reaches the session that knows the call, once, including a result the framework
    hands over while the session moves."""
    # Answers long enough that the handle after one comes well after its question, even on a
    # loaded loop: a handle placed before the question's end replays it (heard twice).
    async with Emulator(live38_config("gemini", answer_chunks=30)) as emu:
        transport = make_transport(emu, model=MODEL_38, tools=TOOLS)
        rec = Recorder(transport)
        await transport.connect()
        seq = 1
        for move in range(1, 4):
            start = len(rec.events)
            seq = await say(transport, SPOKEN, seq, silence_after=5)
            await rec.wait_for("on_tool_call", move)
            ((calls,),) = rec.of("on_tool_call")[move - 1 : move]
            # The answer finishes without the result, and a handle follows it.
            await rec.wait(handle_after_the_answer(start))
            assert transport.pending_tool_calls == (calls[0].id,)
            emu.faults.go_away(20.0)
            result = ToolResult(calls[0].id, "lookup", {"sky": "blue"}, "when_idle")
            if move == 2:
                # The result comes while the session moves: held, then sent once.
                await rec.wait_for("on_move_started", move)
                assert transport.moving
                transport.send_tool_result(result)
                await rec.wait_for("on_move", move)
            else:
                # The open call does not hold the move.
                await rec.wait_for("on_move", move)
                transport.send_tool_result(result)
            # The model answers the result on the connection the move switched to.
            await rec.wait(lambda r, ends=2 * move: len(r.ends()) >= ends)
        await transport.disconnect()

    session = only_session(emu)
    summary = emu.ledger.summary().sessions[session.session_id]
    issued = session.tool_calls_issued
    assert len(issued) == 3
    assert sorted(t.call_id for t in session.tool_results_taken) == sorted(issued)
    assert session.unawaited_tool_responses == []
    assert summary.stranded_tool_responses == ()
    assert [t.connection for t in session.tool_results_taken] == [
        c.index for c in established(session)[1:]
    ]
    answered = [t.answers_result for t in session.turns.values() if t.answers_result]
    assert sorted(answered) == sorted(issued)
    assert summary.answers_cut == ()
    assert all(t.outcome == "complete" for t in session.turns.values())
    assert summary.speech_lost == ()
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED] * 3
    assert rec.count("on_tool_call") == 3
    assert rec.of("on_tool_call_cancel") == []
    rec.assert_paired()
