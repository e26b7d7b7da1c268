"""The replay window on a busy event loop, and the kernel's round trip that places it.

A handle is placed in the input by when it reached the process: the kernel's round trip
(``gemini.tcp``) before it, and its arrival moved back by the loop's lag (``gemini.loop_lag``)
that could have kept it waiting. Here the pieces that decide it run as the transport wires them
(``LiveConnection.round_trip_measure`` at each handover, ``LiveConnection.late_by`` when a
handle is handled, the outbox's replay), on a clock the test moves: the loop's lag comes from a
stand-in loop whose turns the test makes late (a real loop cannot be made late on purpose
without blocking the machine), and the kernel's estimate from a socket that reports chosen
``TCP_INFO`` round-trip fields (on loopback the kernel reads microseconds)."""

from __future__ import annotations

import math
import struct
from typing import Any, cast

from realtime_resumption.gemini.loop_lag import LoopLag
from realtime_resumption.outbox import Outbox, OutboxLimits

from ....transport.transport_helpers import unopened_connection
from ...outbox.wire import CHUNK, Wire, send
from ..test_loop_lag import _Loop

ROUND_TRIP = 0.006
"""The kernel's estimate in most tests: a nearby front end."""
PROMPT = 0.001
"""How late a loop turn runs on an idle machine."""


class _Kernel:
    """A TCP socket as ``gemini.tcp`` reads it: ``TCP_INFO`` with a chosen round trip."""

    def __init__(self, round_trip: float, deviation: float = 0.0) -> None:
        raw = bytearray(104)
        struct.pack_into("=II", raw, 68, round(round_trip * 1e6), round(deviation * 1e6))
        self._raw = bytes(raw)

    def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes:
        return self._raw[:buflen]

    def setsockopt(self, level: int, option: int, value: int, /) -> None:
        pass


class Call:
    """One connection's input path in miniature, wired as the transport wires it: every
    handover measures the round trip first (``round_trip_measure`` into
    ``round_trip_measured``), then writes and marks the loop turn; a handle is recorded with
    ``late_by`` of the moment it was handled."""

    def __init__(self, round_trip: float = ROUND_TRIP) -> None:
        self.loop = _Loop()
        self.lag = LoopLag()
        self.conn = unopened_connection()
        # What ``open`` and ``start_receiving`` would give it: its socket and its loop's lag.
        self.conn._socket = _Kernel(round_trip)
        self.conn._lag = self.lag
        self.outbox: Outbox[str] = Outbox(OutboxLimits())
        self.wire = Wire(self.outbox)
        self.outbox.attach_fresh(1, 0.0)

    def write(self, now: float, name: str) -> None:
        """A handover at ``now``: the message is written in the loop turn running then."""
        measure = self.conn.round_trip_measure(now)
        if measure is not None:
            self.outbox.round_trip_measured(1, *measure)
        send(self.outbox, self.wire, now, name)
        self.lag.mark_turn(cast(Any, self.loop), now)

    def turn(self, at: float) -> None:
        """The loop gets to its next turn at ``at``."""
        self.loop.next_turn_at(at)

    def stream(self, start: float, end: float) -> None:
        """A microphone's chunks from ``start`` to before ``end``, one a loop turn that runs
        ``PROMPT`` late."""
        steps = round((end - start) / CHUNK)
        for i in range(steps):
            now = start + i * CHUNK
            self.write(now, f"a-{round(now * 1000)}")
            self.turn(now + PROMPT)

    def handle(self, handled_at: float) -> None:
        self.outbox.record_handle("h1", 1, handled_at, late_by=self.conn.late_by(handled_at))

    def resume(self, now: float) -> list[str]:
        """A move resumes from the handle: what is replayed."""
        self.outbox.attach_resumed(2, "h1", now)
        return self.wire.flush(now)


def test_a_lag_spike_long_before_the_handle_does_not_replay_the_question() -> None:
    """Under load (a load average of 7 on 2 cores) a question written 260 ms before its handle
    was replayed: a spike of the loop's lag a second earlier, still the largest of the last
    two seconds, moved the handle's place back past it. The turns around the handle ran on
    time: nothing kept the handle waiting, so its place stays where the kernel puts it."""
    call = Call()
    call.stream(0.0, 0.5)
    call.write(0.5, "a-500")
    call.turn(0.65)  # the loop was busy for 150 ms, a second before the handle
    call.stream(0.66, 1.24)
    call.write(1.24, "t-question")
    call.turn(1.24 + PROMPT)
    call.stream(1.26, 1.5)
    call.handle(1.5)
    replayed = call.resume(1.6)
    assert "t-question" not in replayed, replayed
    # What the round trip and the tolerance cover is still replayed: the last two chunks.
    assert replayed == ["a-1460", "a-1480"]


def test_the_turn_that_kept_the_handle_waiting_moves_its_place_back() -> None:
    """A loop busy for 150 ms just before it handled the handle may have kept it waiting all
    that time: what was written before the busy turn began may have been on its way when the
    snapshot was taken, and is replayed."""
    call = Call()
    call.stream(0.0, 1.2)
    call.write(1.2, "t-question")
    call.write(1.2, "a-1200")
    call.turn(1.35)  # busy from the question's turn on
    call.handle(1.35)
    replayed = call.resume(1.4)
    assert replayed[-2:] == ["t-question", "a-1200"], replayed


def test_the_replay_reaches_back_as_far_again_when_the_lag_exceeds_the_tolerance() -> None:
    """README (Limits): "the handle's arrival is moved back by twice the event loop's recent
    lag ..., and the audio replayed before it reaches back as far again when that lag
    exceeds the tolerance". A 150 ms lag moves the handle 300 ms back, and audio written up to
    300 ms (and a round trip) before that is replayed too."""
    call = Call()
    call.stream(0.0, 1.2)
    call.write(1.2, "a-1200")
    call.turn(1.35)  # busy for 150 ms; then the audio that waited, and the handle
    call.write(1.35, "a-1350")
    call.handle(1.352)
    replayed = call.resume(1.4)
    # Moved back 300 ms to 1.052 s, one round trip before it 1.046 s: audio from there on is
    # not in the snapshot. Within 300 ms before that (from 0.746 s) it may be: replayed too.
    assert replayed[0] == "a-760", replayed


def test_the_replay_reaches_back_by_the_handles_own_lag() -> None:
    """The window widens by the lag that moved the handle back, even when nothing was written
    between the busy turn and the handle (the lag known at the last write was none)."""
    call = Call()
    call.stream(0.0, 1.2)
    call.write(1.2, "a-1200")
    call.turn(1.35)  # busy for 150 ms; the handle is handled first thing after it
    call.handle(1.35)
    replayed = call.resume(1.4)
    # Moved back 300 ms to 1.05 s; the window reaches 300 ms and a round trip before it.
    assert replayed[0] == "a-760", replayed


def test_what_a_late_handle_may_reach_is_not_pruned() -> None:
    """After a turn completed no rebuild needs what came before it, and entries every handle
    holds are let go, but for those a handle still to come may lack. A loop that was late in
    the last two seconds may be late again: the log keeps what a handle kept waiting that
    long may reach, its place moved back and its window widened by the lag."""
    call = Call()
    call.stream(0.0, 0.5)
    call.write(0.5, "a-500")
    call.turn(0.65)  # busy for 150 ms
    call.stream(0.66, 1.0)
    call.outbox.turn_completed()
    call.stream(1.0, 1.3)
    call.write(1.3, "a-1300")
    call.turn(1.45)  # busy for 150 ms again; then the audio that waited, and the handle
    call.write(1.45, "a-1450")
    call.handle(1.452)
    replayed = call.resume(1.5)
    # Moved back 300 ms to 1.152 s; the snapshot may lack what was written from 300 ms and a
    # round trip before that, 0.846 s, on.
    assert replayed[0] == "a-860", replayed


def test_the_kernels_round_trip_places_the_handle() -> None:
    """On a 100 ms path (the kernel's estimate), what was written within 100 ms before the
    handle arrived was still on its way when the snapshot was taken: replayed, a question
    included; audio up to the tolerance (40 ms) before that too."""
    call = Call(round_trip=0.1)
    call.stream(0.0, 1.0)
    call.write(1.0, "t-question")
    call.turn(1.0 + PROMPT)
    call.stream(1.02, 1.06)
    call.handle(1.06)
    replayed = call.resume(1.1)
    # The boundary is at 0.96 s, its margin reaches 0.92 s.
    assert replayed == ["a-920", "a-940", "a-960", "a-980", "t-question", "a-1020", "a-1040"]


def _stream(outbox: Outbox[str], wire: Wire, start: float, end: float) -> None:
    """The microphone's chunks from ``start`` to before ``end``, each written as it is sent."""
    for i in range(round(start / CHUNK), round(end / CHUNK)):
        send(outbox, wire, i * CHUNK, f"a-{round(i * CHUNK * 1000)}")


def _resumed_from_late_handle(late_by: float) -> list[str]:
    """A second of audio on a 100 ms path, then a handle handled at 1 s that a busy loop may
    have kept waiting ``late_by``: what a resume from it replays."""
    outbox: Outbox[str] = Outbox(OutboxLimits())
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, 0.1)
    _stream(outbox, wire, 0.0, 1.0)
    outbox.record_handle("h1", 1, 1.0, late_by=late_by)
    outbox.attach_resumed(2, "h1", 1.1)
    return wire.flush(1.1)


def test_a_late_handle_is_placed_by_the_round_trip_and_its_window_widened_by_its_lag() -> None:
    """Kept waiting 50 ms, the handle arrived at 0.95 s; the snapshot was taken a round trip
    (100 ms) before, 0.85 s, and may lack what was written up to the lag (50 ms, more than the
    40 ms tolerance) before that: from 0.80 s on."""
    assert _resumed_from_late_handle(0.0)[0] == "a-860"  # 0.9 s, and the 40 ms tolerance
    assert _resumed_from_late_handle(0.05)[0] == "a-800"


def test_a_lag_that_is_no_number_of_seconds_moves_no_handle() -> None:
    """A loop lag that is not a finite figure (a clock gone wrong) is no reason to reach back:
    the handle is placed as if handled on time."""
    on_time = _resumed_from_late_handle(0.0)
    assert _resumed_from_late_handle(math.inf) == on_time
    assert _resumed_from_late_handle(math.nan) == on_time


def _kept_for_a_late_handle(*late_by: float) -> list[str]:
    """Audio over two turns with a handle after each, the connection's recent lag reported as
    ``late_by`` (none: not given); then a handle kept waiting 300 ms: what a resume from it
    replays, of what the outbox kept."""
    outbox: Outbox[str] = Outbox(OutboxLimits())
    wire = Wire(outbox)
    outbox.attach_fresh(1, 0.0)
    outbox.round_trip_measured(1, ROUND_TRIP, 0.0, *late_by)
    _stream(outbox, wire, 0.0, 0.5)
    outbox.record_handle("h0", 1, 0.5)
    outbox.turn_completed()
    _stream(outbox, wire, 0.5, 0.7)
    outbox.record_handle("h1", 1, 0.7)
    outbox.turn_completed()
    _stream(outbox, wire, 0.7, 1.0)
    outbox.record_handle("h2", 1, 1.0, late_by=0.3)
    outbox.attach_resumed(2, "h2", 1.1)
    return wire.flush(1.1)


def test_the_log_keeps_what_a_handle_as_late_as_the_loop_was_may_lack_and_no_more() -> None:
    """With the loop 300 ms late in the last seconds, the log keeps what a handle kept waiting that long
    may lack (from 0.40 s: moved back to 0.7 s, a round trip and the 300 ms widening before
    it); on time, it lets go of what the older handles hold, and a handle that late then
    finds the log from 0.46 s. A lag not given, negative or not a finite figure keeps no more
    than none."""
    assert _kept_for_a_late_handle(0.3)[0] == "a-400"
    on_time = _kept_for_a_late_handle(0.0)
    assert on_time[0] == "a-460"
    for late_by in ((), (-1.0,), (math.inf,), (math.nan,)):
        assert _kept_for_a_late_handle(*late_by) == on_time, late_by
