"""Tool calls: pending, unsent results, lineage across moves, cancellation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime_resumption.tool_calls import CallState, ResultVerdict, ToolCallTracker
from realtime_resumption.transport import ToolCall, ToolCallOrphanedError, UnknownToolCallError


def call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "lookup", {"q": call_id})


def tracker_on(connection: int = 1) -> ToolCallTracker:
    tracker = ToolCallTracker()
    assert tracker.connected(connection, resumed_from=None) == []
    return tracker


def test_a_call_keeps_the_tracker_busy_until_its_result_is_written() -> None:
    tracker = tracker_on()
    assert not tracker.busy
    assert tracker.calls_issued([call("c1")], 1, 0.0)
    assert tracker.busy and tracker.pending_ids() == ["c1"]
    assert tracker.result_submitted("c1") is ResultVerdict.SEND
    assert tracker.busy and tracker.unsent_ids() == ["c1"]
    tracker.result_sent("c1")
    assert not tracker.busy
    assert tracker.result_submitted("c1") is ResultVerdict.DUPLICATE


def test_a_second_result_for_one_call_is_a_duplicate() -> None:
    tracker = tracker_on()
    tracker.calls_issued([call("c1")], 1, 0.0)
    assert tracker.result_submitted("c1") is ResultVerdict.SEND
    assert tracker.result_submitted("c1") is ResultVerdict.DUPLICATE
    assert tracker.unsent_ids() == ["c1"]


def test_open_calls_describe_where_they_came_from() -> None:
    tracker = tracker_on(7)
    tracker.calls_issued([call("c1")], 7, 2.5)
    (tracked,) = tracker.open_calls
    assert (tracked.id, tracked.name, tracked.connection, tracked.lineage) == (
        "c1",
        "lookup",
        7,
        1,
    )
    assert (tracked.issued_at, tracked.state) == (2.5, CallState.PENDING)


def test_events_from_another_connection_are_ignored() -> None:
    tracker = tracker_on(1)
    assert not tracker.calls_issued([call("c1")], 2, 0.0)
    assert not tracker.busy
    tracker.calls_issued([call("c2")], 1, 0.0)
    assert tracker.calls_cancelled(["c2"], 2) == []
    assert not tracker.handle_recorded("h", 2)
    assert tracker.busy


def test_a_result_sent_before_the_call_is_answered_changes_nothing() -> None:
    tracker = tracker_on()
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.result_sent("c1")
    assert tracker.pending_ids() == ["c1"]
    tracker.result_sent("nope")


def test_a_duplicate_call_id_is_tracked_once() -> None:
    tracker = tracker_on()
    tracker.calls_issued([call("c1"), call("c1")], 1, 0.0)
    assert tracker.pending_ids() == ["c1"]


def test_unknown_results_are_refused() -> None:
    tracker = tracker_on()
    assert tracker.result_submitted("never") is ResultVerdict.UNKNOWN


def test_cancellation_closes_open_calls() -> None:
    tracker = tracker_on()
    tracker.calls_issued([call("c1"), call("c2")], 1, 0.0)
    tracker.result_submitted("c2")
    assert tracker.calls_cancelled(["c1", "c2", "c9"], 1) == ["c1", "c2"]
    assert not tracker.busy
    assert tracker.result_submitted("c1") is ResultVerdict.CANCELLED


def test_a_rebuild_orphans_every_open_call_and_starts_a_new_lineage() -> None:
    tracker = tracker_on(1)
    tracker.calls_issued([call("c1"), call("c2")], 1, 0.0)
    tracker.result_submitted("c2")
    assert tracker.connected(2, resumed_from=None) == ["c1", "c2"]
    assert tracker.lineage == 2 and tracker.live_connection == 2
    assert not tracker.busy
    assert tracker.result_submitted("c1") is ResultVerdict.ORPHANED


def test_resuming_from_a_handle_issued_after_the_call_keeps_it() -> None:
    tracker = tracker_on(1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.handle_recorded("h1", 1)
    assert tracker.connected(2, resumed_from="h1") == []
    assert tracker.lineage == 1
    assert tracker.result_submitted("c1") is ResultVerdict.SEND


def test_resuming_from_a_handle_issued_before_the_call_orphans_it() -> None:
    tracker = tracker_on(1)
    tracker.handle_recorded("h0", 1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    assert tracker.connected(2, resumed_from="h0") == ["c1"]
    assert tracker.result_submitted("c1") is ResultVerdict.ORPHANED


def test_a_written_result_is_orphaned_by_a_resume_from_before_its_call() -> None:
    tracker = tracker_on(1)
    tracker.handle_recorded("h0", 1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.result_submitted("c1")
    tracker.result_sent("c1")
    tracker.handle_recorded("h1", 1)
    # the outbox would replay the result to a session that never issued the call
    assert tracker.connected(2, resumed_from="h0") == ["c1"]


def test_settled_calls_are_forgotten_once_every_snapshot_holds_them() -> None:
    tracker = ToolCallTracker(max_handles=1)
    tracker.connected(1, resumed_from=None)
    tracker.handle_recorded("h0", 1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.result_submitted("c1")
    tracker.result_sent("c1")
    assert [c.id for c in tracker.open_calls] == ["c1"]  # h0 predates it
    tracker.handle_recorded("h1", 1)
    assert tracker.open_calls == ()
    assert tracker.result_submitted("c1") is ResultVerdict.DUPLICATE


def test_a_resume_from_an_unknown_handle_orphans_every_open_call() -> None:
    tracker = tracker_on(1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.handle_recorded("h1", 1)
    assert tracker.connected(2, resumed_from="HANDLE-not-kept-0123456789") == ["c1"]


def test_only_the_newest_snapshots_are_kept() -> None:
    tracker = ToolCallTracker(max_handles=2)
    tracker.connected(1, resumed_from=None)
    tracker.calls_issued([call("c1")], 1, 0.0)
    for n in range(3):
        tracker.handle_recorded(f"h{n}", 1)
    assert not tracker.handle_recorded("h9", 1, resumable=False)
    assert tracker.connected(2, resumed_from="h0") == ["c1"]  # h0 was dropped


def test_closed_ids_are_remembered_within_a_bound() -> None:
    tracker = ToolCallTracker(remember_closed=2)
    tracker.connected(1, resumed_from=None)
    tracker.calls_issued([call(f"c{n}") for n in range(3)], 1, 0.0)
    tracker.calls_cancelled(["c0", "c1", "c2"], 1)
    assert tracker.result_submitted("c0") is ResultVerdict.UNKNOWN
    assert tracker.result_submitted("c2") is ResultVerdict.CANCELLED


def test_clear_and_repr() -> None:
    tracker = tracker_on(1)
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.handle_recorded("SECRET-HANDLE-abcdefghijklmnop", 1)
    text = repr(tracker) + repr(list(tracker._snapshots.values()))
    assert "SECRET-HANDLE-abcdefghijklmnop" not in text
    tracker.clear()
    assert not tracker.busy and tracker.live_connection is None


@pytest.mark.parametrize("kwargs", [{"max_handles": 0}, {"remember_closed": 0}])
def test_bounds_are_validated(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        ToolCallTracker(**kwargs)


# -- random interleavings against a model server ------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.none()),
        st.tuples(st.just("submit"), st.integers(0, 9)),
        st.tuples(st.just("sent"), st.integers(0, 9)),
        st.tuples(st.just("cancel"), st.integers(0, 9)),
        st.tuples(st.just("handle"), st.none()),
        st.tuples(st.just("resume"), st.integers(0, 9)),
        st.tuples(st.just("rebuild"), st.none()),
    ),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_a_result_goes_only_to_a_session_that_issued_its_call(
    ops: list[tuple[str, int | None]],
) -> None:
    """The model server knows, per connection, the calls its session issued; a handle is a
    copy of that set. A result the tracker lets through must be known to the live session,
    and a call is never orphaned while the live session knows it."""
    tracker = ToolCallTracker(max_handles=4)
    conn = 1
    tracker.connected(conn, resumed_from=None)
    session: set[str] = set()
    snapshots: dict[str, set[str]] = {}
    order: list[str] = []
    issued: list[str] = []
    for op, arg in ops:
        if op == "call":
            call_id = f"c{len(issued)}"
            issued.append(call_id)
            session.add(call_id)
            tracker.calls_issued([call(call_id)], conn, 0.0)
        elif op in ("submit", "sent", "cancel") and issued:
            assert arg is not None
            call_id = issued[arg % len(issued)]
            if op == "submit":
                if tracker.result_submitted(call_id) is ResultVerdict.SEND:
                    assert call_id in session
            elif op == "sent":
                tracker.result_sent(call_id)
            elif call_id in session:
                tracker.calls_cancelled([call_id], conn)
        elif op == "handle":
            name = f"h{len(order)}"
            order.append(name)
            snapshots[name] = set(session)
            tracker.handle_recorded(name, conn)
        elif op == "resume" and order:
            assert arg is not None
            name = order[-4:][arg % len(order[-4:])]
            conn += 1
            open_before = {c.id for c in tracker.open_calls}
            orphaned = set(tracker.connected(conn, resumed_from=name))
            session = set(snapshots[name])
            assert orphaned == open_before - session
        elif op == "rebuild":
            conn += 1
            tracker.connected(conn, resumed_from=None)
            session, snapshots, order = set(), {}, []
        assert {c.id for c in tracker.open_calls} <= session
        assert tracker.busy == any(c.state is not CallState.RESULT_SENT for c in tracker.open_calls)


def test_admit_result_raises_for_calls_no_live_session_waits_for() -> None:
    tracker = ToolCallTracker()
    tracker.connected(1, resumed_from=None)
    tracker.calls_issued([call("a"), call("b")], 1, 0.0)
    assert tracker.admit_result("a") is True
    assert tracker.unsent_ids() == ["a"]
    assert tracker.admit_result("a") is False  # a second result is not sent
    tracker.calls_cancelled(["b"], 1)
    assert tracker.admit_result("b") is False
    with pytest.raises(UnknownToolCallError, match="no tool call 'zz'"):
        tracker.admit_result("zz")
    tracker.calls_issued([call("c")], 1, 0.0)
    tracker.connected(2, resumed_from=None)  # a rebuild: the new session never issued "c"
    with pytest.raises(ToolCallOrphanedError):
        tracker.admit_result("c")


def test_a_non_blocking_call_holds_no_move_until_its_result_waits_for_its_write() -> None:
    tracker = tracker_on()
    tracker.declared(frozenset({"lookup"}))
    tracker.calls_issued([call("c1")], 1, 0.0)
    # The model talks on while it runs: nothing for a move to wait for.
    assert not tracker.busy and tracker.pending_ids() == ["c1"]
    assert tracker.result_submitted("c1") is ResultVerdict.SEND
    assert tracker.busy  # its result is on its way to the socket
    tracker.result_sent("c1")
    assert not tracker.busy


def test_a_cut_answer_orphans_its_blocking_calls_not_the_non_blocking_ones() -> None:
    tracker = tracker_on()
    tracker.declared(frozenset({"lookup"}))
    tracker.calls_issued([call("c1")], 1, 0.0)
    tracker.declared(frozenset())
    tracker.calls_issued([call("c2")], 1, 0.0)
    assert tracker.orphan(["c1", "c2"]) == ["c2"]
    # A session resumed from a handle that knows c1 takes its result.
    tracker.handle_recorded("h", 1)
    assert tracker.connected(2, resumed_from="h") == []
    assert tracker.result_submitted("c1") is ResultVerdict.SEND
    assert tracker.result_submitted("c2") is ResultVerdict.ORPHANED
