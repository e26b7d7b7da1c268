"""Helpers for the rotation tests: fast emulator and helper settings, a callback recorder,
ledger shortcuts, and a bare endpoint that accepts resumes but never answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from google.genai import types
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from realtime_resumption.emulator import Emulator, EmulatorConfig
from realtime_resumption.emulator.certs import TlsMaterial
from realtime_resumption.emulator.ledger import SessionRecord
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.moves import MoveReport
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.transport import GenerationEndReason

MODEL = "gemini-live-2.5-flash-preview"
GRACE = 0.05
"""A short tool-call grace window, so generations end quickly after turnComplete."""
TIME_SCALE = 0.05
"""Emulator durations at 1/20: a 40 ms answer chunk is paced every 2 ms."""

FAST = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1), attempt_timeout=2.0)
"""Retries a few milliseconds apart, so a test that spends them all stays fast."""

CALLBACKS = (
    "on_audio_output",
    "on_tool_call",
    "on_tool_call_cancel",
    "on_turn_complete",
    "on_interrupted",
    "on_input_transcription",
    "on_output_transcription",
    "on_session_ready",
    "on_error",
    "on_close",
    "on_generation_start",
    "on_generation_end",
    "on_go_away",
    "on_resumption_update",
    "on_connection_lifecycle",
    "on_move",
    "on_move_started",
)


class Recorder:
    """Every callback a transport makes, in order, as ``(name, args)``."""

    def __init__(self, transport: GeminiLiveTransport) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []
        self._changed = asyncio.Event()
        for name in CALLBACKS:
            setattr(transport, name, self._recorder(name))

    def _recorder(self, name: str) -> Callable[..., None]:
        def record(*args: Any) -> None:
            self.events.append((name, args))
            self._changed.set()

        return record

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of ``name``."""
        return [args for n, args in self.events if n == name]

    def count(self, name: str) -> int:
        return len(self.of(name))

    def names(self, *wanted: str) -> list[str]:
        """The names of the calls, in order, restricted to ``wanted`` when given."""
        return [n for n, _ in self.events if not wanted or n in wanted]

    @property
    def moves(self) -> list[MoveReport]:
        return [args[0] for args in self.of("on_move")]

    def ends(self) -> list[GenerationEndReason]:
        return [args[1] for args in self.of("on_generation_end")]

    def lifecycle(self, kind: str) -> list[Any]:
        return [e for (e,) in self.of("on_connection_lifecycle") if e.kind == kind]

    async def wait(self, predicate: Callable[[Recorder], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate(self)`` holds."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

    async def wait_for(self, name: str, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``name`` was called ``count`` times."""
        await self.wait(lambda r: r.count(name) >= count, timeout)

    def assert_paired(self) -> None:
        """Every generation start has exactly one end, in order, and none is left open."""
        open_id: str | None = None
        for name, args in self.events:
            if name == "on_generation_start":
                assert open_id is None, f"{args[0]} started while {open_id} was open"
                open_id = args[0]
            elif name == "on_generation_end":
                assert args[0] == open_id, f"{args[0]} ended, {open_id} was open"
                open_id = None
        assert open_id is None, f"{open_id} was left open"


def emulator_config(profile: str = "gemini", **changes: Any) -> EmulatorConfig:
    changes.setdefault("time_scale", TIME_SCALE)
    return EmulatorConfig(profile=profile, **changes)  # type: ignore[arg-type]


def make_transport(emu: Emulator, **options: Any) -> GeminiLiveTransport:
    """A transport on a client of ``emu`` in its profile, with fast retries."""
    options.setdefault("model", MODEL)
    options.setdefault("tool_call_grace", GRACE)
    options.setdefault("resumption", FAST)
    return GeminiLiveTransport(client=emu.client(vertex=emu.config.profile == "vertex"), **options)


def only_session(emu: Emulator) -> SessionRecord:
    (session,) = emu.ledger.sessions.values()
    return session


def seconds(n: float) -> float:
    """``n`` emulator seconds on the wall clock."""
    return n * TIME_SCALE


class DeadEndpoint:
    """A Gemini Live endpoint over TLS that answers every setup and issues one resumption
    handle per connection, yet never answers a user turn: a session resumed here is dead."""

    def __init__(self, *, issue_handles: bool = True) -> None:
        self.issue_handles = issue_handles
        """False: after the first connection's handle, the endpoint sends nothing at all."""
        self.setups: list[dict[str, Any]] = []
        self.received: list[list[dict[str, Any]]] = []
        self._tls = TlsMaterial("127.0.0.1")
        self._server: Server | None = None
        self._connections: set[ServerConnection] = set()

    async def __aenter__(self) -> DeadEndpoint:
        self._server = await serve(
            self._handle, "127.0.0.1", 0, ssl=self._tls.server_context(), close_timeout=0.5
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        self._tls.remove()

    def http_options(self) -> types.HttpOptions:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return types.HttpOptions(
            base_url=f"https://127.0.0.1:{port}",
            async_client_args={"ssl": self._tls.client_context()},
        )

    async def go_away(self) -> None:
        """A goAway with ten seconds left, to every open connection."""
        for ws in list(self._connections):
            await ws.send(json.dumps({"goAway": {"timeLeft": "10s"}}))

    async def _handle(self, ws: ServerConnection) -> None:
        index = len(self.setups)
        self.setups.append(json.loads(await ws.recv()))
        messages: list[dict[str, Any]] = []
        self.received.append(messages)
        await ws.send(json.dumps({"setupComplete": {"sessionId": f"dead-{index}"}}))
        if self.issue_handles or index == 0:
            handle = f"dead-endpoint-handle-{index:04d}-0123456789"
            update = {"newHandle": handle, "resumable": True}
            await ws.send(json.dumps({"sessionResumptionUpdate": update}))
        self._connections.add(ws)
        try:
            async for raw in ws:
                messages.append(json.loads(raw))
        except ConnectionClosed:
            pass
        finally:
            self._connections.discard(ws)
