"""``RealtimeConnection``'s writes on the ``openai`` SDK's GA and beta connections, over TLS to
the emulator: an event posted while nothing is queued is on the socket before ``post``
returns (websockets' synchronous send core on the SDK's socket), an event the socket declines
waits in the queue and everything after it too (the order holds), and without the reach every
event still goes out through the writer task and the SDK's send."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from realtime_resumption.openai import realtime_connection
from realtime_resumption.openai.realtime_connection import RealtimeConnection, dial
from realtime_resumption.openai.realtime_server_events import (
    BufferCommitted,
    SessionEvent,
)
from realtime_resumption.openai.session_config import Flavour
from realtime_resumption.reaches import DirectSend
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio
from tests.openai_emulator.oai_helpers import MODEL, RATE, TIMEOUT, config

SPEECH = 10


def _append(seq: int, speech: bool = True) -> dict[str, Any]:
    pcm = user_audio(seq, speech=speech, rate=RATE)
    return {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}


async def _connection(emu: OpenAIEmulator, flavour: Flavour) -> RealtimeConnection:
    client = emu.client()
    sdk = await dial(
        client,
        model=MODEL,
        flavour=flavour,
        websocket_options=emu.websocket_options(),
        timeout=TIMEOUT,
    )
    connection = RealtimeConnection(
        sdk, flavour=flavour, on_event=lambda conn, event: None, on_closed=lambda *_: None
    )
    await connection.wait_for(lambda e: isinstance(e, SessionEvent), TIMEOUT)
    return connection


async def _say(connection: RealtimeConnection) -> list[int]:
    """Post ``SPEECH`` chunks of speech and the silence that ends them; the speech the
    service committed."""
    committed = connection.expect(lambda e: isinstance(e, BufferCommitted))
    for seq in range(SPEECH):
        connection.post(_append(seq))
    for seq in range(SPEECH, SPEECH + 40):
        connection.post(_append(seq, speech=False))
    await committed
    return list(range(SPEECH))


@pytest.mark.parametrize("flavour", ["ga", "beta"])
async def test_an_event_posted_while_nothing_is_queued_is_written_before_post_returns(
    flavour: Flavour,
) -> None:
    async with OpenAIEmulator(config(time_scale=0.05)) as emu:
        connection = await _connection(emu, flavour)
        try:
            connection.post(_append(100))
            assert connection.written == 1 and connection.queued == 0
            spoken = await _say(connection)
        finally:
            await connection.close()
        await emu.wait_disconnected()
    [record] = emu.ledger.sessions
    assert record.committed_speech == [100, *spoken]
    assert record.client_events["input_audio_buffer.append"] == 1 + SPEECH + 40


async def test_events_after_one_the_socket_declined_keep_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The socket declines the first chunk (as when its buffer is full): it waits in the
    queue, and the chunks posted after it wait behind it, not offered to the socket, until the
    writer has drained the queue; then the socket takes posts at once again."""

    class DecliningOnce:
        def __init__(self, direct: DirectSend) -> None:
            self.direct, self.asked = direct, 0

        def send_text(self, text: str) -> bool:
            self.asked += 1
            return self.asked > 1 and self.direct.send_text(text)

    senders: list[DecliningOnce] = []

    def declining_once(sdk: Any) -> DecliningOnce:
        direct = DirectSend.of(sdk._connection)
        assert direct is not None
        senders.append(DecliningOnce(direct))
        return senders[-1]

    monkeypatch.setattr(realtime_connection, "direct_send", declining_once)
    async with OpenAIEmulator(config(time_scale=0.05)) as emu:
        connection = await _connection(emu, "ga")
        [sender] = senders
        try:
            committed = connection.expect(lambda e: isinstance(e, BufferCommitted))
            for seq in range(SPEECH):
                connection.post(_append(seq))
            assert sender.asked == 1 and connection.queued == SPEECH
            for seq in range(SPEECH, SPEECH + 40):
                connection.post(_append(seq, speech=False))
            await committed
            assert connection.queued == 0
            connection.post(_append(100, speech=False))
            assert sender.asked == 2 and connection.queued == 0
            assert connection.written == SPEECH + 40 + 1
        finally:
            await connection.close()
        await emu.wait_disconnected()
    [record] = emu.ledger.sessions
    assert record.committed_speech == list(range(SPEECH))
    assert record.client_events["input_audio_buffer.append"] == SPEECH + 40 + 1


async def test_without_the_reach_every_event_goes_through_the_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(realtime_connection.SDK_SOCKET, "verdict", False)
    async with OpenAIEmulator(config(time_scale=0.05)) as emu:
        connection = await _connection(emu, "ga")
        try:
            connection.post(_append(100))
            assert connection.written == 0 and connection.queued == 1
            spoken = await _say(connection)
        finally:
            await connection.close()
        await emu.wait_disconnected()
    [record] = emu.ledger.sessions
    assert record.committed_speech == [100, *spoken]
