"""The settle after a loss: with no old connection to take input, the new one takes the held
input right after its setup (``SETTLE_HELD``), not after the long settle a planned move can
afford; a refusal that comes after that short settle is caught on probation, retried, and
what the refused connection was sent is replayed, so nothing the user said is lost."""

from __future__ import annotations

import asyncio
from typing import Any

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_machine import SETTLE, SETTLE_HELD
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator

from ..ledger_checks import assert_nothing_said_lost
from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    CHUNK,
    TIME_SCALE,
    Recorder,
    assert_closed_first,
    emulator_config,
    established,
    kind_emulator_config,
    make_transport,
    only_session,
    stream_silence,
)

REFUSED_AFTER = 0.2
"""Wall seconds after its setup the refused connection closes: after the short settle,
within the long one and the probation."""
assert SETTLE_HELD < REFUSED_AFTER < SETTLE


async def _connected(emu: Emulator, **options: Any) -> tuple[GeminiLiveTransport, Recorder]:
    """A transport holding a handle: the service issues the first after an answer. Mid-answer
    the Gemini API sends updates without one, so it waits for the handle itself: input
    written before it arrived could be in the uncertain window of the arrival rule, where
    silence is not replayed."""
    transport = make_transport(emu, **options)
    rec = await connected_and_answered(transport)
    return transport, rec


async def test_after_a_drop_the_new_connection_takes_the_held_input_at_once() -> None:
    """The quiet emulator says nothing after a setup, so a full settle would hold the input
    for ``SETTLE`` after it."""
    async with Emulator(emulator_config("gemini")) as emu:
        transport, rec = await _connected(emu)
        streaming = asyncio.create_task(stream_silence(transport, 1, 40, every=CHUNK))
        await asyncio.sleep(10 * CHUNK)
        emu.faults.drop()
        await rec.wait_for("on_move", timeout=5)
        await streaming
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.reason, move.outcome) == (MoveReason.LOST, MoveOutcome.RESUMED)
    new = only_session(emu).connections[-1]
    assert new.setup_at is not None
    first_audio = min(m.time for m in new.client_messages if m.audio_seqs)
    # The held input follows the setup within the short settle (and the write), far sooner
    # than the long one.
    assert first_audio - new.setup_at < SETTLE / 2, (first_audio, new.setup_at)
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert_nothing_said_lost(summary)


async def test_a_refusal_after_the_short_settle_is_retried_and_loses_nothing() -> None:
    """The resumed connection is closed 1011 a little after the short settle (still within
    its probation): a failed attempt, retried from the same handle, with the audio the
    refused connection took replayed to the next."""
    async with Emulator(emulator_config("gemini")) as emu:
        transport, rec = await _connected(emu)
        streaming = asyncio.create_task(stream_silence(transport, 1, 50, every=CHUNK))
        await asyncio.sleep(10 * CHUNK)
        emu.faults.flap(close_after=REFUSED_AFTER / TIME_SCALE, code=1011, n=1)
        emu.faults.drop()
        await rec.wait_for("on_move", 2, timeout=5)
        await streaming
        await asyncio.sleep(5 * CHUNK)  # the last chunks reach the session
        await transport.disconnect()
        await emu.wait_disconnected()

    session = only_session(emu)
    refused = session.connections[1]
    assert refused.close_code == 1011 and refused.closed_at is not None
    assert refused.setup_at is not None and refused.closed_at - refused.setup_at > SETTLE_HELD
    took = {seq for m in refused.client_messages for seq in m.audio_seqs}
    assert took, "the refused connection was switched to and took input"
    assert [(m.reason, m.outcome) for m in rec.moves] == [
        (MoveReason.LOST, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.RESUMED),
    ]
    summary = emu.ledger.summary().sessions[session.session_id]
    assert_nothing_said_lost(summary)
    assert set(range(1, 51)) <= set(summary.audio_consumed), "every chunk reached the session"


async def test_the_settle_does_not_count_against_attempt_timeout_on_a_kind_service() -> None:
    """``attempt_timeout`` bounds the dial: on a quiet server that takes a resume beside the
    open connection, a planned move settles the full ``SETTLE``, and an attempt bound shorter
    than that must not fail every move."""
    config = kind_emulator_config("gemini", update_after_setup=False)
    async with Emulator(config) as emu:
        options = ResumptionOptions(deadline_margin=1.0, attempt_timeout=SETTLE * 0.8)
        transport, rec = await _connected(emu, resumption=options)
        emu.faults.go_away(60.0)
        await rec.wait_for("on_move", timeout=5)
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.outcome, move.attempts) == (
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
        1,
    )


async def test_a_planned_move_that_closes_first_settles_short_within_attempt_timeout() -> None:
    """On the service's terms a planned move closes the old connection before the
    replacement's setup: the input is held, so the replacement takes it after the short
    settle, and an attempt bound shorter than the long one resumes the session."""
    async with Emulator(emulator_config("gemini")) as emu:
        options = ResumptionOptions(deadline_margin=1.0, attempt_timeout=SETTLE * 0.8)
        transport, rec = await _connected(emu, resumption=options)
        streaming = asyncio.create_task(stream_silence(transport, 1, 40, every=CHUNK))
        await asyncio.sleep(10 * CHUNK)
        emu.faults.go_away(60.0)
        await rec.wait_for("on_move", timeout=5)
        await streaming
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.reason, move.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    new = established(session)[-1]
    assert new.setup_at is not None
    first_audio = min(m.time for m in new.client_messages if m.audio_seqs)
    assert first_audio - new.setup_at < SETTLE / 2, (first_audio, new.setup_at)
    assert_nothing_said_lost(emu.ledger.summary().sessions[session.session_id])
