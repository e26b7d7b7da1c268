"""The stacks the demo compares, each behind the same small interface.

Each stack is built the way its own examples build it; only the google-genai
``http_options`` point at the call's emulator. A stack takes the caller's microphone chunks
(``push_audio``), plays its answer audio in real time into the caller's ``Ear``, runs the
``get_weather`` tool itself, and notes every error it surfaces to the application.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from google.genai import types

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.transport import ToolCall, ToolResult

from .call import INSTRUCTIONS, CallRecord, Ear, weather
from .playback import RealtimePlayer


class Stack(Protocol):
    """One voice stack under test, on one emulator."""

    async def start(self) -> None:
        """Build and start the stack; it connects on its own."""

    def push_audio(self, pcm: bytes) -> None:
        """One 20 ms microphone chunk (16 kHz PCM16 mono)."""

    async def stop(self) -> None:
        """End the call and release everything."""


@dataclass(frozen=True)
class StackContext:
    """What a stack is given: the SDK options that reach its emulator, the caller's ear and
    the call's record."""

    http_options: types.HttpOptions
    ear: Ear
    record: CallRecord
    clock: Callable[[], float]
    mark: Callable[[str, str], None]

    def error(self, text: str) -> None:
        """The stack surfaced an error to the application."""
        self.record.errors.append((self.clock(), text))
        self.mark("error", text)

    def closed(self, why: str) -> None:
        """The stack ended the call on its own."""
        if self.record.closed is None:
            self.record.closed = why
            self.mark("loss", f"call ended: {why}")


StackFactory = Callable[[StackContext], Stack]

EMULATOR_KEY = "emulator-key"
"""The emulator takes any key; the stacks need one to build their client."""


@dataclass(frozen=True)
class Lane:
    """One column of the comparison: a stack, its label, and whether it is ours."""

    key: str
    title: str
    ours: bool
    framework: str | None
    """``pipecat`` or ``livekit``; None for the transport driven with no framework."""
    factory: StackFactory


WEATHER_DECLARATION = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}
    ),
)


def _city(arguments: dict[str, Any]) -> str | None:
    city = arguments.get("city")
    return city if isinstance(city, str) else None


class TransportStack:
    """``GeminiLiveTransport`` driven directly: the application calls it and plays its audio.

    This is the transport layer alone, not a framework integration.
    """

    def __init__(self, ctx: StackContext) -> None:
        self._ctx = ctx
        self._transport = GeminiLiveTransport(
            api_key=EMULATOR_KEY,
            http_options=ctx.http_options,
            tools=[WEATHER_DECLARATION],
            system_instruction=INSTRUCTIONS,
        )
        self._player = RealtimePlayer(ctx.ear)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        t = self._transport
        t.on_audio_output = lambda pcm: self._player.enqueue(pcm)
        t.on_interrupted = lambda _turn: self._player.clear()
        t.on_tool_call = self._tool_calls
        t.on_error = lambda event: ctx.error(f"{type(event.error).__name__}: {event.error}")
        t.on_close = self._on_close

    def _on_close(self, code: int | None, reason: str | None) -> None:
        if not self._stopping:
            self._ctx.closed(f"closed {code} {reason or ''}".rstrip())

    def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            result = ToolResult(call.id, call.name, weather(_city(call.args)))
            task = asyncio.get_running_loop().create_task(self._answer(result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, result: ToolResult) -> None:
        # A tool takes a moment, as a real lookup would.
        await asyncio.sleep(0.2)
        self._transport.send_tool_result(result)

    async def start(self) -> None:
        await self._transport.connect()

    def push_audio(self, pcm: bytes) -> None:
        self._transport.send_audio(pcm)

    async def stop(self) -> None:
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._transport.disconnect()
        await self._player.aclose()
