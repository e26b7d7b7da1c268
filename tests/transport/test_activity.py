"""Manual activity marking (automatic activity detection off): ``send_activity_start`` and
``send_activity_end`` on the wire, held across a gap, and reopened on a new connection."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from google.genai import types

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import SessionRecord

from .transport_helpers import (
    Recorder,
    answered_with_handle,
    emulator_config,
    established,
    make_transport,
)

MANUAL = types.RealtimeInputConfig(
    automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
)


def _session(emu: Emulator) -> SessionRecord:
    (session,) = emu.ledger.sessions.values()
    return session


def _speak(transport: GeminiLiveTransport, first: int, words: Sequence[str]) -> int:
    """One speech chunk per word, numbered from ``first``; returns the next number."""
    for seq, word in enumerate(words, first):
        transport.send_audio(user_audio(seq, word=word))
    return first + len(words)


def _kinds(emu: Emulator, connection: int) -> list[str]:
    """What the client sent on the ``connection``-th connection the emulator set up, after
    its setup."""
    return [m.kind for m in established(_session(emu))[connection].client_messages[1:]]


async def test_activity_markers_frame_the_user_turn_on_the_wire(emu: Emulator) -> None:
    transport = make_transport(emu, realtime_input_config=MANUAL)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_activity_start()
    _speak(transport, 1, ["hello", "there"])
    transport.send_activity_end()
    await rec.wait_for("on_turn_complete")
    diagnostics = transport.get_diagnostics()
    await transport.disconnect()
    assert _kinds(emu, 0) == ["activity_start", "audio", "audio", "activity_end"]
    assert [t.user_text for t in _session(emu).turns.values()] == ["hello there"]
    sends = diagnostics.total_sends
    assert (sends["activity_start"].sent, sends["activity_end"].sent) == (1, 1)


async def test_an_activity_open_at_a_move_is_reopened_before_the_replayed_audio(
    profile: str,
) -> None:
    """The user barges in (activityStart) on an answer; the handle that follows the
    interrupted turn is taken with the activity open. The session moves while the user
    speaks: the new connection must open the activity again before the audio replayed to it,
    or the resumed session does not hear it as speech."""
    async with Emulator(emulator_config(profile, answer_chunks=200)) as emu:
        transport = make_transport(emu, realtime_input_config=MANUAL)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_activity_start()
        seq = _speak(transport, 1, ["hello", "there"])
        transport.send_activity_end()
        await rec.wait_for("on_first_audio_chunk")
        updates = rec.count("on_resumption_update")
        transport.send_activity_start()
        await rec.wait_for("on_interrupted")
        await rec.wait(
            lambda r: any(h and ok for h, ok, _ in r.of("on_resumption_update")[updates:])
        )
        seq = _speak(transport, seq, ["what", "is"])
        await asyncio.wait_for(transport.reconnect(), 5)
        _speak(transport, seq, ["new"])
        transport.send_activity_end()
        await rec.wait_for("on_turn_complete", 2)
        await transport.disconnect()
        session = _session(emu)
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED]
    # The words after the handle are heard only inside an activity. (Audio written just
    # before the handle may be replayed too: the arrival rule's margin.)
    texts = [t.user_text for t in session.turns.values()]
    assert texts[0] == "hello there" and texts[-1].endswith("what is new"), texts
    # On the new connection the activity opens (once) before the audio spoken in it.
    messages = established(session)[1].client_messages[1:]
    kinds = [m.kind for m in messages]
    assert kinds.count("activity_start") == 1
    opened = kinds.index("activity_start")
    spoken = [i for i, m in enumerate(messages) if set(m.audio_seqs) & {3, 4, 5}]
    assert spoken and min(spoken) > opened


async def test_activity_markers_sent_while_the_connection_is_lost_are_held(
    emu: Emulator,
) -> None:
    transport = make_transport(emu, realtime_input_config=MANUAL)
    rec = Recorder(transport)
    await transport.connect()
    await answered_with_handle(transport, rec, "hello")
    emu.faults.drop()
    await rec.wait_for("on_move_started")
    transport.send_activity_start()
    _speak(transport, 1, ["are", "you", "there"])
    transport.send_activity_end()
    await rec.wait_for("on_turn_complete", 2)
    await transport.disconnect()
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED]
    assert [t.user_text for t in _session(emu).turns.values()] == ["hello", "are you there"]
    assert _kinds(emu, 1) == ["activity_start", "audio", "audio", "audio", "activity_end"]
