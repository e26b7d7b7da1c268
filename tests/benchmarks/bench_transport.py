"""CPU time per audio chunk through GeminiLiveTransport, sending and receiving.

The emulator runs on its own thread and event loop, so the figures are the client thread's CPU
time alone (``time.thread_time``): the transport, google-genai, websockets and TLS. Each figure
is set beside the bare SDK doing the same work, so the transport's own share shows.

    .venv/bin/python tests/benchmarks/bench_transport.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from emulator_thread import EmulatorThread
from google import genai
from google.genai import types
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import EmulatorConfig, user_audio
from realtime_resumption.transport import ContentTurn

MODEL = "gemini-live-2.5-flash-preview"
SEND_CHUNKS = 2000
RECEIVE_CHUNKS = 1000
RUNS = 7
SPEECH = user_audio(1, speech=True)
"""20 ms at 16 kHz. Speech, not silence: the transport gives up the middle of a long silence
(never sent), so a burst of silence would never be written whole. The emulator's VAD (silence
of an hour ends a turn) never ends the turn it starts."""


async def cpu_per_unit(work: Callable[[], Awaitable[int]]) -> float:
    """Client-thread CPU microseconds per unit of ``work`` (which returns its unit count).
    Shared by the benchmarks that measure the transport as a framework drives it."""
    start = time.thread_time()
    chunks = await work()
    return (time.thread_time() - start) * 1e6 / chunks


async def until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    """Wait, within ``timeout``, until ``predicate`` holds."""
    # Polling, because the benchmark measures the transport as a framework drives it.
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.001)


# --- sending -----------------------------------------------------------------------------------


async def sdk_send(http_options: types.HttpOptions) -> float:
    client = genai.Client(api_key="bench", http_options=http_options)
    async with client.aio.live.connect(model=MODEL, config=types.LiveConnectConfig()) as session:

        async def work() -> int:
            for _ in range(SEND_CHUNKS):
                blob = types.Blob(data=SPEECH, mime_type="audio/pcm;rate=16000")
                await session.send_realtime_input(audio=blob)
            return SEND_CHUNKS

        return await cpu_per_unit(work)


async def transport_send(http_options: types.HttpOptions, **options: Any) -> tuple[float, float]:
    """(the synchronous send_audio calls alone, the whole path until written); ``options``
    go to the transport."""
    transport = GeminiLiveTransport(
        api_key="bench", http_options=http_options, model=MODEL, **options
    )
    await transport.connect()
    calls = 0.0

    async def work() -> int:
        nonlocal calls
        # In batches a second of audio long, yielding between them as a framework's audio
        # loop does: a burst longer than the input bound (30 s of audio) would drop its start.
        spent = 0.0
        for first in range(0, SEND_CHUNKS, 50):
            start = time.thread_time()
            for _ in range(min(50, SEND_CHUNKS - first)):
                transport.send_audio(SPEECH)
            spent += time.thread_time() - start
            await asyncio.sleep(0)
        calls = spent * 1e6 / SEND_CHUNKS
        await until(lambda: transport.get_diagnostics().sends["audio"].sent == SEND_CHUNKS)
        return SEND_CHUNKS

    total = await cpu_per_unit(work)
    await transport.disconnect()
    return calls, total


# --- receiving ---------------------------------------------------------------------------------


async def sdk_receive(http_options: types.HttpOptions) -> float:
    client = genai.Client(api_key="bench", http_options=http_options)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    async with client.aio.live.connect(model=MODEL, config=config) as session:

        async def work() -> int:
            await session.send_realtime_input(text="hello")
            chunks = 0
            while True:
                async for message in session.receive():
                    content = message.server_content
                    if content and content.model_turn:
                        for part in content.model_turn.parts or ():
                            if part.inline_data and part.inline_data.data:
                                chunks += 1
                    if content and content.turn_complete:
                        return chunks

        return await cpu_per_unit(work)


async def transport_receive(http_options: types.HttpOptions, **options: Any) -> float:
    """Microseconds per answer chunk received; ``options`` go to the transport."""
    transport = GeminiLiveTransport(
        api_key="bench",
        http_options=http_options,
        model=MODEL,
        output_audio_transcription=False,
        tool_call_grace=0.0,
        **options,
    )
    received: list[bytes] = []
    done = asyncio.Event()
    transport.on_audio_output = received.append
    transport.on_turn_complete = lambda _turn: done.set()
    await transport.connect()

    async def work() -> int:
        transport.send_live_text([ContentTurn("user", "hello")])
        async with asyncio.timeout(60):
            await done.wait()
        return len(received)

    figure = await cpu_per_unit(work)
    await transport.disconnect()
    return figure


def _figure(samples: list[float]) -> str:
    # The minimum estimates the intrinsic cost on a shared machine; the median shows the spread.
    return f"{min(samples):7.1f} (median {statistics.median(samples):6.1f})"


def _ratio(ours: list[float], sdk: list[float]) -> float:
    return min(ours) / min(sdk)


async def main() -> None:
    logger.remove()  # per-connection debug lines would be most of the output
    print(f"CPU microseconds per audio chunk (client thread), best of {RUNS} interleaved runs")
    sdk: list[float] = []
    calls: list[float] = []
    total: list[float] = []
    with EmulatorThread(EmulatorConfig(vad_silence=3600.0)) as server:
        http_options = server.http_options
        for _ in range(RUNS):
            sdk.append(await sdk_send(http_options))
            call, whole = await transport_send(http_options)
            calls.append(call)
            total.append(whole)
    print(f"send    ({SEND_CHUNKS} x 20 ms of 16 kHz PCM16, until written to the socket)")
    print(f"  bare SDK send_realtime_input     {_figure(sdk)}")
    print(f"  transport send_audio, whole path {_figure(total)}")
    print(f"  transport send_audio call alone  {_figure(calls)}")
    send_ratio = _ratio(total, sdk)

    sdk, ours = [], []
    receive_config = EmulatorConfig(answer_chunks=RECEIVE_CHUNKS, chunk_interval=0.0)
    with EmulatorThread(receive_config) as server:
        http_options = server.http_options
        for _ in range(RUNS):
            sdk.append(await sdk_receive(http_options))
            ours.append(await transport_receive(http_options))
    print(f"receive ({RECEIVE_CHUNKS} x 40 ms of 24 kHz PCM16, parsed and delivered)")
    print(f"  bare SDK receive                 {_figure(sdk)}")
    print(f"  transport on_audio_output        {_figure(ours)}")
    print(
        f"transport / bare SDK, per chunk (best runs): send {send_ratio:.2f}x, "
        f"receive {_ratio(ours, sdk):.2f}x (goal <= 1.1x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
