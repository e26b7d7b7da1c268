"""Helpers shared by the emulator tests: configs, reading messages, sending audio."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from google.genai import errors, types
from google.genai.live import AsyncSession
from websockets.asyncio.client import connect

from realtime_resumption.testing.emulator import EmulatorConfig, user_audio

MODEL = "gemini-live-2.5-flash-preview"
PCM = "audio/pcm;rate=16000"

Message = types.LiveServerMessage

NO_PROXY: dict[str, Any] = (
    {"proxy": None} if "proxy" in inspect.signature(connect).parameters else {}
)
"""``connect`` arguments that keep a raw client off any proxy the environment names: websockets
15 and later read one from it; 13 and 14 have no proxy support (and no such argument)."""


def config(**changes: Any) -> EmulatorConfig:
    """A fast emulator configuration: every duration runs at 1/100."""
    changes.setdefault("time_scale", 0.01)
    return EmulatorConfig(**changes)


def live_config(
    *,
    handle: str | None = None,
    resumption: bool = True,
    transparent: bool | None = None,
    tools: list[str] | None = None,
    text: bool = False,
    transcription: bool = True,
    **extra: Any,
) -> types.LiveConnectConfig:
    """A LiveConnectConfig with resumption, transcriptions and the named tools."""
    return types.LiveConnectConfig(
        response_modalities=[types.Modality.TEXT if text else types.Modality.AUDIO],
        session_resumption=(
            types.SessionResumptionConfig(handle=handle, transparent=transparent)
            if resumption
            else None
        ),
        tools=(
            [types.Tool(function_declarations=[types.FunctionDeclaration(name=n) for n in tools])]
            if tools
            else None
        ),
        input_audio_transcription=types.AudioTranscriptionConfig() if transcription else None,
        output_audio_transcription=types.AudioTranscriptionConfig() if transcription else None,
        **extra,
    )


async def read_until(
    session: AsyncSession, predicate: Callable[[Message], bool], timeout: float = 3.0
) -> list[Message]:
    """Every message up to and including the first that satisfies ``predicate``."""
    out: list[Message] = []
    async with asyncio.timeout(timeout):
        while True:
            gen = session.receive()
            try:
                async for message in gen:
                    out.append(message)
                    if predicate(message):
                        return out
            finally:
                await gen.aclose()


def is_turn_complete(message: Message) -> bool:
    return bool(message.server_content and message.server_content.turn_complete)


def is_handle(message: Message) -> bool:
    update = message.session_resumption_update
    return bool(update and update.new_handle and update.resumable)


async def read_turn(session: AsyncSession, timeout: float = 3.0) -> list[Message]:
    """Messages up to and including the next turnComplete."""
    return await read_until(session, is_turn_complete, timeout)


async def next_handle(session: AsyncSession, timeout: float = 3.0) -> str:
    """The next resumable handle the session receives."""
    messages = await read_until(session, is_handle, timeout)
    handle = messages[-1].session_resumption_update.new_handle  # type: ignore[union-attr]
    assert handle is not None
    return handle


async def handle_after_turn(session: AsyncSession, text: str = "hello") -> str:
    """Ask ``text``, read the answer, and return the handle that follows it: the service
    issues a connection's first handle after its first turn, not at setup."""
    await ask(session, text)
    await read_turn(session)
    return await next_handle(session)


async def read_until_closed(
    session: AsyncSession, timeout: float = 3.0
) -> tuple[int, list[Message]]:
    """Read until the connection closes; the close code and the messages before it."""
    out: list[Message] = []
    try:
        await read_until(session, lambda m: out.append(m) is not None, timeout)
    except errors.APIError as exc:
        return exc.code, out
    raise AssertionError("the connection did not close")


async def say(
    session: AsyncSession,
    *,
    words: list[str] | None = None,
    start: int = 0,
    speech: int = 3,
    silence: int = 3,
) -> list[int]:
    """Send an audio turn: ``speech`` loud chunks (carrying ``words``), then silent chunks.

    Returns the seqs sent."""
    words = words or []
    seqs = []
    for i in range(speech + silence):
        seq = start + i
        word = words[i] if i < len(words) else None
        data = user_audio(seq, speech=i < speech, word=word)
        await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))
        seqs.append(seq)
    return seqs


async def ask(session: AsyncSession, text: str) -> None:
    """Send a complete text turn through client_content."""
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text=text)]), turn_complete=True
    )


def function_calls(messages: list[Message]) -> list[types.FunctionCall]:
    """The function calls of every ``toolCall`` among ``messages``, in order."""
    return [c for m in messages if m.tool_call for c in m.tool_call.function_calls or ()]


def audio_ids(messages: list[Message]) -> list[tuple[int, int]]:
    """(turn, chunk) of every answer audio chunk in ``messages``."""
    from realtime_resumption.testing.emulator import answer_chunk_id

    ids = []
    for m in messages:
        if m.server_content and m.server_content.model_turn:
            for part in m.server_content.model_turn.parts or []:
                if part.inline_data and part.inline_data.data:
                    ident = answer_chunk_id(part.inline_data.data)
                    assert ident is not None
                    ids.append(ident)
    return ids


@contextlib.asynccontextmanager
async def command_line(module: str, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m <module> <args>`` running, its stdout piped (an emulator's command line);
    killed on exit if it is still running."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def interrupt(process: asyncio.subprocess.Process) -> str:
    """Ctrl-C: what the process printed after it, once it has exited with 0."""
    assert process.stdout is not None
    process.send_signal(signal.SIGINT)
    async with asyncio.timeout(20):
        rest = await process.stdout.read()
        assert await process.wait() == 0
    return rest.decode()


def exists(path: str) -> bool:
    """Whether the CA file is there (a local stat: nothing to await)."""
    return os.path.exists(path)
