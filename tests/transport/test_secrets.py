"""No API key or resumption handle whole in any log record, at any level, with loguru's
``diagnose`` and ``backtrace`` on (tracebacks print their frames' variables), across moves of
every kind and with every callback raising; nor in websockets' DEBUG header lines."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.oauth2.credentials import Credentials
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.redaction import redact, secret
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.transport import ConnectError, ContentTurn, ReconnectState

from .transport_helpers import CALLBACKS, GRACE, MODEL

FAST = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1), attempt_timeout=2.0)
WAIT = 8.0


class Capture:
    """Every loguru record (message and formatted exception, with variables) and every stdlib
    record, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._sink: int | None = None
        self._handler = logging.Handler(level=logging.DEBUG)
        self._handler.emit = self._emit_stdlib  # type: ignore[method-assign]
        self._handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
        self._levels: dict[str, int] = {}

    def _emit_stdlib(self, record: logging.LogRecord) -> None:
        self.texts.append(self._handler.format(record))

    def __enter__(self) -> Capture:
        self._sink = logger.add(
            lambda message: self.texts.append(str(message)),
            level=0,
            format="{level} {name}:{function} {message}",
            diagnose=True,
            backtrace=True,
            colorize=False,
            catch=False,
        )
        root = logging.getLogger()
        root.addHandler(self._handler)
        for name in ("", "websockets", "websockets.client", "google_genai"):
            self._levels[name] = logging.getLogger(name).level
            logging.getLogger(name).setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._sink is not None
        logger.remove(self._sink)
        logging.getLogger().removeHandler(self._handler)
        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)

    def leaks(self, secret_values: set[str]) -> list[tuple[str, str]]:
        found = []
        for text in self.texts:
            for value in secret_values:
                at = text.find(value) if value else -1
                if at >= 0:
                    found.append((redact(value), text[:80] + " ... " + text[max(0, at - 200) : at]))
        return found


class Raising:
    """Every callback records its arguments, then raises (the transport must go on)."""

    def __init__(self, transport: GeminiLiveTransport) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        for name in CALLBACKS:
            setattr(transport, name, self._callback(name))

    def _callback(self, name: str) -> Callable[..., None]:
        def callback(*args: Any) -> None:
            self.calls.append((name, args))
            raise RuntimeError(f"{name} failed on purpose")

        return callback

    def handles(self) -> set[str]:
        return {
            str(args[0]) for name, args in self.calls if name == "on_resumption_update" and args[0]
        }

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)

    async def wait(self, name: str, count: int = 1) -> None:
        await self._until(lambda: self.count(name) >= count)

    async def wait_handles(self, count: int) -> None:
        """Wait until ``count`` distinct handles arrived."""
        await self._until(lambda: len(self.handles()) >= count)

    @staticmethod
    async def _until(condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not condition():  # noqa: ASYNC110 - callbacks carry no event
                await asyncio.sleep(0.005)


def _transport(emu: Emulator, secret: str) -> GeminiLiveTransport:
    common: dict[str, Any] = {
        "model": MODEL,
        "tool_call_grace": GRACE,
        "resumption": FAST,
        "http_options": emu.http_options(),
    }
    if emu.config.profile == "vertex":
        return GeminiLiveTransport(
            vertexai=True,
            project="emulator-project",
            location="us-central1",
            credentials=Credentials(token=secret),  # type: ignore[no-untyped-call]
            **common,
        )
    return GeminiLiveTransport(api_key=secret, **common)


@pytest.fixture
def capture() -> Iterator[Capture]:
    with Capture() as cap:
        yield cap


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_no_secret_whole_in_any_record_across_moves(profile: str, capture: Capture) -> None:
    secret = f"AIza-{secrets.token_hex(16)}"
    # The service says nothing after setupComplete: each connection's first handle follows
    # its first answer, so a question on every connection passes its handles through the logs.
    config = EmulatorConfig(profile=profile, time_scale=0.05)
    async with Emulator(config) as emu:
        transport = _transport(emu, secret)
        calls = Raising(transport)
        await transport.connect()
        for seq in range(1, 4):
            transport.send_audio(user_audio(seq, speech=False))

        async def answered(turn: int, question: str) -> None:
            transport.send_live_text([ContentTurn("user", question)])
            await calls.wait("on_turn_complete", turn)
            await calls.wait_handles(turn)

        await answered(1, "hello there")
        emu.faults.go_away(time_left=2.0)  # planned: resumed
        await calls.wait("on_move", 1)
        await answered(2, "what is new")
        emu.faults.drop()  # lost: resumed from the new connection's handle
        await calls.wait("on_move", 2)
        await answered(3, "and then")
        emu.faults.expire_handles()
        emu.faults.drop()  # the handle is refused: rebuilt
        await calls.wait("on_move", 3)
        transport.send_live_text([ContentTurn("user", "are you still there")])
        await calls.wait("on_turn_complete", 4)
        outcomes = [args[0].outcome for name, args in calls.calls if name == "on_move"]
        await transport.disconnect()

        # A user who logs a failed connect with its traceback.
        other = _transport(emu, secret)
        emu.faults.refuse_next(1, "http503")
        try:
            await other.connect()
        except ConnectError:
            logger.exception("connect failed")
        await other.disconnect()
    assert outcomes == [MoveOutcome.RESUMED] * 2 + [MoveOutcome.REBUILT]
    handles = calls.handles()
    assert handles  # every one the session issued must stay out of the records
    raised = [t for t in capture.texts if "a callback raised" in t]
    assert raised and all("Traceback" in t for t in raised)
    assert any("connect failed" in t and "Traceback" in t for t in capture.texts)
    assert capture.leaks({secret} | handles) == []


async def test_websockets_debug_header_lines_never_show_the_key(capture: Capture) -> None:
    secret = f"AIza-{secrets.token_hex(16)}"
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        transport = _transport(emu, secret)
        await transport.connect()
        await transport.disconnect()
    headers = [t for t in capture.texts if t.startswith("websockets.client > ")]
    assert any("x-goog-api-key" in t.lower() for t in headers)
    assert capture.leaks({secret}) == []


def test_a_secret_is_its_value_everywhere_but_its_repr() -> None:
    value = "handle-" + secrets.token_hex(20)
    handle = secret(value)
    assert handle == value and f"{handle}" == value and hash(handle) == hash(value)
    assert value not in repr(handle) and value not in repr([handle, {"h": handle}])
    assert repr(handle) == f"Secret({redact(value)})"
    assert secret(handle) is handle


def test_a_handle_the_framework_passes_in_is_kept_secret_too() -> None:
    handle = "framework-handle-" + "x" * 40
    state = ReconnectState(resumption_handle=handle)
    assert state.resumption_handle == handle  # still the handle on the wire
    # Containers and traceback variables print the repr: never the handle whole.
    assert handle not in repr([state.resumption_handle])
    assert handle not in repr(state)
