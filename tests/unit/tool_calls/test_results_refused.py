"""A tool result dropped unsent (the SDK refused it, or the service refused it as too big)
reopens its call: a corrected result is sent, not discarded as a duplicate."""

from __future__ import annotations

from realtime_resumption.tool_calls import ResultVerdict, ToolCallTracker
from realtime_resumption.transport import ToolCall


def _tracker_with_call() -> ToolCallTracker:
    tracker = ToolCallTracker()
    tracker.connected(1, resumed_from=None)
    tracker.calls_issued([ToolCall("c1", "lookup", {})], 1, 0.0)
    return tracker


def test_a_result_refused_before_its_write_reopens_its_call() -> None:
    tracker = _tracker_with_call()
    assert tracker.result_submitted("c1") is ResultVerdict.SEND
    tracker.results_refused(["c1"])
    assert tracker.pending_ids() == ["c1"] and tracker.busy
    assert tracker.result_submitted("c1") is ResultVerdict.SEND


def test_a_result_refused_after_its_write_reopens_its_call() -> None:
    tracker = ToolCallTracker()
    tracker.connected(1, resumed_from=None)
    # A handle from before the call keeps it tracked after its result's write.
    tracker.handle_recorded("h-1", 1)
    tracker.calls_issued([ToolCall("c1", "lookup", {})], 1, 0.0)
    tracker.result_submitted("c1")
    tracker.result_sent("c1")
    tracker.results_refused(["c1"])
    assert tracker.pending_ids() == ["c1"]
    assert tracker.result_submitted("c1") is ResultVerdict.SEND


def test_refusing_a_pending_or_unknown_call_changes_nothing() -> None:
    tracker = _tracker_with_call()
    tracker.results_refused(["c1"])
    tracker.results_refused(["nope"])
    assert tracker.pending_ids() == ["c1"]
    assert tracker.result_submitted("nope") is ResultVerdict.UNKNOWN
