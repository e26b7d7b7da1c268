"""Move reports and the move log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from realtime_resumption.move_reports import (
    HandleKind,
    MoveLog,
    MoveMode,
    MoveOutcome,
    MoveReason,
    MoveReport,
    scrub,
)
from realtime_resumption.redaction import redact

HANDLE = "CiQxYjM0ZTk2Ny1hYmNkLTQ1NjctODkwMS1zZXNzaW9uLWhhbmRsZQ"


def report(**overrides: Any) -> MoveReport:
    values: dict[str, Any] = {
        "number": 1,
        "reason": MoveReason.PLANNED,
        "handle_kind": HandleKind.AFTER_TURN,
        "handle": redact(HANDLE),
        "outcome": MoveOutcome.RESUMED,
        "gap_ms": 0.0,
        "messages_buffered": 0,
        "messages_replayed": 0,
        "audio_chunks_dropped": 0,
        "audio_seconds_dropped": 0.0,
        "attempts": 1,
        "started_at": 10.0,
        "finished_at": 10.25,
    }
    values.update(overrides)
    return MoveReport(**values)


def test_enums_carry_the_documented_values() -> None:
    assert [r.value for r in MoveReason] == [
        "planned",
        "deadline",
        "lost",
        "config",
        "requested",
        "takeover",
    ]
    assert [k.value for k in HandleKind] == ["after-turn", "mid-turn", "none"]
    assert [o.value for o in MoveOutcome] == ["resumed", "rebuilt", "lost"]
    assert MoveOutcome("rebuilt") is MoveOutcome.REBUILT


def test_one_move_reason_and_one_handle_kind_serve_the_helper_and_the_reports() -> None:
    from realtime_resumption import resumption

    assert resumption.MoveReason is MoveReason
    assert resumption.HandleKind is HandleKind
    assert HandleKind("after_turn") is HandleKind.AFTER_TURN
    assert HandleKind("mid_turn") is HandleKind.MID_TURN
    assert MoveReason("deadline") is MoveReason.DEADLINE
    with pytest.raises(ValueError):
        HandleKind("sideways-turn")
    with pytest.raises(ValueError):
        MoveReason("bored")


def test_a_report_refuses_a_handle_that_is_not_redacted() -> None:
    with pytest.raises(ValueError, match="redacted"):
        report(handle=HANDLE)
    for handle in (None, "", "short", HANDLE):
        assert report(handle=redact(handle)).handle == redact(handle)


@pytest.mark.parametrize(
    "overrides",
    [
        {"number": 0},
        {"messages_buffered": -1},
        {"messages_replayed": -1},
        {"audio_chunks_dropped": -1},
        {"attempts": -1},
        {"gap_ms": -0.5},
        {"audio_seconds_dropped": float("nan")},
        {"finished_at": 9.0},
        {"started_at": float("inf")},
        {"audio_ms_held": -1.0},
        {"audio_ms_replayed": float("nan")},
        {"go_away_notice_ms": -1.0},
        {"go_away_to_switch_ms": float("inf")},
    ],
)
def test_a_report_refuses_impossible_figures(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        report(**overrides)


def test_report_repr_and_dict_never_hold_the_handle() -> None:
    made = report(error=f"resume refused for {HANDLE}")
    text = repr(made) + json.dumps(made.as_dict())
    assert HANDLE not in text
    assert made.as_dict()["outcome"] == "resumed"
    assert made.as_dict()["duration_ms"] == pytest.approx(250.0)


def test_scrub_hides_known_secrets_long_tokens_and_bounds_length() -> None:
    assert scrub("bad handle abc123", ["abc123"]) == "bad handle <6 chars>"
    assert HANDLE not in scrub(f"x {HANDLE} y")
    assert scrub("Deadline expired before operation could complete.") == (
        "Deadline expired before operation could complete."
    )
    assert len(scrub("word " * 500)) == 500


def test_a_planned_make_before_break_move_has_no_gap() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, 100.0)
    assert move.attempt(HANDLE, HandleKind.AFTER_TURN) == 1
    done = move.finish(MoveOutcome.RESUMED, 100.4, messages_replayed=3)
    assert (done.number, done.gap_ms, done.attempts, done.messages_replayed) == (1, 0.0, 1, 3)
    assert done.handle == redact(HANDLE)
    assert log.last is done and log.current is None


def test_a_lost_connection_counts_its_gap_and_attempts() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.LOST, HANDLE, HandleKind.MID_TURN, 5.0)
    move.input_stopped(5.0)
    move.input_stopped(5.1)  # repeats change nothing
    assert move.input_blocked
    move.attempt(HANDLE, HandleKind.MID_TURN)
    move.attempt("another-handle-0123456789", HandleKind.AFTER_TURN)
    move.input_resumed(5.75)
    assert not move.input_blocked
    done = move.finish(
        MoveOutcome.RESUMED,
        5.8,
        messages_buffered=40,
        audio_chunks_dropped=2,
        audio_seconds_dropped=0.04,
    )
    assert done.gap_ms == pytest.approx(750.0)
    assert done.attempts == 2
    assert done.handle_kind is HandleKind.AFTER_TURN
    assert done.handle == redact("another-handle-0123456789")


def test_a_gap_still_open_at_the_end_counts_until_then() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.LOST, HANDLE, HandleKind.AFTER_TURN, 1.0)
    move.input_stopped(1.0)
    move.attempt(HANDLE, HandleKind.AFTER_TURN)
    done = move.finish(MoveOutcome.LOST, 4.0, error=f"attempt refused: {HANDLE}")
    assert done.gap_ms == pytest.approx(3000.0)
    assert done.error is not None and HANDLE not in done.error
    assert redact(HANDLE) in done.error


def test_a_short_handle_in_an_error_is_scrubbed_too() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.LOST, "h-42", HandleKind.AFTER_TURN, 0.0)
    done = move.finish(MoveOutcome.LOST, 1.0, error="handle h-42 expired")
    assert done.error == "handle <4 chars> expired"


def test_a_rebuild_without_handle_reports_kind_none() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.LOST, None, HandleKind.AFTER_TURN, 0.0)
    move.attempt(None, HandleKind.AFTER_TURN)
    done = move.finish(MoveOutcome.REBUILT, 1.0)
    assert (done.handle_kind, done.handle) == (HandleKind.NONE, "<none>")


def test_one_move_at_a_time_and_finished_once() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.CONFIG, HANDLE, HandleKind.AFTER_TURN, 0.0)
    with pytest.raises(RuntimeError, match="still running"):
        log.begin(MoveReason.LOST, HANDLE, HandleKind.AFTER_TURN, 0.1)
    move.finish(MoveOutcome.RESUMED, 0.2)
    with pytest.raises(RuntimeError, match="already finished"):
        move.finish(MoveOutcome.RESUMED, 0.3)
    with pytest.raises(RuntimeError, match="already finished"):
        move.attempt(HANDLE, HandleKind.AFTER_TURN)
    assert log.begin(MoveReason.LOST, HANDLE, HandleKind.AFTER_TURN, 1.0).number == 2


def test_the_log_counts_outcomes_and_keeps_recent_reports() -> None:
    log = MoveLog(keep=2)
    outcomes = [MoveOutcome.RESUMED, MoveOutcome.REBUILT, MoveOutcome.RESUMED, MoveOutcome.LOST]
    for n, outcome in enumerate(outcomes):
        log.begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, float(n)).finish(
            outcome, n + 0.5
        )
    assert log.total == 4
    assert log.counts == {MoveOutcome.RESUMED: 2, MoveOutcome.REBUILT: 1, MoveOutcome.LOST: 1}
    assert [r.number for r in log.recent] == [3, 4]
    snapshot = log.as_dict()
    assert snapshot["outcomes"] == {"resumed": 2, "rebuilt": 1, "lost": 1}
    assert HANDLE not in json.dumps(snapshot)
    assert "moves" in snapshot and snapshot["in_progress"] is False


def test_in_progress_repr_hides_the_handle() -> None:
    move = MoveLog().begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, 0.0)
    assert HANDLE not in repr(move)
    with pytest.raises(ValueError):
        MoveLog(keep=0)


def test_a_go_away_before_a_move_is_reported_by_the_next_move_only() -> None:
    log = MoveLog()
    log.go_away(20.0, 100.0)
    log.go_away(5.0, 101.0)  # the first notice counts
    move = log.begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, 102.0)
    done = move.finish(MoveOutcome.RESUMED, 102.5)
    assert (done.go_away_notice_ms, done.go_away_to_switch_ms) == (20_000.0, 2_500.0)
    after = log.begin(MoveReason.LOST, HANDLE, HandleKind.AFTER_TURN, 200.0).finish(
        MoveOutcome.RESUMED, 200.1
    )
    assert (after.go_away_notice_ms, after.go_away_to_switch_ms) == (None, None)


def test_a_go_away_during_a_move_is_that_moves_and_may_have_no_figure() -> None:
    log = MoveLog()
    move = log.begin(MoveReason.CONFIG, HANDLE, HandleKind.AFTER_TURN, 10.0)
    log.go_away(None, 10.5)
    done = move.finish(MoveOutcome.RESUMED, 11.0)
    assert (done.go_away_notice_ms, done.go_away_to_switch_ms) == (None, 500.0)


def test_a_move_whose_incumbent_went_first_is_break_before_make() -> None:
    log = MoveLog()
    kept = log.begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, 1.0)
    assert kept.finish(MoveOutcome.RESUMED, 2.0).mode is MoveMode.MAKE_BEFORE_BREAK
    broken = log.begin(MoveReason.PLANNED, HANDLE, HandleKind.AFTER_TURN, 3.0)
    broken.incumbent_gone()
    done = broken.finish(
        MoveOutcome.RESUMED, 4.0, audio_seconds_held=0.04, audio_seconds_replayed=0.1
    )
    assert done.mode is MoveMode.BREAK_BEFORE_MAKE
    assert (done.audio_ms_held, done.audio_ms_replayed) == (40.0, 100.0)
    assert done.as_dict()["mode"] == "break-before-make"
