"""README promises about the outbox that mutation testing (``make mutate MODULE=outbox``)
found unguarded by the other unit tests: the held-input bound after a session is cleared (a
failed connect, a closed session), the proof of an answer taken only from the connection
that answered, and the arrival rule's margin with the shipped tolerance and a jittery link."""

from __future__ import annotations

import pytest

from realtime_resumption.outbox import MessageKind, Outbox, OutboxLimits

from .wire import CHUNK, Wire, send

A = MessageKind.AUDIO
TOOL = MessageKind.TOOL_RESPONSE


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
