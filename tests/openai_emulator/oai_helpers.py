"""Helpers for the OpenAI Realtime emulator's tests: configs, speaking, reading events."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Any

from openai.resources.realtime.realtime import AsyncRealtimeConnection

from realtime_resumption.testing.openai_emulator import (
    OpenAIEmulator,
    OpenAIEmulatorConfig,
    user_audio,
)

MODEL = "gpt-realtime"
RATE = 24_000
TIMEOUT = 5.0


def config(**changes: Any) -> OpenAIEmulatorConfig:
    """A fast configuration: every duration runs at 1/100."""
    changes.setdefault("time_scale", 0.01)
    return OpenAIEmulatorConfig(**changes)


def connect(emu: OpenAIEmulator, **options: Any) -> Any:
    """The ``openai`` SDK's GA ``client.realtime.connect`` to the emulator, over its TLS."""
    return emu.client().realtime.connect(
        model=MODEL, websocket_connection_options=emu.websocket_options(), **options
    )


def speech(first: int, count: int, words: Sequence[str] = (), *, silence: int = 2) -> list[bytes]:
    """``count`` chunks of 20 ms speech numbered from ``first`` (the first ones carrying
    ``words``), then ``silence`` silent chunks numbered on."""
    chunks = []
    for i in range(count):
        word = words[i] if i < len(words) else None
        chunks.append(user_audio(first + i, word=word, rate=RATE))
    for i in range(silence):
        chunks.append(user_audio(first + count + i, speech=False, rate=RATE))
    return chunks


def user_text(text: str) -> dict[str, Any]:
    """A user's text message, as ``conversation.item.create`` takes it."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def say(conn: AsyncRealtimeConnection, chunks: Sequence[bytes]) -> None:
    """Append every chunk (audio time is what the VAD counts: no need to wait between)."""
    for chunk in chunks:
        await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())


async def until(conn: AsyncRealtimeConnection, kind: str, timeout: float = TIMEOUT) -> list[Any]:
    """Every event up to and including the first of type ``kind``."""
    events = []
    async with asyncio.timeout(timeout):
        while True:
            event = await conn.recv()
            events.append(event)
            if event.type == kind:
                return events


def of(events: Sequence[Any], kind: str) -> list[Any]:
    """The events of type ``kind``."""
    return [e for e in events if e.type == kind]


def transcript(events: Sequence[Any]) -> str:
    """The answer transcript the deltas spell."""
    return "".join(e.delta for e in of(events, "response.output_audio_transcript.delta"))
