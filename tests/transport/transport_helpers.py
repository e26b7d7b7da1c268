"""Helpers for the transport tests: a callback recorder, fast emulator settings, and a bare
scripted endpoint for server frames the emulator never sends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from google import genai
from google.genai import types
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.messages import context_updates_supported
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.testing.emulator import KIND_SERVICE, Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.certs import TlsMaterial
from realtime_resumption.testing.emulator.ledger import ConnectionRecord, SessionRecord
from realtime_resumption.transport import ContentTurn, GenerationEndReason

MODEL = "gemini-live-2.5-flash-preview"
GRACE = 0.05
"""A short tool-call grace window, so generations end quickly after turnComplete."""
TIME_SCALE = 0.05
"""Emulator durations at 1/20: a 40 ms answer chunk is paced every 2 ms."""

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
    "on_model_turn_start",
    "on_generation_start",
    "on_generation_end",
    "on_first_audio_chunk",
    "on_text_output",
    "on_text_done",
    "on_speech_started",
    "on_user_speech_stopped",
    "on_go_away",
    "on_resumption_update",
    "on_credential_expiry",
    "on_grounding_metadata",
    "on_realtime_llm_usage",
    "on_usage_metadata",
    "on_connection_lifecycle",
    "on_move",
    "on_move_started",
    "on_reasoning_start",
    "on_reasoning_done",
    "on_reasoning_summary",
    "on_cache_bust",
    "on_provider_evidence",
)


class Recorder:
    """Every callback a transport makes, in order, as ``(name, args)``."""

    def __init__(self, transport: GeminiLiveTransport) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []
        self._changed = asyncio.Event()
        for name in CALLBACKS:
            assert getattr(transport, name) is None, f"{name} must default to None"
            setattr(transport, name, self._recorder(name))

    def _recorder(self, name: str) -> Callable[..., None]:
        def record(*args: Any) -> None:
            self.events.append((name, args))
            self._changed.set()

        return record

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of ``name``."""
        return [args for n, args in self.events if n == name]

    def names(self, *wanted: str) -> list[str]:
        """The names of the calls, in order, restricted to ``wanted`` when given."""
        return [n for n, _ in self.events if not wanted or n in wanted]

    def count(self, name: str) -> int:
        return len(self.of(name))

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
    """A fast emulator on the service as measured (the emulator's defaults: a resume refused
    while the old connection is open, no handle until the first answer, late pongs, the 6 ms
    network round trip), durations at 1/20. A test that needs a kinder service says so in its
    name and uses ``kind_emulator_config``."""
    changes.setdefault("time_scale", TIME_SCALE)
    return EmulatorConfig(profile=profile, **changes)  # type: ignore[arg-type]


def kind_emulator_config(profile: str = "gemini", **changes: Any) -> EmulatorConfig:
    """A fast emulator on a kind service: a handle after every setup, make-before-break
    accepted, prompt pongs, no cap. For the moves only a kind service allows (make-before-break
    with no gap): each test on it says so in its name (``..._on_a_kind_service``) and has a
    sibling on ``emulator_config``, the service as measured."""
    changes.setdefault("update_after_setup", True)
    for name, kind in KIND_SERVICE.items():
        changes.setdefault(name, kind)
    return emulator_config(profile, **changes)


async def answered_with_handle(
    transport: GeminiLiveTransport, rec: Recorder, text: str = "hello there"
) -> None:
    """One answered turn, then the resumable handle that follows it: the service as measured
    issues a connection's first handle after its first answer, never right after the setup."""
    start = len(rec.events)
    transport.send_content([ContentTurn("user", text)])
    await rec.wait(handle_after_the_answer(start))


async def connected_and_answered(transport: GeminiLiveTransport) -> Recorder:
    """Connect ``transport`` and wait past its first answer and the session's first handle.
    Returns its recorder (attached before the connect)."""
    rec = Recorder(transport)
    await transport.connect()
    await answered_with_handle(transport, rec)
    return rec


def handle_after_the_answer(start: int) -> Callable[[Recorder], bool]:
    """Whether, among the events from ``start`` on, a turn completed and a resumable handle
    followed it (an update without a handle, as mid-answer ones are, does not count)."""

    def happened(r: Recorder) -> bool:
        names = [name for name, _ in r.events[start:]]
        if "on_turn_complete" not in names:
            return False
        after = start + names.index("on_turn_complete")
        return any(
            name == "on_resumption_update" and args[0] and args[1]
            for name, args in r.events[after:]
        )

    return happened


def established(session: SessionRecord) -> list[ConnectionRecord]:
    """The connections of ``session`` the emulator set up: on the service as measured a move
    that first dials while the old connection is open is refused, and that dial is in the
    ledger too."""
    return [c for c in session.connections if c.established]


def only_session(emu: Emulator) -> SessionRecord:
    """The one session ``emu`` served (fails if it served none or several)."""
    (session,) = emu.ledger.sessions.values()
    return session


def quiet_hooks(**given: Any) -> ConnectionHooks:
    """A connection's hooks that do nothing, but for those ``given`` (by name)."""
    hooks: dict[str, Any] = {
        "message": lambda conn, message: None,
        "receive_error": lambda conn, error: None,
        "written": lambda conn, message: None,
        "write_failed": lambda conn, messages, error: None,
        "closed": lambda conn, code, reason: None,
    }
    return ConnectionHooks(**(hooks | given))


def unopened_connection() -> LiveConnection:
    """A ``LiveConnection`` never opened (no network), with quiet hooks."""
    return LiveConnection(
        client=genai.Client(api_key="test-key"),
        model=MODEL,
        config=types.LiveConnectConfig(),
        dial_gen=1,
        handle_supplied=False,
        hooks=quiet_hooks(),
        owns_client=False,
    )


async def started_connection(
    emu: Emulator, hooks: ConnectionHooks, config: types.LiveConnectConfig | None = None
) -> LiveConnection:
    """A ``LiveConnection`` to ``emu`` (its own client), opened and receiving."""
    conn = LiveConnection(
        client=emu.client(),
        model=MODEL,
        config=config or types.LiveConnectConfig(),
        dial_gen=1,
        handle_supplied=False,
        hooks=hooks,
        owns_client=True,
    )
    await conn.open(5)
    conn.start()
    return conn


async def measured_round_trip(conn: LiveConnection) -> float:
    """The round trip ``conn`` reads from the kernel, once it has one (within 5 s)."""
    async with asyncio.timeout(5):
        while (measured := conn.round_trip) is None:  # noqa: ASYNC110 - no event for it
            await asyncio.sleep(0.005)
    return measured


def make_transport(emu: Emulator, **options: Any) -> GeminiLiveTransport:
    """A transport on a client of ``emu`` in the emulator's profile."""
    options.setdefault("model", MODEL)
    options.setdefault("tool_call_grace", GRACE)
    return GeminiLiveTransport(client=emu.client(vertex=emu.config.profile == "vertex"), **options)


class ScriptedServer:
    """A bare Gemini Live endpoint over TLS: it answers the setup, then sends exactly the
    frames a test gives it and records what the client sends."""

    def __init__(self, *, reading: bool = True) -> None:
        self.reading = reading
        """False: after the setup the server never reads again (a stalled peer)."""
        self.setups: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self._ws: ServerConnection | None = None
        self._connected = asyncio.Event()
        self._tls = TlsMaterial("127.0.0.1")
        self._server: Server | None = None

    async def start(self) -> None:
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            ssl=self._tls.server_context(),
            compression=None,
            # A peer that stopped reading never completes a closing handshake.
            close_timeout=0.5,
        )

    async def stop(self) -> None:
        if self._server is not None:
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

    async def _handle(self, ws: ServerConnection) -> None:
        self.setups.append(json.loads(await ws.recv()))
        await ws.send(json.dumps({"setupComplete": {"sessionId": "scripted"}}))
        self._ws = ws
        self._connected.set()
        if not self.reading:
            await ws.wait_closed()
            return
        try:
            async for raw in ws:
                self.received.append(json.loads(raw))
        except ConnectionClosed:
            pass

    async def send(self, *frames: dict[str, Any]) -> None:
        """Send ``frames`` to the connected client, in order."""
        async with asyncio.timeout(5):
            await self._connected.wait()
        assert self._ws is not None
        for frame in frames:
            await self._ws.send(json.dumps(frame))

    async def send_raw(self, raw: str) -> None:
        """Send one text frame as it is."""
        async with asyncio.timeout(5):
            await self._connected.wait()
        assert self._ws is not None
        await self._ws.send(raw)

    async def close(self, code: int, reason: str) -> None:
        """Close the client's connection with ``code`` and ``reason``."""
        assert self._ws is not None
        await self._ws.close(code, reason)


MODEL_38 = "gemini-3.8-live"


def live38_config(profile: str = "gemini", **changes: Any) -> EmulatorConfig:
    """``emulator_config`` on the gemini-3.8-live profile (non-blocking function calls,
    content with roles mid-session, setup changes in the session on Vertex AI), with
    ``changes``; a test of a setup change on the Gemini API says ``in_session_updates``."""
    changes.setdefault("time_scale", TIME_SCALE)
    return EmulatorConfig.model(MODEL_38, profile=profile, **changes)


sends_context_updates = pytest.mark.skipif(
    not context_updates_supported(),
    reason="this google-genai (2.30) has no send_context_update: every setup change moves "
    "the session, as test_without_send_context_update_in_the_sdk_the_update_moves_the_session "
    "checks",
)
"""For a test that sends a setup change in the session (``contextUpdate``), through the
transport or the SDK itself: only a google-genai that can send one (2.34 and 3.x) does it. On
2.30 the transport's fallback is tested instead, and the emulator's handling of the message runs
on the matrix's other cells."""
