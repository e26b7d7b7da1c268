"""The stacks the demo compares, each behind the same small interface.

Each stack is built the way its own examples build it; only the google-genai
``http_options`` (or, on the OpenAI call, the base URL and the TLS trust) point at the call's
emulator. A stack takes the caller's microphone chunks
(``push_audio``), plays its answer audio in real time into the caller's ``Ear``, runs the
``get_weather`` tool itself, and notes every error it surfaces to the application.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from google.genai import types

from .call import CallRecord, Ear


class Stack(Protocol):
    """One voice stack under test, on one emulator."""

    async def start(self) -> None:
        """Build and start the stack; it connects on its own."""

    def push_audio(self, pcm: bytes) -> None:
        """One 20 ms microphone chunk (PCM16 mono: 16 kHz on the Gemini call, 24 kHz on the
        OpenAI one)."""

    async def stop(self) -> None:
        """End the call and release everything."""


@dataclass(frozen=True)
class OpenAIEndpoint:
    """Where an OpenAI stack finds its emulator."""

    base_url: str
    """``https://…/v1``: the ``openai`` SDK's and LiveKit's ``base_url``."""
    realtime_url: str
    """``wss://…/v1/realtime``: Pipecat's ``base_url``."""
    ssl: ssl.SSLContext
    """Trusts the emulator's CA (stock Pipecat, which takes no TLS option, trusts it through
    ``SSL_CERT_FILE``: see ``openai_call.trust_emulators``)."""


@dataclass(frozen=True)
class StackContext:
    """What a stack is given: the SDK options that reach its emulator (``http_options`` on
    the Gemini call, ``openai`` on the OpenAI one), the caller's ear and the call's record."""

    http_options: types.HttpOptions | None
    ear: Ear
    record: CallRecord
    clock: Callable[[], float]
    mark: Callable[[str, str], None]
    openai: OpenAIEndpoint | None = None

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
    framework: str
    """``pipecat`` or ``livekit``: ours is compared with the stock lane of its framework."""
    factory: StackFactory


WEATHER_DECLARATION = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}
    ),
)
