"""``connect(retry=...)``: the first connection retried as a move's attempts are, under the one
failure policy, with what was sent meanwhile held across the attempts and delivered once."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import (
    ConnectError,
    ContentTurn,
    DialAbandonedError,
    NotConnectedError,
)

from .transport_helpers import Recorder, make_transport

FAST = ResumptionOptions(retry_delays=(0.0, 0.01, 0.01))


async def test_sends_held_across_a_refused_first_dial_are_delivered_once(emu: Emulator) -> None:
    transport = make_transport(emu, resumption=FAST)
    rec = Recorder(transport)
    emu.faults.refuse_next(1)
    connecting = transport.connect(retry=True)
    # Taken from the call on, before the dial even began.
    transport.send_audio(user_audio(1, speech=False))
    task = asyncio.create_task(connecting)
    await rec.wait_for("on_error")
    transport.send_audio(user_audio(2, speech=False))
    assert transport.send_live_text([ContentTurn("user", "hello there")])
    await task
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
    assert len(emu.ledger.attempts) == 2
    (session,) = emu.ledger.sessions.values()
    (conn,) = session.connections
    assert [m.kind for m in conn.client_messages] == ["setup", "audio", "audio", "text"]
    assert [seq for m in conn.client_messages for seq in m.audio_seqs] == [1, 2]
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, ConnectError) and event.recoverable


async def test_a_refused_key_is_not_retried(emu: Emulator) -> None:
    transport = make_transport(emu, resumption=FAST)
    rec = Recorder(transport)
    emu.faults.refuse_next(1, "http403")
    with pytest.raises(ConnectError, match="403"):
        await transport.connect(retry=True)
    assert len(emu.ledger.attempts) == 1
    assert rec.of("on_error") == []


async def test_the_pauses_given_bound_the_attempts(emu: Emulator) -> None:
    transport = make_transport(emu, resumption=FAST)
    rec = Recorder(transport)
    emu.faults.refuse_next(3)
    connecting = transport.connect(retry=(0.0, 0.01))
    transport.send_audio(user_audio(1, speech=False))
    with pytest.raises(ConnectError):
        await connecting
    assert len(emu.ledger.attempts) == 2
    assert [event.recoverable for (event,) in rec.of("on_error")] == [True]
    with pytest.raises(NotConnectedError):
        transport.send_audio(user_audio(2, speech=False))


async def test_a_disconnect_ends_the_pause_between_attempts(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    emu.faults.refuse_next(1)
    task = asyncio.create_task(transport.connect(retry=(0.0, 60.0)))
    await rec.wait_for("on_error")
    await transport.disconnect()
    with pytest.raises(DialAbandonedError):
        await asyncio.wait_for(task, 5.0)
    assert len(emu.ledger.attempts) == 1


@pytest.mark.parametrize("retry", [(), (0.0, -1.0), (float("nan"),)])
async def test_retry_is_pauses_in_seconds(emu: Emulator, retry: tuple[float, ...]) -> None:
    transport = make_transport(emu)
    with pytest.raises(ValueError, match="retry"):
        transport.connect(retry=retry)
