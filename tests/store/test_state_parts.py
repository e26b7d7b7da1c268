"""The read-only views a snapshot takes of the session's parts: what a resumed or rebuilt
session would lack (the outbox's own answer), the calls a handle's session knows, a call's
arguments from the history."""

from __future__ import annotations

from realtime_resumption.history import ConversationHistory
from realtime_resumption.outbox import MessageKind, Outbox
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import ToolCall, ToolResult

from ..unit.outbox.wire import Wire, send


def _session() -> tuple[Outbox[str], Wire]:
    outbox: Outbox[str] = Outbox()
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1", "a1", "a2")
    assert outbox.record_handle("h1", 1, 0.1, last_consumed_index=2)
    send(outbox, wire, 0.2, "a3", "r1")
    outbox.turn_completed()
    send(outbox, wire, 0.3, "a4", "r2")
    outbox.submit("t2", MessageKind.TEXT, 0.4)  # never written: no connection takes it yet
    outbox.detach(1)
    return outbox, wire


def test_what_a_resumed_session_lacks_is_what_a_resume_would_replay() -> None:
    outbox, wire = _session()
    lacking = outbox.lacking("h1")
    assert lacking == ["a2", "a3", "r1", "a4", "r2", "t2"]
    assert outbox.lacking("h1") == lacking  # it changes nothing
    outbox.attach_resumed(2, "h1", 0.5)
    assert wire.flush(0.5) == lacking


def test_what_a_rebuilt_session_lacks_is_what_a_rebuild_would_replay_but_results() -> None:
    outbox, wire = _session()
    lacking = outbox.lacking(None)
    assert lacking == ["a4", "t2"]  # r2 answers a call the rebuilt session never issued
    assert outbox.lacking("no such handle") == lacking
    outbox.attach_fresh(2, 0.5)
    assert wire.flush(0.5) == lacking


def test_the_calls_a_handles_session_knows() -> None:
    tools = ToolCallTracker()
    tools.connected(1, resumed_from=None)
    tools.calls_issued([ToolCall("c1", "lookup")], 1, 0.0)
    tools.handle_recorded("h1", 1)
    tools.calls_issued([ToolCall("c2", "lookup")], 1, 0.1)
    tools.handle_recorded("h2", 1)
    assert tools.known_at("h1") == {"c1"}
    assert tools.known_at("h2") == {"c1", "c2"}
    assert tools.known_at("unknown") == frozenset()


def test_a_calls_arguments_are_found_in_the_turn_in_progress_or_the_committed_ones() -> None:
    history = ConversationHistory()
    history.user_text("find a flight")
    history.tool_call(ToolCall("c1", "lookup", {"to": "Rome"}))
    history.tool_result(ToolResult("c1", "lookup", {"n": 1}))
    history.turn_complete()
    history.tool_call(ToolCall("c2", "lookup", {"to": "Oslo"}))
    assert history.call("c1") == ToolCall("c1", "lookup", {"to": "Rome"})
    assert history.call("c2") == ToolCall("c2", "lookup", {"to": "Oslo"})
    assert history.call("c3") is None
