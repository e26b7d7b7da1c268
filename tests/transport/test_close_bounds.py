"""A close is bounded and never raises, whatever hangs beneath it; waiting for cancelled
children never swallows the caller's own cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from google.genai import client as genai_client

from realtime_resumption.gemini import Credential, GeminiLiveTransport
from realtime_resumption.gemini import closing as transport_module
from realtime_resumption.gemini.connection import CLOSE_TIMEOUT
from realtime_resumption.gemini.tasks import cancel_and_wait
from realtime_resumption.testing.emulator import Emulator

from .transport_helpers import MODEL, Recorder, connected_and_answered, emulator_config

BOUND = 0.5


class Stubborn:
    """A credential provider that answers the first dial, then hangs through one
    cancellation on the next (a misbehaving user callback)."""

    def __init__(self) -> None:
        self.calls = 0
        self.task: asyncio.Task[object] | None = None
        self.entered = asyncio.Event()

    async def __call__(self) -> Credential:
        self.calls += 1
        if self.calls > 1:
            self.task = asyncio.current_task()
            self.entered.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                await asyncio.sleep(60)
        return Credential("emulator-key")

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


@pytest.fixture
def short_disconnect(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(transport_module, "DISCONNECT_TIMEOUT", BOUND)
    yield


async def _hung_move(emu: Emulator, provider: Stubborn) -> tuple[GeminiLiveTransport, Recorder]:
    transport = GeminiLiveTransport(
        model=MODEL, http_options=emu.http_options(), credential_provider=provider
    )
    rec = await connected_and_answered(transport)
    emu.faults.drop()
    async with asyncio.timeout(5):
        await provider.entered.wait()
    return transport, rec


@pytest.mark.usefixtures("short_disconnect")
async def test_disconnect_is_bounded_and_does_not_raise_when_a_move_hangs() -> None:
    provider = Stubborn()
    async with Emulator(emulator_config()) as emu:
        transport, rec = await _hung_move(emu, provider)
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(BOUND * 6):
            await transport.disconnect()
        elapsed = loop.time() - started
        provider.stop()
    assert elapsed >= BOUND, "the hung move was waited for, up to the bound"
    assert not transport.is_connected
    assert rec.count("on_close") == 1
    (move,) = rec.moves
    assert move.outcome.value == "lost"


@pytest.mark.usefixtures("short_disconnect")
async def test_disconnect_passes_the_callers_cancellation_on() -> None:
    provider = Stubborn()
    async with Emulator(emulator_config()) as emu:
        transport, _ = await _hung_move(emu, provider)
        closing = asyncio.create_task(transport.disconnect())
        await asyncio.sleep(0.05)
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
        assert closing.cancelled(), "the caller's cancellation must not be swallowed"
        provider.stop()
        await transport.disconnect()
    assert not transport.is_connected


async def test_cancel_and_wait_absorbs_the_childrens_cancellation_not_the_callers() -> None:
    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)
            raise

    child = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    assert await cancel_and_wait([child], 5.0)
    assert child.cancelled()

    child = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cancel_and_wait([child], 5.0))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    assert waiter.cancelled()
    await asyncio.wait([child])


async def test_a_client_whose_close_hangs_does_not_hold_the_connections_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's ``aclose`` is replaced by one that never returns (a real client's close
    cannot be made to hang here): each connection's client close is bounded."""

    async def hang(self: object) -> None:
        await asyncio.sleep(60)

    async def credential() -> Credential:
        return Credential("emulator-key")

    async with Emulator(emulator_config()) as emu:
        transport = GeminiLiveTransport(
            model=MODEL, http_options=emu.http_options(), credential_provider=credential
        )
        await transport.connect()
        monkeypatch.setattr(genai_client.AsyncClient, "aclose", hang)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await transport.disconnect()
        elapsed = loop.time() - started
    assert elapsed < transport_module.DISCONNECT_TIMEOUT
    assert elapsed >= CLOSE_TIMEOUT, "the hung close was waited for, up to its bound"
