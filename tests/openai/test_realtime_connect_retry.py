"""``OpenAIRealtimeTransport.connect`` retries its first dial as a move's attempts are retried:
the move machine's one failure policy (``failures.classify``, the ``RetryPolicy``, the
options' ``retry_delays``). A refused (503, 429) dial is retried, a refusal of the
credentials (401) ends the connect at once. The ``openai`` SDK over real WebSockets (TLS) to
the bundled emulator, whose ledger counts the refused upgrades; on loop time (looptime)."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.transport import ConnectError, TransportError
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import config, speech

pytestmark = pytest.mark.looptime


async def test_a_first_dial_refused_twice_with_503_is_retried_and_the_call_connects() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(503, 2)
        t = transport(emu, retry_delays=(0.0, 0.5, 1.0))
        rec = Recorder(t)
        await t.connect()
        assert t.is_connected
        assert [status for _, _, status in emu.ledger.refused] == [503, 503]
        assert len(emu.ledger.sessions) == 1
        # Each retried dial is heard of, as a recoverable error; the third dial served.
        errors = [event for (event,) in rec.named("on_error")]
        assert len(errors) == 2 and all(e.recoverable for e in errors)
        kinds = [a[0].kind for a in rec.named("on_connection_lifecycle")]
        assert kinds == ["attempt", "setup-failed"] * 2 + ["attempt", "setup-ok"]
        assert len(rec.named("on_session_ready")) == 1
        # A connect is no move: nothing is reported as one.
        assert rec.named("on_move_started") == [] and rec.named("on_move") == []
        for chunk in speech(0, 3, ["hello"]):
            t.send_audio(chunk)
        await rec.ended(1)
        assert "hello" in rec.transcript
        await t.disconnect()


async def test_a_first_dial_refused_past_every_attempt_raises_the_last_refusal() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(429, 3)
        t = transport(emu, retry_delays=(0.0, 0.5))
        with pytest.raises(ConnectError) as caught:
            await t.connect()
        assert caught.value.failure.code == 429
        assert len(emu.ledger.refused) == 2 and emu.ledger.sessions == []
        assert not t.is_connected
        # The transport may connect again: the next dial is refused once more, then served.
        await t.connect()
        assert t.is_connected and len(emu.ledger.refused) == 3
        await t.disconnect()


async def test_a_first_dial_refused_with_401_raises_at_once_without_a_retry() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(401, 1)
        t = transport(emu, retry_delays=(0.0, 0.5, 1.0))
        rec = Recorder(t)
        with pytest.raises(ConnectError) as caught:
            await t.connect()
        assert caught.value.failure.code == 401
        assert len(emu.ledger.refused) == 1 and emu.ledger.sessions == []
        assert rec.named("on_error") == []  # nothing was retried
        assert not t.is_connected
        await t.disconnect()


async def test_connect_with_retry_false_dials_once_and_pauses_given_replace_the_delays() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(503, 3)
        t = transport(emu, retry_delays=(0.0, 0.5, 1.0, 2.0))
        with pytest.raises(ConnectError):
            await t.connect(retry=False)
        assert len(emu.ledger.refused) == 1
        with pytest.raises(ConnectError):
            await t.connect(retry=(0.0, 0.25))  # two attempts, both refused
        assert len(emu.ledger.refused) == 3
        with pytest.raises(ValueError, match="retry must be"):
            await t.connect(retry=(0.0, -1.0))
        await t.connect(retry=False)
        assert t.is_connected and len(emu.ledger.sessions) == 1
        await t.disconnect()


async def test_disconnect_while_connect_waits_to_retry_ends_the_connect_and_dials_no_more() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(503, 1)
        t = transport(emu, retry_delays=(0.0, 30.0))
        rec = Recorder(t)
        connecting = asyncio.create_task(t.connect())
        await rec.until(lambda r: bool(r.named("on_error")))  # refused: it waits to retry
        await t.disconnect()
        with pytest.raises(TransportError, match="disconnected while it connected"):
            await asyncio.wait_for(connecting, 1)
        await asyncio.sleep(60)  # past the pause: no second dial comes
        assert len(emu.ledger.refused) == 1 and emu.ledger.sessions == []


async def test_a_connect_cancelled_while_it_waits_to_retry_leaves_no_dial_behind() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(503, 1)
        t = transport(emu, retry_delays=(0.0, 30.0))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(5):
                await t.connect()
        await asyncio.sleep(60)
        assert len(emu.ledger.refused) == 1 and emu.ledger.sessions == []
        # The transport may connect again.
        await t.connect()
        assert t.is_connected
        await t.disconnect()
