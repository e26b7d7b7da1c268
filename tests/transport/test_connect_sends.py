"""Sends made while ``connect()`` dials are held and delivered once the setup completed
(frameworks start the microphone when the pipeline starts, before the connection is up)."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import ConnectionRecord
from realtime_resumption.transport import (
    ConnectError,
    ContentTurn,
    DialAbandonedError,
    NotConnectedError,
    ReplayItem,
    TransportError,
)

from .transport_helpers import Recorder, make_transport


def _connection(emu: Emulator, index: int = 0) -> ConnectionRecord:
    (session,) = emu.ledger.sessions.values()
    return session.connections[index]


def _audio_seqs(conn: ConnectionRecord) -> list[int]:
    return [seq for m in conn.client_messages for seq in m.audio_seqs]


async def _dialling(transport: GeminiLiveTransport) -> asyncio.Task[None]:
    """``connect()`` started and waiting for the network (it cannot finish without I/O)."""
    task = asyncio.create_task(transport.connect())
    await asyncio.sleep(0)
    assert not task.done()
    return task


async def test_sends_during_connect_are_delivered_in_order_after_the_setup(
    emu: Emulator,
) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    task = await _dialling(transport)
    for seq in range(1, 6):
        transport.send_audio(user_audio(seq, speech=False))
    assert transport.send_live_text([ContentTurn("user", "hello there")])
    assert not task.done()
    assert not transport.is_connected
    await task
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
    conn = _connection(emu)
    assert [m.kind for m in conn.client_messages] == ["setup"] + ["audio"] * 5 + ["text"]
    assert _audio_seqs(conn) == [1, 2, 3, 4, 5]
    sends = transport.get_diagnostics().total_sends
    assert (sends["audio"].attempted, sends["audio"].sent, sends["text"].sent) == (5, 5, 1)


async def test_audio_held_during_connect_keeps_the_input_bound(emu: Emulator) -> None:
    transport = make_transport(emu, input_buffer=OutboxLimits(max_audio_seconds=0.1))
    task = await _dialling(transport)
    for seq in range(1, 11):
        transport.send_audio(user_audio(seq, speech=False))  # 20 ms each
    await task
    transport.send_audio(user_audio(11, speech=False))
    stats = transport.get_diagnostics().input
    await transport.disconnect()
    assert _audio_seqs(_connection(emu)) == [6, 7, 8, 9, 10, 11]
    assert stats is not None and stats.audio_chunks_dropped == 5


async def test_history_replayed_during_connect_reaches_the_session(emu: Emulator) -> None:
    transport = make_transport(emu)
    task = await _dialling(transport)
    transport.replay_history([ReplayItem("user", "my name is Ada")])
    await task
    await transport.disconnect()
    conn = _connection(emu)
    assert [m.kind for m in conn.client_messages] == ["setup", "client_content"]
    assert conn.client_messages[1].turns == (("user", "my name is Ada"),)


async def test_a_failed_connect_discards_what_was_held(emu: Emulator) -> None:
    transport = make_transport(emu)
    emu.faults.refuse_next(1)
    task = await _dialling(transport)
    transport.send_audio(user_audio(1, speech=False))
    with pytest.raises(ConnectError):
        await task
    with pytest.raises(NotConnectedError, match="not connected"):
        transport.send_audio(user_audio(2, speech=False))
    await transport.connect()
    transport.send_audio(user_audio(3, speech=False))
    await transport.disconnect()
    (session,) = emu.ledger.sessions.values()
    assert _audio_seqs(session.connections[-1]) == [3]


async def test_sends_after_a_disconnect_that_overtook_connect_are_refused(
    emu: Emulator,
) -> None:
    transport = make_transport(emu)
    emu.faults.hang_next()
    task = await _dialling(transport)
    transport.send_audio(user_audio(1, speech=False))
    await transport.disconnect()
    with pytest.raises(NotConnectedError, match="disconnected"):
        transport.send_audio(user_audio(2, speech=False))
    with pytest.raises(DialAbandonedError):
        await task
    assert not transport.is_connected


async def test_a_second_connect_while_dialling_is_refused(emu: Emulator) -> None:
    transport = make_transport(emu)
    task = await _dialling(transport)
    with pytest.raises(TransportError, match="already connected"):
        await transport.connect()
    await task
    await transport.disconnect()
