"""A recorder of the transport's callbacks, and a transport dialled to the bundled emulator
through the ``openai`` SDK (real WebSockets over TLS)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from realtime_resumption.openai import (
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.transport import GenerationEndReason, ToolCall
from tests.openai_emulator.oai_helpers import TIMEOUT


class Recorder:
    """Every callback the transport made, in order, and waits on them (bounded)."""

    def __init__(self, transport: OpenAIRealtimeTransport) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.audio = bytearray()
        self._changed = asyncio.Event()
        for name in dir(transport):
            if name.startswith("on_"):
                setattr(transport, name, self._recorder(name))

    def _recorder(self, name: str) -> Callable[..., None]:
        def record(*args: Any) -> None:
            if name == "on_audio_output":
                self.audio += args[0]
            self.calls.append((name, args))
            self._changed.set()

        return record

    def named(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of ``name``."""
        return [args for n, args in self.calls if n == name]

    @property
    def ends(self) -> list[tuple[str, GenerationEndReason]]:
        """Every generation end, in order."""
        return [(a[0], a[1]) for a in self.named("on_generation_end")]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for args in self.named("on_tool_call") for call in args[0]]

    @property
    def transcript(self) -> str:
        return "".join(a[0] for a in self.named("on_output_transcription"))

    async def until(self, done: Callable[[Recorder], bool], timeout: float = TIMEOUT) -> None:
        """Wait until ``done`` holds (bounded by ``timeout``)."""
        async with asyncio.timeout(timeout):
            while not done(self):
                self._changed.clear()
                await self._changed.wait()

    async def ended(self, count: int, timeout: float = TIMEOUT) -> None:
        """Wait for ``count`` generation ends in all."""
        await self.until(lambda r: len(r.ends) >= count, timeout)


def transport(
    emu: OpenAIEmulator,
    config: SessionConfig | None = None,
    client: Any = None,
    **options: Any,
) -> OpenAIRealtimeTransport:
    """A transport for ``emu`` (the SDK's client for it, its TLS options)."""
    options.setdefault("websocket_options", emu.websocket_options())
    return OpenAIRealtimeTransport(
        client or emu.client(), config or SessionConfig(), OpenAIRealtimeOptions(**options)
    )
