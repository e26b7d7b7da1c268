"""Client CPU per second of call audio on OpenAI Realtime: the bare ``openai`` SDK client
(its typed sends and events), the wire floor on the SDK's connection (raw JSON both ways), and
``OpenAIRealtimeTransport``, streaming the same call, in one run.

The call: 20 ms chunks of 24 kHz PCM16 at the call's pace, a second of speech every ten
seconds, and the emulator's spoken answers (10 chunks of 100 ms) received and delivered. The
emulator runs in a process of its own (``python -m realtime_resumption.testing.openai_emulator``)
at ``--scale`` (default 0.1: a minute of call takes six seconds), and the client paces its
chunks on the same scale. The figure is this process's CPU (``time.process_time``) per second of
call audio; the stacks run ``--runs`` times interleaved and the best run of each counts (load on
a shared machine only adds time). Not a test: run it by hand.

    .venv/bin/python tests/openai/bench_realtime_cpu.py [--seconds 60] [--runs 3] [--scale 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from realtime_resumption.openai import (
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import user_audio

CHUNK = 0.02
ASK_EVERY = 500
SPEECH = 50
RATE = 24_000
MODEL = "gpt-realtime"
WAIT = 30.0

_SPEECH = user_audio(0, speech=True, rate=RATE)
_SILENCE = user_audio(0, speech=False, rate=RATE)


def chunk(index: int) -> bytes:
    return _SPEECH if index % ASK_EVERY < SPEECH else _SILENCE


class Emulator:
    """The emulator in a child process; its base URL and CA file once it serves."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.base_url = ""
        self.ca_file = ""
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Emulator:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "realtime_resumption.testing.openai_emulator",
            "--time-scale",
            str(self.scale),
            "--no-session-cap",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self._process.stdout is not None
        async with asyncio.timeout(WAIT):
            while not (self.base_url and self.ca_file):
                line = (await self._process.stdout.readline()).decode()
                if line.lower().startswith("base url:"):
                    self.base_url = line.split()[-1]
                elif line.lower().startswith("ca file:"):
                    self.ca_file = line.split()[-1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._process is not None
        self._process.terminate()
        await asyncio.wait_for(self._process.wait(), WAIT)

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key="bench",
            base_url=self.base_url,
            websocket_base_url=self.base_url.replace("https://", "wss://"),
        )

    def websocket_options(self) -> dict[str, Any]:
        return {"ssl": ssl.create_default_context(cafile=self.ca_file)}


async def stream(
    seconds: float, scale: float, send: Callable[[bytes], Awaitable[None] | None]
) -> float:
    """Stream the call through ``send`` at its pace; this process's CPU seconds meanwhile."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(1.0 * scale)
    interval = CHUNK * scale
    cpu = time.process_time()
    start = loop.time()
    for index in range(round(seconds / CHUNK)):
        delay = start + index * interval - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        sent = send(chunk(index))
        if sent is not None:
            await sent
    await asyncio.sleep(ASK_EVERY * interval / 2)
    return time.process_time() - cpu


async def sdk(emu: Emulator, seconds: float) -> tuple[float, int]:
    """The bare SDK: its GA connection, the same session.update, audio decoded as it comes."""
    answers = 0
    async with emu.client().realtime.connect(
        model=MODEL, websocket_connection_options=emu.websocket_options()
    ) as conn:
        await conn.send(SessionConfig().session_update("ga"))  # type: ignore[arg-type]

        async def receive() -> None:
            nonlocal answers
            async for event in conn:
                if event.type == "response.output_audio.delta":
                    base64.b64decode(event.delta)
                    answers += 1

        async def send(pcm: bytes) -> None:
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())

        receiving = asyncio.create_task(receive())
        try:
            cpu = await stream(seconds, emu.scale, send)
        finally:
            receiving.cancel()
    return cpu, answers


async def floor(emu: Emulator, seconds: float) -> tuple[float, int]:
    """The wire floor on the SDK's connection: raw JSON text out (``send_raw``), raw frames in
    (``recv_bytes``, ``json.loads``), audio decoded: what any client must do."""
    answers = 0
    async with emu.client().realtime.connect(
        model=MODEL, websocket_connection_options=emu.websocket_options()
    ) as conn:
        await conn.send_raw(json.dumps(SessionConfig().session_update("ga")))

        async def receive() -> None:
            nonlocal answers
            while True:
                event = json.loads(await conn.recv_bytes())
                if event.get("type") == "response.output_audio.delta":
                    base64.b64decode(event["delta"])
                    answers += 1

        async def send(pcm: bytes) -> None:
            append = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
            await conn.send_raw(json.dumps(append))

        receiving = asyncio.create_task(receive())
        try:
            cpu = await stream(seconds, emu.scale, send)
        finally:
            receiving.cancel()
    return cpu, answers


async def transport(emu: Emulator, seconds: float) -> tuple[float, int]:
    answers = 0

    def answered(_pcm: bytes) -> None:
        nonlocal answers
        answers += 1

    options = OpenAIRealtimeOptions(websocket_options=emu.websocket_options(), session_cap=None)
    ours = OpenAIRealtimeTransport(emu.client(), SessionConfig(), options, telemetry=False)
    ours.on_audio_output = answered
    await ours.connect()
    try:
        cpu = await stream(seconds, emu.scale, ours.send_audio)
    finally:
        await ours.disconnect()
    return cpu, answers


async def main(seconds: float, runs: int, scale: float) -> None:
    stacks = {"sdk": sdk, "floor": floor, "transport": transport}
    best: dict[str, float] = {}
    async with Emulator(scale) as emu:
        for run in range(runs):
            for name, stack in stacks.items():
                cpu, answers = await stack(emu, seconds)
                per_second = cpu / seconds * 1000
                print(
                    f"run {run + 1} {name:10} {per_second:7.3f} ms CPU per call-second, "
                    f"{answers} answer chunks"
                )
                best[name] = min(best.get(name, per_second), per_second)
    print(
        json.dumps(best),
        f"transport/sdk = {best['transport'] / best['sdk']:.3f},",
        f"transport/floor = {best['transport'] / best['floor']:.3f}",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.1)
    args = parser.parse_args()
    os.environ.setdefault("LOGURU_LEVEL", "WARNING")
    asyncio.run(main(args.seconds, args.runs, args.scale))
