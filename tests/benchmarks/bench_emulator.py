"""Messages per second the emulator sustains, client and emulator in one process.

Run: .venv/bin/python tests/benchmarks/bench_emulator.py

Scenarios, each with N concurrent sessions over TLS:
- server->client: each session asks for an answer of many audio chunks sent back to back;
  raw WebSocket clients count frames (no JSON parsing on the client side).
- client->server: each session streams 20 ms user audio messages as fast as it can, then
  one text turn whose answer proves everything before it was consumed.
- sdk: the server->client scenario through the google-genai SDK (client parsing included).
Each figure is the best of three runs (the machine may be shared).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial

from google.genai import types
from loguru import logger
from websockets.asyncio.client import ClientConnection, connect

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/bench", "generationConfig": {}}})
ASK = json.dumps({"client_content": {"turns": [{"parts": [{"text": "go"}]}], "turnComplete": True}})


async def _raw(emu: Emulator, body: Callable[[ClientConnection], Awaitable[int]]) -> int:
    async with connect(
        f"wss://127.0.0.1:{emu.port}{PATH}",
        ssl=emu.client_ssl_context(),
        additional_headers={"x-goog-api-key": "bench"},
        proxy=None,
        max_size=2**20,
    ) as ws:
        await ws.send(SETUP)
        await ws.recv()
        return await body(ws)


async def _until_turn_complete(ws: ClientConnection) -> int:
    frames = 0
    while True:
        frame = await ws.recv(decode=False)
        frames += 1
        if b'"turnComplete"' in frame:
            return frames


async def _server_to_client(ws: ClientConnection) -> int:
    await ws.send(ASK)
    return await _until_turn_complete(ws)


def _audio_streamer(messages: int) -> Callable[[ClientConnection], Awaitable[int]]:
    payloads = [
        json.dumps(
            {
                "realtime_input": {
                    "audio": {
                        "data": base64.b64encode(user_audio(i, speech=False)).decode(),
                        "mime_type": "audio/pcm;rate=16000",
                    }
                }
            }
        )
        for i in range(messages)
    ]

    async def stream(ws: ClientConnection) -> int:
        for payload in payloads:
            await ws.send(payload)
        await ws.send(ASK)
        await _until_turn_complete(ws)
        return messages

    return stream


async def _run(
    sessions: int, config: EmulatorConfig, body: Callable[[ClientConnection], Awaitable[int]]
) -> tuple[int, float]:
    async with Emulator(config) as emu:
        start = time.perf_counter()
        counts = await asyncio.gather(*(_raw(emu, body) for _ in range(sessions)))
        elapsed = time.perf_counter() - start
    return sum(counts), elapsed


async def _sdk(sessions: int, chunks: int) -> tuple[int, float]:
    config = EmulatorConfig(answer_chunks=chunks, chunk_interval=0.0)
    async with Emulator(config) as emu:
        client = emu.client()
        live = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])

        async def one() -> int:
            async with client.aio.live.connect(model="bench", config=live) as session:
                await session.send_client_content(
                    turns=types.Content(role="user", parts=[types.Part(text="go")])
                )
                return sum([1 async for _ in session.receive()])

        start = time.perf_counter()
        counts = await asyncio.gather(*(one() for _ in range(sessions)))
        elapsed = time.perf_counter() - start
    return sum(counts), elapsed


_RUNS = 3


async def _best(name: str, sessions: int, run: Callable[[], Awaitable[tuple[int, float]]]) -> None:
    results = [await run() for _ in range(_RUNS)]
    messages, elapsed = min(results, key=lambda r: r[1])
    rate = messages / elapsed
    print(f"{name:<16} {sessions:>8} {messages:>10} {elapsed:>9.2f} {rate:>12,.0f}", flush=True)


async def main() -> None:
    logger.remove()  # per-connection debug lines would dominate the measurement
    print(f"python {sys.version.split()[0]}; emulator and clients share one process")
    print(f"{'scenario':<16} {'sessions':>8} {'messages':>10} {'seconds':>9} {'msg/s':>12}")
    for sessions, chunks in ((1, 20_000), (50, 400), (200, 100)):
        config = EmulatorConfig(answer_chunks=chunks, chunk_interval=0.0)
        run = partial(_run, sessions, config, _server_to_client)
        await _best("server->client", sessions, run)
    for sessions, count in ((1, 20_000), (50, 400), (200, 100)):
        config = EmulatorConfig(answer_chunks=1, chunk_interval=0.0)
        run = partial(_run, sessions, config, _audio_streamer(count))
        await _best("client->server", sessions, run)
    for sessions, chunks in ((1, 5_000), (50, 100)):
        await _best("sdk s->c", sessions, partial(_sdk, sessions, chunks))


if __name__ == "__main__":
    asyncio.run(main())
