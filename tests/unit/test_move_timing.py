"""The decider of when a session moves and from which handle (``move_timing``), on its own:
events in, actions out, time passed in."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime_resumption import move_timing as t
from realtime_resumption.move_reports import HandleKind, MoveReason
from realtime_resumption.move_timing import ResumptionOptions, TimerKind
from realtime_resumption.redaction import redact

H1 = "handle-one-0123456789-secret"
H2 = "handle-two-0123456789-secret"
FAST = ResumptionOptions(deadline_margin=5.0, retry_delays=(0.0, 0.5, 2.0))


def moves(actions: list[t.Action[str]]) -> list[t.MoveNow[str]]:
    return [action for action in actions if isinstance(action, t.MoveNow)]


def only_move(actions: list[t.Action[str]]) -> t.MoveNow[str]:
    [move] = moves(actions)
    return move


def at_point(timing: t.MoveTiming[str], handle: str = H1) -> None:
    assert timing.send(t.Update(handle, True)) == []
    assert timing.at_point


# --- the resumable point ----------------------------------------------------------------------


def test_a_goaway_at_a_resumable_point_moves_at_once_with_the_first_attempt() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    at_point(timing)
    actions = timing.send(t.GoAway(100.0, 30.0))
    assert actions == [
        t.MoveNow(MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, forced=False),
        t.Attempt(t.MoveDecision(H1, HandleKind.AFTER_TURN, MoveReason.PLANNED, 1), 0.0),
    ]
    assert timing.moving and not timing.at_point and not timing.wanted


def test_a_handle_issued_during_a_turn_is_no_point_and_the_goaway_waits_for_the_fallback() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.TurnStarted())
    timing.send(t.Update(H1, True))
    assert not timing.at_point
    # 30 s of notice: a third is 10 s, bounded by the 5 s margin.
    assert timing.send(t.GoAway(100.0, 30.0)) == [t.StartTimer(125.0, TimerKind.FALLBACK)]
    assert timing.deadline == 130.0
    assert timing.send(t.TurnEnded()) == []
    # The turn ended: the next resumable handle is the point, and the wait ends.
    actions = timing.send(t.Update(H2, True))
    assert actions == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.MoveNow(MoveReason.PLANNED, H2, HandleKind.AFTER_TURN, forced=False),
    ]


def test_the_fallback_forces_the_move_with_the_latest_handle() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, True))
    timing.send(t.TurnStarted())
    timing.send(t.GoAway(0.0, 30.0))
    move = only_move(timing.send(t.TimerExpired(TimerKind.FALLBACK, 25.0)))
    assert move == t.MoveNow(MoveReason.DEADLINE, H1, HandleKind.MID_TURN, forced=True)
    assert not timing.wanted


@pytest.mark.parametrize(
    ("notice", "fallback"),
    [(30.0, 25.0), (9.0, 6.0), (2.0, 1.0), (0.5, -0.5), (None, 25.0), (math.nan, 25.0)],
)
def test_the_fallback_keeps_a_third_of_the_notice_between_the_margins(
    notice: float | None, fallback: float
) -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    actions = timing.send(t.GoAway(0.0, notice))
    if fallback > 0:
        assert actions == [t.StartTimer(fallback, TimerKind.FALLBACK)]
    else:
        # The moment has passed: the move is forced at once.
        assert only_move(actions).reason is MoveReason.DEADLINE


def test_a_second_goaway_only_brings_the_deadline_and_the_fallback_earlier() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    timing.send(t.GoAway(0.0, 30.0))
    assert timing.send(t.GoAway(1.0, 60.0)) == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.StartTimer(25.0, TimerKind.FALLBACK),
    ]
    assert timing.deadline == 30.0
    timing.send(t.GoAway(2.0, 9.0))
    assert (timing.deadline, timing.fallback_at) == (11.0, 8.0)


def test_an_update_not_resumable_keeps_the_earlier_handle_and_ends_the_point() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.Update(H1, None))
    assert timing.latest_handle == H1 and not timing.at_point
    timing.send(t.Update(H2, True))
    timing.send(t.Update(H1, False))
    assert timing.latest_handle == H2 and not timing.at_point
    timing.send(t.Update("", True))
    assert timing.latest_handle == H2


def test_a_fallback_with_no_handle_lapses() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.GoAway(0.0, 30.0))
    assert timing.send(t.TimerExpired(TimerKind.FALLBACK, 25.0)) == [t.Lapsed()]
    assert not timing.wanted


def test_a_timer_the_machine_cancelled_changes_nothing_when_it_fires_anyway() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.Update(H1, False))
    timing.send(t.GoAway(0.0, 30.0))
    timing.send(t.Forget())
    assert timing.send(t.TimerExpired(TimerKind.FALLBACK, 25.0)) == []


# --- the storm spread -------------------------------------------------------------------------


def test_the_spread_waits_its_drawn_share_and_a_turn_meanwhile_waits_for_the_next_point() -> None:
    options = ResumptionOptions(storm_spread=4.0)
    timing: t.MoveTiming[str] = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.5)
    at_point(timing)
    assert timing.send(t.GoAway(0.0, 30.0)) == [
        t.StartTimer(2.0, TimerKind.SPREAD),
        t.StartTimer(25.0, TimerKind.FALLBACK),
    ]
    move = only_move(timing.send(t.TimerExpired(TimerKind.SPREAD, 2.0)))
    assert move.reason is MoveReason.PLANNED and move.kind is HandleKind.AFTER_TURN

    timing = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.5)
    at_point(timing)
    timing.send(t.GoAway(0.0, 30.0))
    timing.send(t.TurnStarted())
    assert timing.send(t.TimerExpired(TimerKind.SPREAD, 2.0)) == []
    assert timing.wanted


def test_the_spread_is_at_most_a_quarter_of_the_time_before_the_fallback() -> None:
    options = ResumptionOptions(storm_spread=100.0)
    timing: t.MoveTiming[str] = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.999)
    at_point(timing)
    [spread, _] = timing.send(t.GoAway(0.0, 30.0))
    assert isinstance(spread, t.StartTimer) and spread.kind is TimerKind.SPREAD
    assert spread.at == pytest.approx(0.25 * 25.0 * 0.999)


@pytest.mark.parametrize("draw", [1.0, -0.1, math.nan])
def test_a_draw_outside_zero_to_one_is_refused(draw: float) -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(
        ResumptionOptions(storm_spread=4.0), spread_draw=lambda: draw
    )
    at_point(timing)
    with pytest.raises(ValueError, match="spread_draw"):
        timing.send(t.GoAway(0.0, 30.0))


# --- losses, attempts, stops ------------------------------------------------------------------


def test_a_loss_moves_from_the_latest_handle_and_with_none_drops_the_goaway() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.GoAway(0.0, 30.0))
    assert timing.send(t.ConnectionLost()) == [t.CancelTimer(TimerKind.FALLBACK)]
    assert not timing.wanted
    at_point(timing)
    move = only_move(timing.send(t.ConnectionLost()))
    assert move == t.MoveNow(MoveReason.LOST, H1, HandleKind.AFTER_TURN, forced=True)


def test_attempts_follow_the_delays_then_give_up_and_stop() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.Update(H1, True))
    timing.send(t.ConnectionLost())
    delays = []
    while True:
        [after] = timing.send(t.AttemptFailed())
        if isinstance(after, t.GiveUp):
            break
        assert isinstance(after, t.Attempt)
        delays.append((after.decision.attempt, after.delay))
    assert delays == [(2, 0.5), (3, 2.0)]
    assert timing.stopped and not timing.moving
    assert timing.send(t.Update(H2, True)) == []
    assert timing.send(t.ConnectionLost()) == []
    timing.send(t.Forget())
    assert not timing.stopped and timing.latest_handle is None


def test_during_a_move_a_handle_is_a_fallback_and_a_goaway_is_ignored() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.Update(H1, True))
    timing.send(t.ConnectionLost())
    timing.send(t.Update(H2, True))
    assert timing.latest_handle == H2 and not timing.at_point
    assert timing.send(t.GoAway(0.0, 30.0)) == []
    assert timing.send(t.ConnectionLost()) == []
    assert timing.send(t.AttemptSucceeded()) == []
    assert not timing.moving and not timing.at_point


def test_dispose_cancels_the_timers_and_stops_until_forget() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(
        ResumptionOptions(storm_spread=4.0), spread_draw=lambda: 0.5
    )
    at_point(timing)
    timing.send(t.GoAway(0.0, 30.0))
    assert timing.send(t.Dispose()) == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.CancelTimer(TimerKind.SPREAD),
    ]
    assert timing.stopped
    assert timing.send(t.GoAway(1.0, 30.0)) == []


# --- what the rotation adds -------------------------------------------------------------------


def test_a_setup_change_moves_for_config_unless_a_goaway_came_too() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]
    assert timing.deadline == 600.0
    move = only_move(timing.send(t.Update(H2, True)))
    assert move.reason is MoveReason.CONFIG and not move.forced

    timing = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    timing.send(t.ConfigChanged(0.0, 600.0))
    timing.send(t.GoAway(1.0, 30.0))
    assert only_move(timing.send(t.Update(H2, True))).reason is MoveReason.PLANNED

    timing = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    timing.send(t.ConfigChanged(0.0, 600.0))
    timing.send(t.ConfigDropped())
    move = only_move(timing.send(t.TimerExpired(TimerKind.FALLBACK, 595.0)))
    assert move.reason is MoveReason.DEADLINE and move.forced


def test_a_request_moves_now_from_the_point_or_forced_from_the_latest_handle() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    assert only_move(timing.send(t.Requested())) == t.MoveNow(
        MoveReason.REQUESTED, None, HandleKind.NONE, forced=False
    )
    at_point(timing)
    assert only_move(timing.send(t.Requested())) == t.MoveNow(
        MoveReason.REQUESTED, H1, HandleKind.AFTER_TURN, forced=False
    )
    assert only_move(timing.send(t.Requested())) == t.MoveNow(
        MoveReason.REQUESTED, H1, HandleKind.MID_TURN, forced=True
    )


def test_a_session_resumed_from_a_handle_keeps_it_as_no_point() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.ResumedFrom(H1))
    assert timing.latest_handle == H1 and not timing.at_point
    assert timing.send(t.GoAway(0.0, 30.0)) == [t.StartTimer(25.0, TimerKind.FALLBACK)]


def test_a_setup_change_on_a_session_resumed_from_a_handle_moves_now_from_it() -> None:
    """Until the resumed session answers, it issues no handle: the move comes now, forced from
    the handle resumed from (mid-turn: it may be another process's, taken at any moment)."""
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.ResumedFrom(H1))
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [
        t.MoveNow(MoveReason.CONFIG, H1, HandleKind.MID_TURN, forced=True)
    ]

    # A goAway waiting on its fallback: the setup change moves now, for the setup.
    timing = t.MoveTiming(FAST, attempts=False)
    timing.send(t.ResumedFrom(H1))
    assert timing.send(t.GoAway(0.0, 30.0)) == [t.StartTimer(25.0, TimerKind.FALLBACK)]
    assert timing.send(t.ConfigChanged(1.0, 600.0)) == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.MoveNow(MoveReason.CONFIG, H1, HandleKind.MID_TURN, forced=True),
    ]

    # Once the user was heard, or the session issued a handle of its own, it waits.
    for since in (t.Heard(), t.Update(H2, False)):
        timing = t.MoveTiming(FAST, attempts=False)
        timing.send(t.ResumedFrom(H1))
        timing.send(since)
        assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]

    # A switch that replayed a turn leaves that handle behind (its connection is not quiet).
    timing = t.MoveTiming(FAST, attempts=False)
    timing.send(t.ResumedFrom(H1))
    timing.send(t.Switched(resumed=True, replayed_turn=True))
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]


def test_a_goaway_on_a_quiet_connection_moves_at_once() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    at_point(timing)
    only_move(timing.send(t.GoAway(0.0, 30.0)))
    timing.send(t.Switched(resumed=True))
    assert timing.quiet
    move = only_move(timing.send(t.GoAway(100.0, 30.0)))
    assert move == t.MoveNow(MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, forced=False)

    # Said anything since the switch: the goAway waits for a resumable point.
    timing.send(t.Switched(resumed=True))
    timing.send(t.Heard())
    assert not timing.quiet
    assert moves(timing.send(t.GoAway(200.0, 30.0))) == []


def test_a_connection_a_replayed_turn_reached_is_not_quiet() -> None:
    """The user's speech replayed into the new connection is a turn it may be answering
    before it says so: a goAway right after the switch waits for a resumable point."""
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    at_point(timing)
    only_move(timing.send(t.GoAway(0.0, 30.0)))
    timing.send(t.Switched(resumed=True, replayed_turn=True))
    assert not timing.quiet
    assert moves(timing.send(t.GoAway(100.0, 30.0))) == []


def test_a_goaway_on_a_quiet_rebuilt_connection_with_no_handle_rebuilds_if_it_can() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, True))
    timing.send(t.Switched(resumed=False))
    assert timing.latest_handle is None and timing.quiet
    assert timing.send(t.GoAway(0.0, 30.0, rebuild_when_quiet=True)) == [
        t.MoveNow(MoveReason.PLANNED, None, HandleKind.NONE, forced=False)
    ]
    timing.send(t.Switched(resumed=False))
    assert timing.send(t.GoAway(0.0, 30.0)) == [t.StartTimer(25.0, TimerKind.FALLBACK)]


def test_a_goaway_keeping_the_answered_deadline_ends_a_capped_session() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, True))
    only_move(timing.send(t.GoAway(0.0, 60.0, capped=True)))
    timing.send(t.Switched(resumed=True))
    assert timing.answered_deadline == 60.0
    timing.send(t.Heard())
    timing.send(t.TurnStarted())
    # The same end, read a little later (within the tolerance): the session is ending.
    actions = timing.send(t.GoAway(10.0, 50.5, capped=True))
    assert t.SessionEnds() in actions and timing.ending
    move = only_move(timing.send(t.ConnectionLost()))
    assert (move.reason, move.handle, move.kind) == (MoveReason.LOST, None, HandleKind.NONE)
    timing.send(t.Switched(resumed=False))
    assert not timing.ending and timing.answered_deadline is None


def test_a_later_deadline_or_an_uncapped_session_is_no_end() -> None:
    for later, capped in ((52.0, True), (50.0, False)):
        timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
        timing.send(t.Update(H1, True))
        timing.send(t.GoAway(0.0, 60.0, capped=capped))
        timing.send(t.Switched(resumed=True))
        timing.send(t.TurnStarted())
        assert t.SessionEnds() not in timing.send(t.GoAway(10.0, later, capped=capped))


def test_an_abandoned_move_waits_with_the_notice_left_and_the_turn_in_progress() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    at_point(timing)
    only_move(timing.send(t.GoAway(0.0, 30.0)))
    actions = timing.send(t.Abandoned(12.0, H2))
    # 18 s left: a third is 6 s, bounded by the 5 s margin.
    assert actions == [t.StartTimer(25.0, TimerKind.FALLBACK)]
    assert timing.latest_handle == H2 and timing.in_turn and timing.deadline == 30.0
    timing.send(t.TurnEnded())
    assert only_move(timing.send(t.Update(H1, True))).reason is MoveReason.PLANNED


def test_reprs_show_no_handle_whole() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST)
    timing.send(t.Update(H1, True))
    actions = timing.send(t.ConnectionLost())
    shown = " ".join(
        repr(item)
        for item in (timing, *actions, t.Update(H1, True), t.Abandoned(0.0, H1), t.ResumedFrom(H1))
    )
    assert H1 not in shown
    # Each shows the handle redacted, as the logs do.
    for item in (timing, *moves(actions), t.Update(H1, True), t.Abandoned(0.0, H1)):
        assert redact(H1) in repr(item), item
    assert redact(H1) in repr(t.ResumedFrom(H1))
    assert "reason='lost'" in repr(only_move(actions)) and "forced=True" in repr(actions[0])
    # Each field shows its own value: the decider's latest handle, the move's kind.
    assert f"latest_handle={redact(H1)}" in repr(timing)
    assert f"kind={str(only_move(actions).kind)!r}" in repr(only_move(actions))


# --- any sequence -----------------------------------------------------------------------------

EVENTS = st.one_of(
    st.builds(t.Update, st.sampled_from([H1, H2, None, ""]), st.sampled_from([True, False, None])),
    st.just(t.TurnStarted()),
    st.just(t.TurnEnded()),
    st.just(t.Heard()),
    st.builds(
        t.GoAway,
        st.just(0.0),
        st.one_of(st.none(), st.floats(-5, 120)),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(t.ConfigChanged, st.just(0.0), st.floats(0, 700)),
    st.just(t.ConfigDropped()),
    st.just(t.Requested()),
    st.builds(t.ResumedFrom, st.sampled_from([H1, H2])),
    st.builds(t.TimerExpired, st.sampled_from(list(TimerKind)), st.just(0.0)),
    st.just(t.ConnectionLost()),
    st.just(t.AttemptSucceeded()),
    st.just(t.AttemptFailed()),
    st.builds(t.Switched, st.booleans(), st.booleans()),
    st.builds(t.Abandoned, st.just(0.0), st.sampled_from([H1, H2, None])),
    st.just(t.Forget()),
    st.just(t.Dispose()),
)


@settings(max_examples=300, deadline=None)
@given(
    attempts=st.booleans(),
    steps=st.lists(st.tuples(st.floats(0, 40), EVENTS), max_size=40),
)
def test_any_sequence_keeps_the_timers_and_the_rules(
    attempts: bool, steps: list[tuple[float, t.Event[str]]]
) -> None:
    """Whatever happens: the caller's timers are the machine's (started before cancelled,
    expiries reported only for running ones), the fallback keeps the margin before the
    deadline just announced, a
    planned move only leaves from a resumable point, and a stopped machine asks for nothing."""
    timing: t.MoveTiming[str] = t.MoveTiming(
        ResumptionOptions(storm_spread=3.0, retry_delays=(0.0, 1.0)),
        attempts=attempts,
        spread_draw=lambda: 0.5,
    )
    now = 0.0
    running: dict[TimerKind, float] = {}
    for advance, event in steps:
        now += advance
        if isinstance(event, t.TimerExpired):
            if event.kind not in running:
                continue  # a caller reports only the expiry of a running timer
            now = max(now, running.pop(event.kind))
            event = t.TimerExpired(event.kind, now)
        elif isinstance(event, (t.GoAway, t.ConfigChanged, t.Abandoned)):
            # Time passes in order: a timer due meanwhile has expired first.
            if running and min(running.values()) <= now:
                continue
            event = _at(event, now)
        point, stopped = timing.at_point, timing.stopped
        actions = timing.send(event)
        if stopped and not isinstance(event, t.Forget):
            assert actions == []
        for action in actions:
            if isinstance(action, t.StartTimer):
                assert action.at >= now
                running[action.kind] = action.at
            elif isinstance(action, t.CancelTimer):
                assert running.pop(action.kind, None) is not None
            elif isinstance(action, t.MoveNow):
                if action.reason is MoveReason.PLANNED and action.handle is not None:
                    assert action.kind is HandleKind.AFTER_TURN
                if action.kind is HandleKind.AFTER_TURN and not isinstance(
                    event, (t.GoAway, t.ConfigChanged)
                ):
                    assert point or isinstance(event, t.Update)
            elif isinstance(action, t.Attempt):
                assert attempts
        assert not timing.at_point or timing.latest_handle is not None
        if (
            timing.wanted
            and isinstance(event, (t.GoAway, t.ConfigChanged))
            and not moves(actions)  # (a quiet rebuild answers the goAway at once)
        ):
            notice = (
                t.notice_seconds(event.time_left) if isinstance(event, t.GoAway) else event.within
            )
            assert timing.fallback_at is not None
            assert timing.fallback_at <= now + notice - t.MIN_DEADLINE_MARGIN
        if TimerKind.FALLBACK in running:
            assert timing.wanted
        if timing.moving:
            assert attempts


def _at(event: t.GoAway | t.ConfigChanged | t.Abandoned[str], now: float) -> t.Event[str]:
    if isinstance(event, t.GoAway):
        return t.GoAway(now, event.time_left, event.rebuild_when_quiet, event.capped)
    if isinstance(event, t.ConfigChanged):
        return t.ConfigChanged(now, event.within)
    return t.Abandoned(now, event.handle)


# --- guards found by mutation -------------------------------------------------------------


def test_a_negative_notice_counts_as_none_left() -> None:
    assert t.notice_seconds(-5.0) == 0.0
    assert t.notice_seconds(12.0) == 12.0


def test_a_goaway_at_the_tolerance_s_edge_still_ends_the_capped_session() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, True))
    only_move(timing.send(t.GoAway(0.0, 60.0, capped=True)))
    timing.send(t.Switched(resumed=True))
    timing.send(t.TurnStarted())
    assert t.SessionEnds() in timing.send(t.GoAway(10.0, 51.0, capped=True))
    # Forced or not as the move would be: the fallback forces this one.
    move = only_move(timing.send(t.TimerExpired(TimerKind.FALLBACK, 56.0)))
    assert move == t.MoveNow(MoveReason.DEADLINE, None, HandleKind.NONE, forced=True)


def test_a_quiet_goaway_with_a_move_wanted_already_moves_without_the_spread() -> None:
    options = ResumptionOptions(storm_spread=4.0)
    timing: t.MoveTiming[str] = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.5)
    at_point(timing)
    only_move(timing.send(t.Requested()))
    # A setup change while the move runs: the connection it installs is wanted away too.
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]
    timing.send(t.Switched(resumed=True))
    assert timing.send(t.GoAway(1.0, 30.0)) == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.MoveNow(MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, forced=False),
    ]


def test_a_setup_change_on_a_quiet_connection_moves_now_from_its_handle() -> None:
    """No resumable point comes before the user's next turn there: the move does not wait
    for one, and is forced (input held for the new connection, a turn begun meanwhile goes
    to it whole)."""
    options = ResumptionOptions(storm_spread=4.0)
    timing: t.MoveTiming[str] = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.5)
    at_point(timing)
    only_move(timing.send(t.Requested()))
    timing.send(t.Switched(resumed=True))
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [
        t.MoveNow(MoveReason.CONFIG, H1, HandleKind.AFTER_TURN, forced=True)
    ]
    assert not timing.wanted and not timing.at_point


def test_a_setup_change_on_a_connection_that_issued_no_handle_rebuilds_now() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [
        t.MoveNow(MoveReason.CONFIG, None, HandleKind.NONE, forced=True)
    ]
    assert not timing.wanted

    # A goAway's want waiting on its fallback ends with that move.
    timing = t.MoveTiming(FAST, attempts=False)
    assert timing.send(t.GoAway(0.0, 30.0)) == [t.StartTimer(25.0, TimerKind.FALLBACK)]
    assert timing.send(t.ConfigChanged(1.0, 600.0)) == [
        t.CancelTimer(TimerKind.FALLBACK),
        t.MoveNow(MoveReason.CONFIG, None, HandleKind.NONE, forced=True),
    ]
    assert not timing.wanted


def test_a_setup_change_at_a_point_on_a_quiet_connection_is_a_planned_move() -> None:
    """The point came (the service issued a resumable handle): the move leaves from it as a
    planned one, which yields to a turn, not a forced one."""
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    at_point(timing)
    only_move(timing.send(t.Requested()))
    timing.send(t.Switched(resumed=True))
    timing.send(t.Update(H2, True))
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [
        t.MoveNow(MoveReason.CONFIG, H2, HandleKind.AFTER_TURN, forced=False)
    ]


def test_a_setup_change_during_a_turn_waits_for_the_point_after_it() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.TurnStarted())
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]
    timing.send(t.TurnEnded())
    move = only_move(timing.send(t.Update(H1, True)))
    assert move == t.MoveNow(MoveReason.CONFIG, H1, HandleKind.AFTER_TURN, forced=False)

    # Quiet since the switch, then a turn: its answer will bring the point.
    timing = t.MoveTiming(FAST, attempts=False)
    at_point(timing)
    only_move(timing.send(t.Requested()))
    timing.send(t.Switched(resumed=True))
    timing.send(t.TurnStarted())
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]


def test_a_setup_change_where_a_turn_was_answered_waits_for_its_point() -> None:
    """Not quiet, a handle, no point yet (the answer's resumable handle is on its way)."""
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.Update(H1, False))
    timing.send(t.Heard())
    assert timing.send(t.ConfigChanged(0.0, 600.0)) == [t.StartTimer(595.0, TimerKind.FALLBACK)]


def test_a_quiet_goaway_with_no_move_wanted_yet_is_spread() -> None:
    options = ResumptionOptions(storm_spread=4.0)
    timing: t.MoveTiming[str] = t.MoveTiming(options, attempts=False, spread_draw=lambda: 0.5)
    at_point(timing)
    only_move(timing.send(t.Requested()))
    timing.send(t.Switched(resumed=True))
    assert timing.send(t.GoAway(0.0, 30.0)) == [
        t.StartTimer(2.0, TimerKind.SPREAD),
        t.StartTimer(25.0, TimerKind.FALLBACK),
    ]


@pytest.mark.parametrize("end", ["switched", "forget", "succeeded"])
def test_a_move_s_end_forgets_the_goaway_it_answered(end: str) -> None:
    """After the move (or a forget), a setup change alone moves for ``config``."""
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=end == "succeeded")
    at_point(timing)
    only_move(timing.send(t.GoAway(0.0, 30.0)))
    if end == "switched":
        timing.send(t.Switched(resumed=True))
    elif end == "forget":
        timing.send(t.Forget())
    else:
        timing.send(t.AttemptSucceeded())
    # (In a turn: where nothing was said, a setup change would move at once.)
    timing.send(t.TurnStarted())
    timing.send(t.ConfigChanged(1.0, 600.0))
    timing.send(t.TurnEnded())
    assert only_move(timing.send(t.Update(H2, True))).reason is MoveReason.CONFIG


# --- a provider without handles (rebuilds) ----------------------------------------------------


def rebuilding() -> t.MoveTiming[str]:
    return t.MoveTiming(FAST, attempts=False, rebuilds=True)


def test_without_handles_a_want_waits_for_the_turns_end_and_then_rebuilds() -> None:
    timing = rebuilding()
    timing.send(t.TurnStarted())
    actions = timing.send(t.GoAway(now=0.0, time_left=60.0))
    assert moves(actions) == [] and timing.wanted
    move = only_move(timing.send(t.TurnEnded()))
    assert (move.reason, move.handle, move.kind, move.forced) == (
        MoveReason.PLANNED,
        None,
        HandleKind.NONE,
        False,
    )
    assert not timing.wanted and not timing.at_point


def test_without_handles_a_turns_end_before_the_want_makes_the_want_move_at_once() -> None:
    timing = rebuilding()
    timing.send(t.TurnStarted())
    assert timing.send(t.TurnEnded()) == [] and timing.at_point
    move = only_move(timing.send(t.GoAway(now=0.0, time_left=60.0)))
    assert move.reason is MoveReason.PLANNED and move.handle is None


def test_without_handles_the_fallback_rebuilds_forced_instead_of_lapsing() -> None:
    timing = rebuilding()
    timing.send(t.TurnStarted())
    actions = timing.send(t.GoAway(now=0.0, time_left=60.0))
    [timer] = [a for a in actions if isinstance(a, t.StartTimer)]
    assert timer.kind is TimerKind.FALLBACK and timer.at == 55.0
    move = only_move(timing.send(t.TimerExpired(TimerKind.FALLBACK, 55.0)))
    assert (move.reason, move.handle, move.forced) == (MoveReason.DEADLINE, None, True)
    assert not any(isinstance(a, t.Lapsed) for a in actions)


def test_with_handles_a_turns_end_is_no_point_and_the_fallback_still_lapses() -> None:
    timing: t.MoveTiming[str] = t.MoveTiming(FAST, attempts=False)
    timing.send(t.TurnStarted())
    timing.send(t.GoAway(now=0.0, time_left=60.0))
    assert timing.send(t.TurnEnded()) == [] and not timing.at_point
    assert timing.send(t.TimerExpired(TimerKind.FALLBACK, 55.0)) == [t.Lapsed()]


def test_a_rebuilding_timing_that_would_run_the_attempts_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"^a MoveTiming that rebuilds leaves the attempts to its caller$"
    ):
        t.MoveTiming(FAST, rebuilds=True)
