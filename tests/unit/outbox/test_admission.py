"""What the outbox admits, counts and writes again: the promises of its limits, of ``admit``,
of the writer's contract (a failed write comes back; a withdrawn or skipped one does not, nor
media a bound released meanwhile, which a move reports lost once), of its counters and of its
repr, each at its exact edge."""

from __future__ import annotations

import math

import pytest

from realtime_resumption.outbox import (
    Entry,
    MessageKind,
    Outbox,
    OutboxLimits,
    ReplayScope,
)

from .wire import CHUNK, TOOL, TXT, A, Wire, make, send

V = MessageKind.VIDEO


def _write(wire: Wire, entry: Entry[str], now: float) -> None:
    """Hand ``entry`` (the next one to send) to the live connection, as the writer does
    before awaiting the socket write (which the test then completes or fails)."""
    outbox = wire.outbox
    connection = outbox.live_connection
    assert connection is not None and outbox.next_unsent() is entry
    index = wire.index.get(connection, 0) + 1
    outbox.mark_sent(entry, connection, index, now)
    wire.index[connection] = index


def _pruned_in_flight(outbox: Outbox[str], wire: Wire, name: str, kind: MessageKind) -> Entry[str]:
    """An entry written to connection 1 and pruned while its write was in flight: a turn
    completed and a handle arrived that both count it as held (``handle_margin`` 0)."""
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t0")
    entry = outbox.submit(name, kind, 0.1, audio_seconds=CHUNK if kind is A else 0.0)
    _write(wire, entry, 0.1)
    outbox.turn_completed()
    outbox.record_handle("h1", 1, 0.2)
    assert outbox.stats.retained == 0
    return entry


# -- limits and admit ------------------------------------------------------------------------


def test_an_outbox_without_video_takes_everything_else_and_refuses_video_by_name() -> None:
    """``max_video_frames=0`` is a valid limit (">= 0"): an agent without a camera. Audio
    and text flow as usual; a video frame is refused up front, the error naming the limit."""
    outbox, wire = make(max_video_frames=0)
    outbox.admit(A, CHUNK)
    outbox.admit(TXT)
    with pytest.raises(ValueError, match="max_video_frames"):
        outbox.admit(V)
    with pytest.raises(ValueError, match="max_video_frames"):
        outbox.submit("v1", V, 0.0)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1", "a1")
    assert wire.written[1] == ["t1", "a1"]
    assert outbox.stats.submitted == 2


def test_one_video_frame_is_admitted_when_the_bound_holds_one() -> None:
    outbox, wire = make(max_video_frames=1)
    outbox.admit(V)
    outbox.submit("v1", V, 0.0)
    outbox.attach_fresh(1, 0.0)
    assert wire.flush(0.0) == ["v1"]


@pytest.mark.parametrize(
    ("limits", "name"),
    [({"max_video_frames": -1}, "max_video_frames"), ({"max_handles": 0}, "max_handles")],
)
def test_a_bad_count_limit_is_refused_naming_it(limits: dict[str, int], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        OutboxLimits(**limits)  # type: ignore[arg-type]


def test_a_chunk_longer_than_the_audio_bound_is_refused_naming_the_bound() -> None:
    """Taking it would release it (or earlier audio) at once: ``submit`` refuses it up front,
    and nothing is submitted."""
    outbox, _ = make(max_audio_seconds=0.5)
    with pytest.raises(ValueError, match="max_audio_seconds"):
        outbox.admit(A, 0.6)
    with pytest.raises(ValueError, match="max_audio_seconds"):
        outbox.submit("a-long", A, 0.0, audio_seconds=0.6)
    assert outbox.stats.submitted == 0


def test_admit_takes_a_message_that_is_not_audio_without_a_duration() -> None:
    outbox, _ = make()
    for kind in MessageKind:
        if kind is not A:
            outbox.admit(kind)


def test_the_longest_chunk_admit_accepts_is_held_not_released_at_once() -> None:
    """``admit`` refuses what "the bounds could never hold": so the longest chunk it accepts
    (found by bisection, whatever the float tolerance is) is held and sent whole."""
    limits = OutboxLimits(max_audio_seconds=0.5)
    outbox: Outbox[str] = Outbox(limits)
    accepted, refused = limits.max_audio_seconds, limits.max_audio_seconds + 1.0
    while math.nextafter(accepted, math.inf) < refused:
        middle = (accepted + refused) / 2
        if middle in (accepted, refused):
            break
        try:
            outbox.admit(A, middle)
        except ValueError:
            refused = middle
        else:
            accepted = middle
    outbox.submit("a-longest", A, 0.0, audio_seconds=accepted)
    assert outbox.stats.audio_chunks_dropped == 0
    outbox.attach_fresh(1, 0.0)
    assert Wire(outbox).flush(0.0) == ["a-longest"]


def test_media_exactly_as_old_as_the_age_limit_is_still_sent() -> None:
    """Media is held "none older than ``max_media_age``": media submitted exactly that long
    ago is kept, media older than that is released."""
    outbox, wire = make(max_media_age=2.0)
    outbox.submit("a-older", A, 0.5, audio_seconds=CHUNK)
    outbox.submit("v-older", V, 0.5)
    outbox.submit("a-at-limit", A, 1.0, audio_seconds=CHUNK)
    outbox.submit("v-at-limit", V, 1.0)
    replay = outbox.attach_fresh(1, 3.0)
    assert wire.flush(3.0) == ["a-at-limit", "v-at-limit"]
    assert (replay.audio_chunks_dropped, replay.video_frames_dropped) == (1, 1)


# -- counters and repr -------------------------------------------------------------------------


def test_stats_count_every_submit_every_write_and_every_rewrite() -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    outbox.record_handle("h0", 1, 0.0)  # before anything was written: holds nothing
    send(outbox, wire, 0.1, "t1", "t2", "t3")
    outbox.detach(1)
    outbox.attach_resumed(2, "h0", 0.2)
    assert wire.flush(0.2) == ["t1", "t2", "t3"]
    stats = outbox.stats
    assert (stats.submitted, stats.sent, stats.resent) == (3, 6, 3)


def test_repr_names_the_live_connection_and_works_in_a_gap() -> None:
    outbox, _ = make()
    assert "live=None" in repr(outbox)
    outbox.attach_fresh(7, 0.0)
    assert "live=7" in repr(outbox)
    outbox.detach(7)
    assert "live=None" in repr(outbox)


# -- the writer's side ---------------------------------------------------------------------------


def test_the_writer_skips_entries_given_up_while_queued_for_the_live_connection() -> None:
    """A tool result withdrawn while it waited, and audio released by the bound while the
    writer was busy (never written: counted as dropped at once), are never written; what
    follows them is, in order."""
    outbox, wire = make(max_audio_seconds=2 * CHUNK, max_media_age=100.0)
    outbox.attach_fresh(1, 0.0)
    first = outbox.submit("r-cancelled", TOOL, 0.0)
    outbox.submit("t1", TXT, 0.0)
    assert outbox.withdraw(first)
    assert wire.flush(0.0) == ["t1"]
    for n in range(4):
        outbox.submit(f"a{n}", A, 0.1, audio_seconds=CHUNK)
    second = outbox.submit("r-cancelled-too", TOOL, 0.1)
    outbox.submit("t2", TXT, 0.1)
    assert outbox.withdraw(second)
    assert wire.flush(0.1) == ["a2", "a3", "t2"]
    assert outbox.stats.audio_chunks_dropped == 2
    assert outbox.stats.pending == 0


def test_skipped_silence_whose_write_failed_is_not_sent_again() -> None:
    """Held silence: the middle of a quiet stretch is "skipped, never sent or replayed",
    even when it had been handed to the socket before it was known to be the middle and
    that write then failed."""
    outbox: Outbox[str] = Outbox(
        OutboxLimits(silence_padding=2 * CHUNK),
        audio_level=lambda name: 5000.0 if name.startswith("as") else 20.0,
    )
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0)
    entries = []
    for n, name in enumerate(["as0", "aq1", "aq2", "aq3", "aq4", "aq5"]):
        now = n * CHUNK
        entries.append(outbox.submit(name, A, now, audio_seconds=CHUNK))
        wire.flush(now)
    skipped = outbox.stats.silence_chunks_skipped
    assert skipped == 1
    outbox.mark_unsent(entries[3], 1)  # "aq3", the middle of the silence
    assert wire.flush(0.2) == []
    assert outbox.stats.pending == 0
    assert outbox.stats.silence_chunks_skipped == skipped


def test_a_restated_turn_whose_write_failed_goes_again_to_its_connection_alone() -> None:
    """A ``CONNECTION``-scope message is for the connection it was written to: a failed write
    to the live connection is written to it again; one that failed on a connection lost
    since goes nowhere (reported during the gap, or after the next connection took over)."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    again = outbox.submit("t-again", TXT, 0.0, scope=ReplayScope.CONNECTION)
    _write(wire, again, 0.0)
    outbox.mark_unsent(again, 1)
    assert wire.flush(0.1) == ["t-again"]
    outbox.detach(1)
    outbox.mark_unsent(again, 1)  # reported during the gap
    outbox.attach_fresh(2, 0.2)
    assert wire.flush(0.2) == []


def test_a_write_the_old_connection_completes_after_the_switch_counts_from_then() -> None:
    """Make-before-break: a handle arrives on the incumbent while a text's write to it waits;
    the new connection, resumed from an older handle, gets the text again; then the
    incumbent's write completes, after the handle arrived. A later resume from that handle
    replays the text: the snapshot was taken before the text reached the server."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0, round_trip=0.01)
    outbox.record_handle("h0", 1, 0.0)
    text = outbox.submit("t-slow", TXT, 0.1)
    _write(wire, text, 0.1)  # handed to the socket; the write waits
    outbox.record_handle("h1", 1, 1.0)
    assert outbox.pin("h0")
    outbox.attach_resumed(2, "h0", 1.1, round_trip=0.01)
    assert wire.flush(1.1) == ["t-slow"]
    outbox.mark_written(text, 1, 1.2)  # the incumbent's write completes late
    outbox.detach(2)  # the new connection fails before it issues a handle
    outbox.attach_resumed(3, "h1", 1.3)
    assert wire.flush(1.3) == ["t-slow"]


# -- a failed write comes back -----------------------------------------------------------------


def test_a_returned_write_is_pending_and_can_still_be_withdrawn() -> None:
    """A tool result pruned while its write was in flight comes back when the write fails:
    it counts as pending, and withdrawing it (its call was cancelled) still keeps it from
    ever being written."""
    outbox, wire = make(handle_margin=0.0)
    result = _pruned_in_flight(outbox, wire, "r1", TOOL)
    outbox.mark_unsent(result, 1)
    assert outbox.stats.pending == 1
    assert outbox.withdraw(result)
    assert outbox.stats.pending == 0
    assert wire.flush(0.3) == []


def test_a_returned_audio_chunk_counts_against_the_audio_bound() -> None:
    """The returned chunk and the two after it fill the bound: one more releases exactly the
    oldest (the returned one, never written now)."""
    outbox, wire = make(handle_margin=0.0, max_audio_seconds=3.5 * CHUNK, max_media_age=100.0)
    chunk = _pruned_in_flight(outbox, wire, "a1", A)
    outbox.submit("a2", A, 0.3, audio_seconds=CHUNK)
    outbox.submit("a3", A, 0.3, audio_seconds=CHUNK)
    outbox.mark_unsent(chunk, 1)
    assert outbox.stats.retained_audio_seconds == pytest.approx(3 * CHUNK)
    outbox.submit("a4", A, 0.4, audio_seconds=CHUNK)
    assert outbox.stats.audio_chunks_dropped == 1
    assert wire.flush(0.4) == ["a2", "a3", "a4"]


def test_a_returned_video_frame_counts_against_the_frame_bound() -> None:
    outbox, wire = make(handle_margin=0.0, max_video_frames=3, max_media_age=100.0)
    frame = _pruned_in_flight(outbox, wire, "v1", V)
    outbox.submit("v2", V, 0.3)
    outbox.submit("v3", V, 0.3)
    outbox.mark_unsent(frame, 1)
    outbox.submit("v4", V, 0.4)
    assert outbox.stats.video_frames_dropped == 1
    assert wire.flush(0.4) == ["v2", "v3", "v4"]


def test_a_returned_text_is_never_given_up_to_the_video_bound() -> None:
    """Text is never dropped: a text that came back after a failed write is written, and the
    video bound counts frames only."""
    outbox, wire = make(handle_margin=0.0, max_video_frames=1, max_media_age=100.0)
    text = _pruned_in_flight(outbox, wire, "t1", TXT)
    outbox.mark_unsent(text, 1)
    outbox.submit("v1", V, 0.3)
    assert outbox.stats.video_frames_dropped == 0
    assert wire.flush(0.3) == ["t1", "v1"]


def test_a_failed_write_stays_for_the_handle_that_counted_it_held() -> None:
    """A handle counted a text as held; its write then failed and it was written again, after
    the handle. A turn completes and time passes: what the handle holds (the text before) is
    pruned, the failed text is not, and a resume from the handle replays it."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0, round_trip=0.01)
    send(outbox, wire, 0.0, "t0")
    text = outbox.submit("t-failed", TXT, 0.0)
    _write(wire, text, 0.0)
    outbox.record_handle("h1", 1, 1.0)  # a round trip after both writes: holds both
    outbox.mark_unsent(text, 1)
    assert wire.flush(1.1) == ["t-failed"]
    outbox.turn_completed()
    send(outbox, wire, 2.0, "t2")
    assert outbox.stats.retained == 2, "t0, which every point holds, is pruned"
    outbox.detach(1)
    outbox.attach_resumed(2, "h1", 2.1)
    assert wire.flush(2.1) == ["t-failed", "t2"]


def test_a_completed_turn_prunes_by_the_time_the_last_write_completed() -> None:
    """The README: "Entries every retained resumption point already holds are pruned", but
    for those written within ``handle_margin`` of now; now is when the latest write
    completed."""
    outbox, wire = make(handle_margin=0.3)
    outbox.attach_fresh(1, 0.0)
    first = outbox.submit("t1", TXT, 0.0)
    _write(wire, first, 0.0)
    outbox.mark_written(first, 1, 0.0)
    second = outbox.submit("t2", TXT, 0.0)
    _write(wire, second, 0.0)
    outbox.mark_written(second, 1, 1.0)  # a slow write
    outbox.turn_completed()
    assert outbox.stats.retained == 1, "t1 was written more than the margin before now"


# -- media released by a bound while its write was in flight ------------------------------------


@pytest.mark.parametrize("move", ["resume", "rebuild"])
def test_audio_released_while_its_write_hung_is_reported_once_when_the_write_fails(
    move: str,
) -> None:
    """The writer hangs on a chunk while the user goes on talking: the bound releases that
    chunk (the oldest), then the connection dies and its write fails. The chunk stays given
    up: the outbox holds no more than its bound, and the move reports each chunk lost once."""
    bound = 2.5 * CHUNK
    outbox, wire = make(max_audio_seconds=bound, max_media_age=100.0)
    outbox.attach_fresh(1, 0.0)
    outbox.record_handle("h0", 1, 0.0)  # before anything was written: lacks it all
    first = outbox.submit("a1", A, 0.0, audio_seconds=CHUNK)
    _write(wire, first, 0.0)  # the write hangs
    outbox.submit("a2", A, 0.1, audio_seconds=CHUNK)
    outbox.submit("a3", A, 0.1, audio_seconds=CHUNK)  # releases a1
    outbox.mark_unsent(first, 1)  # the connection died
    assert outbox.stats.retained_audio_seconds <= bound
    outbox.detach(1)
    outbox.submit("a4", A, 0.2, audio_seconds=CHUNK)  # releases a2, never written
    replay = (
        outbox.attach_resumed(2, "h0", 0.3) if move == "resume" else outbox.attach_fresh(2, 0.3)
    )
    assert wire.flush(0.3) == ["a3", "a4"]
    assert replay.audio_chunks_dropped == 2, "a1 and a2, each once"


@pytest.mark.parametrize("move", ["resume from h0", "resume from h1", "rebuild"])
def test_audio_released_while_its_write_hung_is_reported_by_every_move_that_lacks_it(
    move: str,
) -> None:
    """h0 came before the hung write; h1 a round trip after it was handed over, and a turn
    completed then, so h1 and the rebuild counted the chunk as held until the write failed.
    Whichever the move starts from, its session lacks the chunk the bound gave up, and the
    move reports it, once."""
    outbox, wire = make(max_audio_seconds=2.5 * CHUNK, max_media_age=100.0)
    outbox.attach_fresh(1, 0.0, round_trip=0.01)
    outbox.record_handle("h0", 1, 0.0)
    first = outbox.submit("a1", A, 0.0, audio_seconds=CHUNK)
    _write(wire, first, 0.0)  # the write hangs
    outbox.record_handle("h1", 1, 1.0)
    outbox.turn_completed()
    outbox.submit("a2", A, 1.0, audio_seconds=CHUNK)
    outbox.submit("a3", A, 1.0, audio_seconds=CHUNK)  # releases a1
    outbox.mark_unsent(first, 1)
    outbox.detach(1)
    if move == "rebuild":
        replay = outbox.attach_fresh(2, 1.1)
    else:
        replay = outbox.attach_resumed(2, move.removeprefix("resume from "), 1.1)
    assert wire.flush(1.1) == ["a2", "a3"]
    assert replay.audio_chunks_dropped == 1
