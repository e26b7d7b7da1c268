"""How the outbox forgets: pruning what every resumption point holds, releasing media past a
bound, withdrawing, detaching and clearing (after which a new session holds the whole bound
again). Each test states a README or docstring promise, or guards a defect once found: what is
replayed, what ``lacking()`` reports, what the stats count, and which of the caller's messages
the outbox keeps alive."""

from __future__ import annotations

import gc
import weakref

from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.handles import HandleBook
from realtime_resumption.outbox import MessageKind, Outbox, OutboxLimits, Replay

from .wire import CHUNK, TOOL, TXT, A, Wire, make, send

# -- withdrawing and releasing -------------------------------------------------------------


def test_a_message_withdrawn_while_waiting_for_the_live_connection_is_never_written() -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    result = outbox.submit("r1", TOOL, 0.0)
    outbox.submit("t1", TXT, 0.0)
    assert outbox.withdraw(result)
    assert wire.flush(0.0) == ["t1"]
    assert outbox.stats.pending == 0


def test_a_replay_the_bound_releases_before_it_is_rewritten_is_counted_at_once() -> None:
    """README: one "queued for the live connection" when a bound releases it "is dropped and
    counted at once in stats", and never written."""
    outbox, wire = make(max_audio_seconds=2 * CHUNK)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "a1")
    outbox.record_handle("h1", 1, 0.1)  # a1 within the margin: a resume replays it
    outbox.detach(1)
    assert outbox.attach_resumed(2, "h1", 0.2).replayed == 1
    outbox.submit("a2", A, 0.2, audio_seconds=CHUNK)
    outbox.submit("a3", A, 0.2, audio_seconds=CHUNK)  # a1, still queued, goes
    assert outbox.stats.audio_chunks_dropped == 1
    assert wire.flush(0.2) == ["a2", "a3"]


def test_audio_the_history_holds_costs_a_rebuild_nothing_when_the_bound_releases_it() -> None:
    """The rebuild point holds everything written up to the last completed turn, the last
    message included: releasing it loses nothing a rebuilt session needs."""
    outbox, wire = make(max_audio_seconds=CHUNK)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "a1")
    outbox.turn_completed()
    send(outbox, wire, 0.01, "a2")  # the bound releases a1
    outbox.detach(1)
    replay = outbox.attach_fresh(2, 0.1)
    assert replay.audio_chunks_dropped == 0
    assert wire.flush(0.1) == ["a2"]


def test_withdrawn_audio_does_not_break_the_age_bound() -> None:
    """Audio withdrawn in the middle of what is held (chunks the SDK refused), then old audio
    past ``max_media_age``: the old audio is released and counted once, the rest is sent in
    order. (A compaction of the held audio during the age release used to raise KeyError.)"""
    outbox, wire = make(max_media_age=1.0)
    for n in range(10):
        outbox.submit(f"a-old{n}", A, 0.0, audio_seconds=CHUNK)
    refused = [outbox.submit(f"a-refused{n}", A, 0.0, audio_seconds=CHUNK) for n in range(33)]
    for n in range(30):
        outbox.submit(f"a-new{n}", A, 0.9, audio_seconds=CHUNK)
    for entry in refused:
        assert outbox.withdraw(entry)
    outbox.submit("a-last", A, 1.5, audio_seconds=CHUNK)
    assert outbox.stats.audio_chunks_dropped == 10
    replay = outbox.attach_fresh(1, 1.5)
    assert replay.buffered == 31
    assert wire.flush(1.5) == [f"a-new{n}" for n in range(30)] + ["a-last"]


def test_a_late_failed_write_of_audio_the_bound_released_leaves_it_given_up_counted_once() -> None:
    """A failed write reported after the bound released the entry (queued as a replay) does
    not bring it back over the bound: it stays given up, counted once, and each message still
    waiting is counted once."""
    outbox, wire = make(max_audio_seconds=2 * CHUNK)
    outbox.attach_fresh(1, 0.0)
    first = outbox.submit("a1", A, 0.0, audio_seconds=CHUNK)
    wire.flush(0.0)
    outbox.record_handle("h1", 1, 0.0)
    outbox.detach(1)
    outbox.attach_resumed(2, "h1", 0.1)  # a1 queued again
    outbox.submit("a2", A, 0.1, audio_seconds=CHUNK)
    outbox.submit("a3", A, 0.1, audio_seconds=CHUNK)  # the bound releases a1
    outbox.mark_unsent(first, 1)  # its write to connection 1 had failed after all
    assert outbox.stats.pending == outbox.stats.retained == 2
    assert outbox.stats.audio_chunks_dropped == 1
    assert wire.flush(0.2) == ["a2", "a3"]
    assert outbox.stats.pending == 0


# -- pruning -------------------------------------------------------------------------------


def test_entries_are_pruned_up_to_the_first_one_a_point_lacks_and_no_further() -> None:
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1", "t2")
    outbox.record_handle("h1", 1, 1.0, last_consumed_index=1)  # holds t1 only
    outbox.turn_completed()
    assert outbox.stats.retained == 1
    assert outbox.lacking("h1") == ["t2"]


def test_messages_after_a_handle_that_held_everything_are_replayed_from_it() -> None:
    """Pruning follows what every point holds: a handle that held every message written so
    far still lacks the ones written after it, whatever turns completed since."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle("h1", 1, 1.0)
    send(outbox, wire, 2.0, "t2", "t3")
    outbox.turn_completed()
    send(outbox, wire, 3.0, "t4")
    assert outbox.lacking("h1") == ["t2", "t3", "t4"]
    outbox.detach(1)
    assert outbox.attach_resumed(2, "h1", 3.5).replayed == 3
    assert wire.flush(3.5) == ["t2", "t3", "t4"]


def test_pruning_keeps_what_a_handle_to_come_lacks_by_the_measured_round_trip() -> None:
    """A message written less than one measured round trip (0.5 s here, longer than
    ``handle_margin``) before a handle arrives is not in its snapshot: pruning at a turn
    boundary must keep it for that handle."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0, round_trip=0.5)
    send(outbox, wire, 0.9, "t1")
    outbox.turn_completed()
    send(outbox, wire, 1.3, "t2")
    outbox.record_handle("h1", 1, 1.35)
    assert outbox.lacking("h1") == ["t1", "t2"]


def test_pruning_keeps_audio_written_exactly_one_margin_before_a_handle() -> None:
    """The arrival rule replays margin-kind messages written within ``handle_margin`` of the
    handle's arrival, the edge included; pruning keeps the same edge."""
    outbox, wire = make(handle_margin=0.25)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "a1")
    outbox.turn_completed()
    send(outbox, wire, 0.25, "t1")
    outbox.record_handle("h1", 1, 0.25)
    assert outbox.lacking("h1") == ["a1"]


def test_audio_is_pruned_turn_after_turn() -> None:
    """Each utterance every point holds is pruned, the held audio falling to nothing between
    turns, turn after turn."""
    outbox, wire = make(max_handles=1)
    outbox.attach_fresh(1, 0.0)
    for turn in range(3):
        start = turn * 10.0
        send(outbox, wire, start, f"a{turn}-1", f"a{turn}-2")
        outbox.turn_completed()
        outbox.record_handle(f"h{turn}", 1, start + 1.0)
        assert (outbox.stats.retained, outbox.stats.retained_audio_seconds) == (0, 0.0)


# -- what the outbox keeps alive ------------------------------------------------------------


class _Chunk:
    """An audio message the test can watch: weakly referenced, with a loudness."""

    def __init__(self, level: float) -> None:
        self.level = level


class _Watched:
    """Submits audio chunks to a gap (no connection) and counts those still alive."""

    def __init__(self, outbox: Outbox[_Chunk]) -> None:
        self.outbox = outbox
        self.refs: list[weakref.ref[_Chunk]] = []
        self.now = 0.0

    def submit(self, level: float) -> None:
        self.now += CHUNK
        chunk = _Chunk(level)
        self.refs.append(weakref.ref(chunk))
        self.outbox.submit(chunk, A, self.now, audio_seconds=CHUNK)

    def alive(self) -> int:
        return sum(1 for ref in self.refs if ref() is not None)


def test_a_long_gap_keeps_alive_only_about_what_the_bound_holds() -> None:
    """README: the outbox holds at most ``max_audio_seconds`` of audio during a gap, and its
    memory follows the recent past, not the length: audio the bound released is not kept
    alive, however long the gap (60 s of audio against a 1 s bound here)."""
    watched = _Watched(Outbox(OutboxLimits(max_audio_seconds=1.0)))
    for n in range(3000):
        watched.submit(5000.0)
        if n % 100 == 99:
            held = watched.outbox.stats.retained
            assert held == 50
            assert watched.alive() <= 3 * held + 40


def test_a_long_silence_after_held_speech_keeps_alive_only_about_what_is_held() -> None:
    """*Held silence*: the middle of a silent stretch is given up (skipped) as soon as it is
    known to be the middle, so a minute of silence after held speech costs no memory, even
    after the audio bound released earlier speech."""
    limits = OutboxLimits(max_audio_seconds=0.5, silence_padding=0.1)
    watched = _Watched(Outbox(limits, audio_level=lambda chunk: chunk.level))
    for _ in range(500):  # 10 s of speech: the bound releases all but the last 0.5 s
        watched.submit(5000.0)
    for n in range(3000):  # 60 s of silence
        watched.submit(0.0)
        if n % 100 == 99:
            held = watched.outbox.stats.retained
            assert held <= 25
            assert watched.alive() <= 3 * held + 40
    assert watched.outbox.stats.silence_chunks_skipped > 2900


# -- detach and clear ----------------------------------------------------------------------


def test_detach_reports_whether_the_live_connection_went() -> None:
    outbox, _ = make()
    outbox.attach_fresh(1, 0.0)
    assert not outbox.detach(2)
    assert outbox.live_connection == 1
    assert outbox.detach(1)
    assert outbox.live_connection is None
    assert not outbox.detach(1)


def test_a_late_failed_write_does_not_revive_a_message_of_a_cleared_session() -> None:
    """``clear`` forgets every message: a failed write of the closed session reported after
    it (its connection's writer ends late) does not queue that message for the next one."""
    outbox, wire = make()
    outbox.attach_fresh(1, 0.0)
    old = outbox.submit("t-old", TXT, 0.0)
    wire.flush(0.0)
    outbox.clear()
    outbox.mark_unsent(old, 1)
    outbox.submit("t-new", TXT, 1.0)
    assert outbox.attach_fresh(2, 1.0) == Replay(buffered=1, turn_input=1)
    assert wire.flush(1.0) == ["t-new"]


def _next_session(outbox: Outbox[str]) -> tuple[Replay, bool, list[str]]:
    """A session after a gap: a withdrawn tool result, audio past the bound, silence past its
    padding; returns the first connection's replay, whether it reopens an activity, and what
    is written to it."""
    wire = Wire(outbox)
    result = outbox.submit("r-withdrawn", TOOL, 10.0)
    outbox.submit("t1", TXT, 10.0)
    assert outbox.withdraw(result)
    for n in range(15):
        outbox.submit(f"s{n}", A, 10.0 + n * CHUNK, audio_seconds=CHUNK)
    for n in range(4):
        outbox.submit(f"v{n}", A, 11.0 + n * CHUNK, audio_seconds=CHUNK)
    replay = outbox.attach_fresh(5, 12.0, seeded=False)
    return replay, outbox.activity_to_reopen, wire.flush(12.0)


def test_a_cleared_outbox_starts_the_next_session_as_a_new_one_would() -> None:
    """``clear`` forgets every message, handle and connection: whatever the closed session
    left (the user's activity open, a silent stretch under way, released and withdrawn
    entries), the next session is held, released, skipped and written as by a new outbox."""

    def level(message: str) -> float:
        return 0.0 if message.startswith("s") else 5000.0

    limits = OutboxLimits(max_audio_seconds=0.2, silence_padding=0.1)
    outbox: Outbox[str] = Outbox(limits, audio_level=level)
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0)
    outbox.submit("start", MessageKind.ACTIVITY_START, 0.0)
    for n in range(20):
        outbox.submit(f"v-old{n}", A, n * CHUNK, audio_seconds=CHUNK)
    for n in range(30):
        outbox.submit(f"s-old{n}", A, 0.4 + n * CHUNK, audio_seconds=CHUNK)
    wire.flush(1.0)
    outbox.record_handle("h1", 1, 1.0)
    outbox.detach(1)
    outbox.submit("t-old", TXT, 1.1)
    outbox.clear()

    replay, reopen, written = _next_session(outbox)
    assert (replay, reopen, written) == _next_session(Outbox(limits, audio_level=level))
    assert not reopen
    # the first and last 0.1 s of the silence, less its oldest 0.08 s past the 0.2 s bound
    assert replay.audio_chunks_dropped == 4
    silence = ["s4"] + [f"s{n}" for n in range(10, 15)]
    assert written == ["t1", *silence, "v0", "v1", "v2", "v3"]


def test_a_cleared_outbox_holds_its_whole_bound_again() -> None:
    """After ``clear`` (the session closed, or its first dial failed and discarded what was
    held), a new session may hold the full bound of audio and video: nothing of the old one
    still counts against it."""
    limits = OutboxLimits(max_audio_seconds=0.1, max_video_frames=2, max_media_age=100.0)
    outbox: Outbox[str] = Outbox(limits)
    for n in range(5):
        outbox.submit(f"a{n}", A, 0.0, audio_seconds=CHUNK)
    outbox.submit("v0", MessageKind.VIDEO, 0.0)
    outbox.submit("v1", MessageKind.VIDEO, 0.0)
    outbox.clear()
    wire = Wire(outbox)
    for n in range(5):
        outbox.submit(f"b{n}", A, 1.0, audio_seconds=CHUNK)
    outbox.submit("w0", MessageKind.VIDEO, 1.0)
    outbox.submit("w1", MessageKind.VIDEO, 1.0)
    assert outbox.stats.audio_chunks_dropped == 0
    assert outbox.stats.video_frames_dropped == 0
    outbox.attach_fresh(1, 1.0)
    assert wire.flush(1.0) == ["b0", "b1", "b2", "b3", "b4", "w0", "w1"]


def test_the_outbox_lets_go_of_handles_no_retained_message_is_looked_up_through() -> None:
    """``HandleBook``: a handle's text stays as long as some part holds its reference, and
    the outbox keeps its newest points. A point it no longer keeps stays referenced only while
    a retained message is looked up through it (the base of a resumed connection): here t2,
    written on the connection resumed from hA, needs hB's point; once t1 is pruned, nothing
    needs hA's."""
    book = HandleBook()
    outbox, wire = make(max_handles=1)
    outbox.attach_fresh(1, 0.0)
    send(outbox, wire, 0.0, "t1")
    outbox.record_handle(book.enter("hA"), 1, 1.0)
    outbox.attach_resumed(2, book.enter("hA"), 1.1)
    send(outbox, wire, 2.0, "t2")
    outbox.record_handle(book.enter("hB"), 2, 2.05)
    outbox.attach_resumed(3, book.enter("hB"), 2.1)
    send(outbox, wire, 2.2, "t3")
    outbox.record_handle(book.enter("hC"), 3, 2.3)
    assert len(book) == 3
    outbox.turn_completed()  # t1 goes; t2, written within the margin, stays
    assert outbox.stats.retained == 2
    assert len(book) == 2  # hB and hC
    assert outbox.lacking(book.enter("hC")) == []


def test_a_held_audio_chunk_costs_the_garbage_collector_two_objects() -> None:
    """README (*Many calls in one process*): a session holds seconds of audio for replay, and
    a full collection walks every object held; a written chunk waiting for a handle to cover
    it is its entry and its message, nothing more (the bytes are not walked)."""
    path = InputPath(written=lambda conn, message, results: None)
    outbox = path._outbox  # written as a connection would, without one
    outbox.attach_fresh(1, 0.0)
    speech = b"\x00\x40" * 320  # loud: held whole (silence past its padding is not)
    gc.collect()
    before = len(gc.get_objects())
    for index in range(1, 501):
        now = index * CHUNK
        entry = path.submit(ClientMessage.audio(speech), now)
        outbox.mark_sent(entry, 1, index, now)
        outbox.mark_written(entry, 1, now + 0.001)
    gc.collect()
    assert outbox.stats.pending == 0
    assert len(path.lacking(None)) == 500  # all held: no handle covers them
    assert len(gc.get_objects()) - before <= 2 * 500
