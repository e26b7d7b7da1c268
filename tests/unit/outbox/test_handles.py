"""Outbox promises about handles, round trips, switches, turn boundaries and counters: what a
resume replays at the exact edges of the arrival rule (with the shipped tolerance and on a
jittery link), which round-trip reports count, that only the connection that answered proves
an answer, how repeated handles, restated turns and late write failures are handled, what a
rebuild queues and reports, when an activity is reopened, and what the counters say."""

from __future__ import annotations

import math

import pytest
from loguru import logger

from realtime_resumption.outbox import (
    MessageKind,
    Outbox,
    OutboxLimits,
    Replay,
    ReplayScope,
    UnknownHandleError,
)

from .wire import CHUNK, TOOL, TXT, A, Wire, make, send


def _answered_turns(outbox: Outbox[str], wire: Wire, count: int) -> None:
    """``count`` turns on connection 2 (``t2`` on, one a second), each completed and then
    held by a handle (``h2`` on) that consumed everything written."""
    for n in range(1, count + 1):
        send(outbox, wire, float(n), f"t{n + 1}")
        outbox.turn_completed()
        outbox.record_handle(f"h{n + 1}", 2, n + 0.5, last_consumed_index=wire.index[2])


def _audio_at(outbox: Outbox[str], wire: Wire, *times: float) -> None:
    """Write one audio chunk at each of ``times``, named by its time in ms."""
    for now in times:
        send(outbox, wire, now, f"a{round(now * 1000)}")


# -- counters ----------------------------------------------------------------------------


def test_stats_count_exactly_what_was_submitted_written_resent_and_discarded() -> None:
    outbox, wire = make()
    assert (outbox.stats.submitted, outbox.stats.sent, outbox.stats.resent) == (0, 0, 0)
    assert outbox.stats.tool_responses_discarded == 0
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1", "r1")
    assert (outbox.stats.submitted, outbox.stats.sent, outbox.stats.resent) == (2, 2, 0)
    outbox.record_handle("h1", 1, 0.1, last_consumed_index=0)
    outbox.attach_resumed(2, "h1", 0.2)
    assert wire.flush(0.2) == ["t1", "r1"]
    assert (outbox.stats.submitted, outbox.stats.sent, outbox.stats.resent) == (2, 4, 2)
    # Each rebuild discards the tool result it finds; the counter adds them up.
    outbox.attach_fresh(3, 0.3)
    assert wire.flush(0.3) == ["t1"]
    send(outbox, wire, 0.4, "r2")
    assert outbox.attach_fresh(4, 0.5).tool_responses_discarded == 1
    assert outbox.stats.tool_responses_discarded == 2


# -- round trips -------------------------------------------------------------------------


def test_a_measured_round_trip_of_zero_narrows_the_replay_to_the_tolerance() -> None:
    """Zero is a measurement (a loopback link), not "unmeasured": the window is the
    tolerance, not ``handle_margin``."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, 0.0)
    _audio_at(outbox, wire, 0.75, 0.98)
    outbox.record_handle("h1", 1, 1.0)
    outbox.attach_resumed(2, "h1", 1.1)
    assert wire.flush(1.1) == ["a980"]


@pytest.mark.parametrize("jitter", [-0.5, math.nan, math.inf])
def test_an_unusable_jitter_is_ignored_and_the_tolerance_applies(jitter: float) -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, 0.01, jitter)
    _audio_at(outbox, wire, 0.5, 0.97)
    outbox.record_handle("h1", 1, 1.0)
    outbox.attach_resumed(2, "h1", 1.1)
    assert wire.flush(1.1) == ["a970"]


def test_a_larger_jitter_on_the_same_round_trip_widens_the_replay() -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, 0.01, 0.0)
    outbox.round_trip_measured(1, 0.01, 0.2)
    _audio_at(outbox, wire, 0.5, 0.85)
    outbox.record_handle("h1", 1, 1.0)
    outbox.attach_resumed(2, "h1", 1.1)
    assert wire.flush(1.1) == ["a850"]


def test_a_round_trip_reported_for_a_connection_not_live_changes_nothing() -> None:
    """A late report from a connection that went away neither fails (during the gap) nor
    narrows the live connection's margin, which is still unmeasured."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.detach(1)
    outbox.round_trip_measured(1, 0.01)
    outbox.attach_fresh(2, 0.0)
    outbox.round_trip_measured(1, 0.0)
    _audio_at(outbox, wire, 0.5, 0.8)
    outbox.record_handle("h2", 2, 1.0)
    outbox.attach_resumed(3, "h2", 1.1)
    assert wire.flush(1.1) == ["a800"]  # within the unmeasured 0.3 s handle_margin


def _replayed_around(
    outbox: Outbox[str], wire: Wire, *, round_trip: float, jitter: float, before: list[float]
) -> list[str]:
    """Audio written ``before`` seconds before the one-round-trip boundary of a handle that
    arrives at 1.0 s, on a link of ``round_trip`` varying by ``jitter``: what a resume from
    that handle replays."""
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, round_trip, jitter)
    boundary = 1.0 - round_trip
    for seconds in before:
        send(outbox, wire, boundary - seconds, f"a-{round(seconds * 1000)}ms")
    outbox.record_handle("h1", 1, 1.0)
    outbox.attach_resumed(2, "h1", 1.1)
    return wire.flush(1.1)


def test_the_shipped_tolerance_replays_audio_within_40_ms_of_the_boundary() -> None:
    """README: "audio within twice the kernel's deviation (at least 40 ms,
    ``OutboxLimits.round_trip_tolerance``) ... is replayed too", with the shipped limits."""
    assert OutboxLimits().round_trip_tolerance == pytest.approx(0.04)
    outbox: Outbox[str] = Outbox(OutboxLimits())
    replayed = _replayed_around(
        outbox, Wire(outbox), round_trip=0.006, jitter=0.0, before=[0.1, 0.06, 0.03, 0.01]
    )
    assert replayed == ["a-30ms", "a-10ms"]


def test_a_jitter_beyond_the_tolerance_widens_the_replay() -> None:
    """README: twice the kernel's deviation (the jitter) when that exceeds the tolerance: a
    jittery link replays what it might still have had in flight (80 ms here, not 40)."""
    outbox: Outbox[str] = Outbox(OutboxLimits())
    replayed = _replayed_around(
        outbox, Wire(outbox), round_trip=0.006, jitter=0.08, before=[0.2, 0.09, 0.06, 0.03]
    )
    assert replayed == ["a-60ms", "a-30ms"]


# -- the arrival rule's edges ------------------------------------------------------------


def test_audio_written_exactly_handle_margin_before_a_handle_is_replayed() -> None:
    """``handle_margin``: margin-kind messages written *this long* before a handle arrived
    are replayed."""
    outbox, wire = make(handle_margin=0.25)
    outbox.attach_fresh(1, 0.0)
    _audio_at(outbox, wire, 0.5, 0.75)
    outbox.record_handle("h1", 1, 1.0)
    replay = outbox.attach_resumed(2, "h1", 1.1)
    assert wire.flush(1.1) == ["a750"]
    assert replay.possibly_duplicated == 1


def test_text_written_exactly_one_round_trip_before_a_handle_is_held() -> None:
    """Arrival: the session holds the messages written *at least* one round trip before the
    handle arrived."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, 0.25)
    send(outbox, wire, 0.75, "t1")
    send(outbox, wire, 0.875, "t2")
    outbox.record_handle("h1", 1, 1.0)
    outbox.attach_resumed(2, "h1", 1.1)
    assert wire.flush(1.1) == ["t2"]


@pytest.mark.parametrize("other", [0, 2])
def test_an_answer_on_another_connection_proves_nothing_on_the_live_one(other: int) -> None:
    """ "When the model answers after a tool result, the session has taken in that result":
    the session of the connection that answered. An answer reported for another connection (a
    late report from the old one, or one not yet live) leaves the live one's replay to timing."""
    outbox: Outbox[str] = Outbox(OutboxLimits())
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0, round_trip=0.01)
    outbox.submit("a-question", A, 0.6, audio_seconds=CHUNK)
    result = outbox.submit("r-result", TOOL, 0.6)
    wire.flush(0.6)
    outbox.mark_written(result, 1, 0.6)
    outbox.model_answered(other)
    send(outbox, wire, 0.9, "a-after")
    outbox.record_handle("h1", 1, 0.55)
    outbox.attach_resumed(2, "h1", 1.0)
    assert wire.flush(1.0) == ["a-question", "r-result", "a-after"]


# -- handles -----------------------------------------------------------------------------


def test_a_repeated_handle_becomes_the_newest_resumption_point() -> None:
    outbox, wire = make(max_handles=2)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle("h1", 1, 1.0)
    outbox.record_handle("h2", 1, 2.0)
    outbox.record_handle("h1", 1, 3.0)  # issued again: now the newest
    outbox.record_handle("h3", 1, 4.0)
    assert outbox.stats.handles == 2
    with pytest.raises(UnknownHandleError):
        outbox.attach_resumed(2, "h2", 5.0)
    outbox.attach_resumed(2, "h1", 5.0)
    assert wire.flush(5.0) == []


def test_a_handle_consuming_exactly_what_was_written_logs_no_warning() -> None:
    """The usual Vertex case (everything written was consumed) is not a claim beyond what
    was written: only that is worth a warning."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1", "t2")
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    try:
        outbox.record_handle("h1", 1, 0.1, last_consumed_index=2)
        assert warnings == []
        outbox.record_handle("h2", 1, 0.2, last_consumed_index=3)
        assert len(warnings) == 1
    finally:
        logger.remove(sink)


def test_messages_written_after_a_restated_turn_are_replayed() -> None:
    """A restated turn goes to its connection alone; what follows it is replayed as usual."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle("h1", 1, 0.1, last_consumed_index=1)
    outbox.submit("t-again", TXT, 0.2, scope=ReplayScope.CONNECTION)
    send(outbox, wire, 0.2, "t2", "a1")
    outbox.detach(1)
    replay = outbox.attach_resumed(2, "h1", 0.3)
    assert wire.flush(0.3) == ["t2", "a1"]
    assert replay.replayed == 2


def test_a_restated_turn_left_behind_by_a_move_does_not_pin_the_log() -> None:
    """No later session is owed a restated turn, so once every retained point holds what
    follows it the log is pruned as usual: memory follows the recent past, not the length of
    the conversation."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle("h1", 1, 0.1, last_consumed_index=1)
    outbox.submit("t-again", TXT, 0.2, scope=ReplayScope.CONNECTION)
    wire.flush(0.2)
    outbox.detach(1)  # before any handle after the restated turn
    outbox.attach_resumed(2, "h1", 0.3)
    assert wire.flush(0.3) == []
    _answered_turns(outbox, wire, 20)
    # Only the newest turn is left: the handle before the newest one lacks it.
    assert outbox.stats.retained == 1
    assert outbox.lacking("h21") == []


@pytest.mark.parametrize("scope", [ReplayScope.CONNECTION, ReplayScope.RESUMED])
def test_a_message_the_next_session_is_not_owed_does_not_pin_the_log(
    scope: ReplayScope,
) -> None:
    """A restated turn the old connection never wrote (not sent to the resumed session), or
    history not yet written when a rebuild seeds it (not sent to the rebuilt one): once
    every point holds what follows, the log is pruned as usual."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle("h1", 1, 0.1, last_consumed_index=1)
    outbox.turn_completed()
    outbox.submit("left-behind", MessageKind.CONTENT, 0.2, scope=scope)
    outbox.detach(1)
    if scope is ReplayScope.CONNECTION:
        outbox.attach_resumed(2, "h1", 0.3)
    else:
        outbox.attach_fresh(2, 0.3)
    assert wire.flush(0.3) == []
    _answered_turns(outbox, wire, 10)
    # Only the newest turn is left: the handle before the newest one lacks it.
    assert outbox.stats.retained == 1


def test_a_write_that_failed_after_a_move_reaches_the_connection_after_next() -> None:
    """A write to the old connection reported failed once a move pruned it (the new
    connection's session starts after everything retained) is queued again, and stays owed
    to every later session until one is written it, whatever handles arrive meanwhile."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    entry = outbox.submit("t1", TXT, 0.0)
    outbox.mark_sent(entry, 1, 1, 0.0)  # the write is in flight
    outbox.turn_completed()
    outbox.record_handle("h1", 1, 5.0)
    assert outbox.stats.retained == 0
    outbox.attach_resumed(2, "h1", 5.0)
    outbox.mark_unsent(entry, 1)  # it never got there
    outbox.record_handle("h2", 2, 5.1)  # before connection 2 writes it
    assert outbox.lacking("h2") == ["t1"]
    outbox.detach(2)
    outbox.attach_resumed(3, "h2", 5.2)
    assert wire.flush(5.2) == ["t1"]


# -- turn boundaries and rebuilds --------------------------------------------------------


def test_a_turn_completed_before_any_connection_changes_nothing() -> None:
    outbox, wire = make()
    send(outbox, wire, 0.0, "t1")
    outbox.turn_completed()
    assert outbox.lacking(None) == ["t1"]
    outbox.attach_fresh(1, 0.1)
    assert wire.flush(0.1) == ["t1"]


def test_a_turn_completed_before_the_new_connection_wrote_keeps_the_boundary() -> None:
    """The boundary is the last message written on the connection that reported the turn:
    a connection that wrote nothing yet does not move it back, so a rebuild does not repeat
    the turn the history already holds."""
    outbox, wire = make()
    outbox.attach_fresh(1, 1.0)
    send(outbox, wire, 1.0, "t1")
    outbox.turn_completed()
    outbox.record_handle("h1", 1, 1.0, last_consumed_index=1)
    outbox.attach_resumed(2, "h1", 1.0)
    outbox.turn_completed()
    assert outbox.lacking(None) == []
    outbox.attach_fresh(3, 1.0)
    assert wire.flush(1.0) == []


def test_a_turn_completed_with_nothing_new_written_still_reports_what_a_rebuild_lost() -> None:
    """Written audio released by the bound before any turn committed it is a loss for a
    rebuild; a turn completion that commits nothing new does not make it one no more."""
    outbox, wire = make(max_audio_seconds=2 * CHUNK)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "a1", "a2")
    outbox.record_handle("h1", 1, 0.1, last_consumed_index=2)
    outbox.attach_resumed(2, "h1", 0.2)
    for name in ("a3", "a4"):  # queued, not written: a1 and a2 give way
        outbox.submit(name, A, 0.3, audio_seconds=CHUNK)
    outbox.turn_completed()
    replay = outbox.attach_fresh(3, 0.4)
    assert wire.flush(0.4) == ["a3", "a4"]
    assert replay.audio_chunks_dropped == 2


def test_what_a_rebuild_would_lack_is_what_it_queues() -> None:
    """``lacking(None)`` (and for a handle no longer held): what ``attach_fresh`` queues, in
    order: no turn the history committed, no history, no restated turn, no tool result."""
    outbox, wire = make()
    outbox.attach_fresh(1, 1.0)
    send(outbox, wire, 1.0, "t1")
    outbox.turn_completed()  # t1 is still retained, within the margin of now
    outbox.submit("history", MessageKind.CONTENT, 1.0, scope=ReplayScope.RESUMED)
    outbox.submit("t-again", TXT, 1.0, scope=ReplayScope.CONNECTION)
    send(outbox, wire, 1.0, "t2", "r1", "a1")
    assert outbox.stats.retained == 6
    assert outbox.lacking(None) == ["t2", "a1"]
    assert outbox.lacking("never-recorded") == ["t2", "a1"]
    outbox.attach_fresh(2, 1.0)
    assert wire.flush(1.0) == ["t2", "a1"]


def test_a_turn_completed_after_the_first_write_failed_still_reports_what_a_rebuild_lost() -> None:
    """The connection is lost, its first write failed, and the history commits the answer
    it cut: nothing written remains to commit, so the audio released meanwhile is still a
    loss the rebuild reports."""
    outbox, wire = make(max_audio_seconds=2 * CHUNK)
    outbox.attach_fresh(1, 0.0)
    first = outbox.submit("t1", TXT, 0.0)
    send(outbox, wire, 0.0, "a2", "a3")
    outbox.detach(1)
    outbox.mark_unsent(first, 1)
    for name in ("a4", "a5"):  # held in the gap: a2 and a3 give way
        outbox.submit(name, A, 0.1, audio_seconds=CHUNK)
    outbox.turn_completed()
    replay = outbox.attach_fresh(2, 0.2)
    assert wire.flush(0.2) == ["t1", "a4", "a5"]
    assert replay.audio_chunks_dropped == 2


def test_the_first_session_is_sent_the_history_nothing_seeded_it_with() -> None:
    outbox, wire = make()
    outbox.submit("history", MessageKind.CONTENT, 0.0, scope=ReplayScope.RESUMED)
    send(outbox, wire, 0.0, "t1")
    assert outbox.attach_fresh(1, 0.1, seeded=False) == Replay(buffered=2, turn_input=2)
    assert wire.flush(0.1) == ["history", "t1"]


def test_a_session_resumed_from_a_rebuilt_one_is_not_sent_its_seeded_history_again() -> None:
    """A rebuilt session is seeded with the history; a snapshot of it holds the history, so
    a resume from its handle replays neither the history nor what it was written."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.submit("history", MessageKind.CONTENT, 0.1, scope=ReplayScope.RESUMED)
    send(outbox, wire, 0.1, "t1")
    outbox.detach(1)
    outbox.attach_fresh(2, 0.4)
    assert wire.flush(0.4) == ["t1"]
    send(outbox, wire, 1.0, "t2")
    outbox.record_handle("h2", 2, 2.0, last_consumed_index=wire.index[2])
    assert outbox.lacking("h2") == []
    outbox.detach(2)
    outbox.attach_resumed(3, "h2", 2.1)
    assert wire.flush(2.1) == []


def test_history_sent_after_a_rebuild_is_owed_to_a_session_resumed_before_it_was_written() -> None:
    """The seed holds the history sent before the rebuild, not the history sent after it."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.detach(1)
    outbox.attach_fresh(2, 0.1)
    outbox.submit("history", MessageKind.CONTENT, 0.2, scope=ReplayScope.RESUMED)
    outbox.record_handle("h2", 2, 0.3, last_consumed_index=0)
    assert outbox.lacking("h2") == ["history"]
    outbox.detach(2)
    outbox.attach_resumed(3, "h2", 0.4)
    assert wire.flush(0.4) == ["history"]


def test_input_queued_for_a_rebuilt_session_but_not_written_is_owed_to_a_resume_from_it() -> None:
    """The seed holds the history, not the input queued for the rebuilt session: a handle it
    issued before that input was written lacks it, so a resume from that handle replays it."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.submit("t1", TXT, 0.1)  # never written to the first connection
    outbox.detach(1)
    outbox.attach_fresh(2, 0.2)  # the rebuild queues t1 for its session
    outbox.record_handle("h2", 2, 0.3, last_consumed_index=0)
    assert outbox.lacking("h2") == ["t1"]
    outbox.detach(2)
    outbox.attach_resumed(3, "h2", 0.4)
    assert wire.flush(0.4) == ["t1"]


# -- activity ----------------------------------------------------------------------------


def test_without_activity_markers_no_connection_is_asked_to_reopen_one() -> None:
    """Automatic activity detection (no markers): neither the first connection nor one that
    audio is replayed to gets an ``activityStart`` (the service would refuse it)."""
    outbox, wire = make()
    send(outbox, wire, 0.0, "a1")
    outbox.attach_fresh(1, 0.0)
    assert not outbox.activity_to_reopen
    wire.flush(0.0)
    outbox.record_handle("h1", 1, 1.0, last_consumed_index=0)
    outbox.detach(1)
    outbox.attach_resumed(2, "h1", 1.1)
    assert not outbox.activity_to_reopen
    assert wire.flush(1.1) == ["a1"]


def test_the_reopening_activity_start_must_follow_the_setup_message() -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.submit("s1", MessageKind.ACTIVITY_START, 0.0)
    outbox.record_handle("h1", 1, 0.0, last_consumed_index=0)
    wire.flush(0.0)
    outbox.attach_resumed(2, "h1", 0.1)
    assert wire.flush(0.1) == ["s1"]  # s1 itself is replayed: nothing to reopen
    outbox.submit("a1", A, 0.2, audio_seconds=CHUNK)
    wire.flush(0.2)
    outbox.record_handle("h2", 2, 0.3, last_consumed_index=2)
    outbox.submit("a2", A, 0.4, audio_seconds=CHUNK)
    outbox.attach_resumed(3, "h2", 0.4)
    assert outbox.activity_to_reopen
    with pytest.raises(ValueError, match="does not follow"):
        outbox.activity_reopened(3, 0)  # index 0 is the setup message
    outbox.activity_reopened(3, 1)
    assert not outbox.activity_to_reopen


# -- held silence ------------------------------------------------------------------------


def _silence_and_speech(
    limits: OutboxLimits, silence: float, speech: float
) -> tuple[Outbox[str], list[str]]:
    """Hold ``silence`` seconds of quiet chunks ("q…") then ``speech`` seconds of loud ones
    ("s…") during the first dial, then open the first connection: what it is written."""
    outbox: Outbox[str] = Outbox(limits, audio_level=lambda m: 0.0 if m[0] == "q" else 5000.0)
    wire = Wire(outbox)
    now = 0.0
    for kind, seconds in (("q", silence), ("s", speech)):
        for _ in range(round(seconds / CHUNK)):
            outbox.submit(f"{kind}{round(now * 1000)}", A, now, audio_seconds=CHUNK)
            now += CHUNK
    outbox.attach_fresh(1, now)
    return outbox, wire.flush(now)


def test_silence_that_opens_a_session_keeps_its_first_and_last_padding() -> None:
    """Held silence: of *every* stretch of silence the outbox keeps the first and the last
    ``silence_padding`` seconds, the one before the first speech included."""
    outbox, sent = _silence_and_speech(OutboxLimits(), silence=3.0, speech=0.2)
    quiet = [m for m in sent if m[0] == "q"]
    assert quiet == [f"q{t}" for t in range(0, 1000, 20)] + [f"q{t}" for t in range(2000, 3000, 20)]
    assert len(sent) - len(quiet) == 10
    assert outbox.stats.silence_seconds_skipped == pytest.approx(1.0)


def test_any_silence_level_above_zero_holds_speech_not_wall_time() -> None:
    limits = OutboxLimits(silence_level=0.5, silence_padding=0.1)
    outbox, sent = _silence_and_speech(limits, silence=1.0, speech=0.1)
    assert len([m for m in sent if m[0] == "q"]) == 10
    assert outbox.stats.silence_seconds_skipped == pytest.approx(0.8)


def test_with_silence_level_zero_audio_is_bound_by_age() -> None:
    """``silence_level`` 0 tells no silence apart, so audio is bound by age as without a
    level: older than ``max_media_age`` it is dropped and counted."""
    outbox: Outbox[str] = Outbox(
        OutboxLimits(silence_level=0.0, max_media_age=1.0), audio_level=lambda _: 0.0
    )
    wire = Wire(outbox)
    outbox.submit("a0", A, 0.0, audio_seconds=CHUNK)
    outbox.submit("a5000", A, 5.0, audio_seconds=CHUNK)
    replay = outbox.attach_fresh(1, 5.0)
    assert wire.flush(5.0) == ["a5000"]
    assert replay.audio_chunks_dropped == 1
