"""The emulator: a TLS WebSocket server on 127.0.0.1 that speaks the Gemini Live protocol."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from functools import partial
from urllib.parse import parse_qs

from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from .config import EmulatorConfig
from .faults import Faults
from .hub import Api, Hub
from .ledger import AttemptRecord, Ledger
from .listener import ListeningEmulator
from .served_connection import Connection
from .sessions import SessionRegistry

_GEMINI_PATH = re.compile(
    r"/+ws/google\.ai\.generativelanguage\.[A-Za-z0-9]+"
    r"\.GenerativeService\.BidiGenerateContent(?:Constrained)?"
)
_VERTEX_PATH = re.compile(
    r"/+ws/google\.cloud\.aiplatform\.[A-Za-z0-9]+\.LlmBidiService/BidiGenerateContent"
)
_REFUSAL_BODIES = {
    401: "Request is missing required authentication.\n",
    403: "The caller does not have permission.\n",
    429: "Resource has been exhausted (e.g. check quota).\n",
    503: "The service is currently unavailable.\n",
}

VERTEX_PROJECT = "emulator-project"
VERTEX_LOCATION = "us-central1"


def _split(target: str) -> tuple[str, str]:
    # Not urlsplit: it would read "//ws/..." as a host name.
    path, _, query = target.partition("?")
    return path, query


def route(path: str) -> Api | None:
    """Which API a request path belongs to; None for any other path."""
    bare, _ = _split(path)
    if _GEMINI_PATH.fullmatch(bare):
        return "gemini"
    if _VERTEX_PATH.fullmatch(bare):
        return "vertex"
    return None


def _authorised(request: Request) -> bool:
    headers = request.headers
    if headers.get("x-goog-api-key", "").strip() or headers.get("authorization", "").strip():
        return True
    query = parse_qs(_split(request.path)[1])
    return bool(query.get("key") or query.get("access_token"))


class Emulator(ListeningEmulator[Connection]):
    """A local Gemini Live service for tests, demos and offline development.

    Use ``async with Emulator(config) as emu:`` (or ``start()``/``stop()``), then point the
    google-genai SDK at it with ``emu.client()`` or ``emu.http_options()``.
    """

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config if config is not None else EmulatorConfig()
        super().__init__(self.config.host, self.config.port)
        self.ledger = Ledger()
        """Everything that happened (see ``realtime_resumption.testing.emulator.ledger``)."""
        self._rng = random.Random(self.config.seed)
        self._sessions = SessionRegistry(self.ledger, self._rng)
        self.faults = Faults(self.config, lambda: list(self._live), self._sessions.expire_all)
        """Scripted faults (see ``realtime_resumption.testing.emulator.faults``)."""
        self._hub: Hub[Connection] | None = None

    async def start(self) -> None:
        """Make the certificates and start listening."""
        if self._listener.listening:
            raise RuntimeError("the emulator is already running")
        config = self.config
        self._hub = Hub(
            config=config,
            ledger=self.ledger,
            faults=self.faults,
            sessions=self._sessions,
            rng=self._rng,
            setup_rng=random.Random(f"setup-latency-{config.seed}"),
            started_at=asyncio.get_running_loop().time(),
            live=self._live,
        )
        await self._listener.start(
            self._handle,
            self._process_request,
            one_way=config.one_way,
            pong_delay=self._pong_delay(),
        )
        logger.debug("emulator: listening on {} ({} profile)", self.base_url, config.profile)

    def _pong_delay(self) -> Callable[[], float] | None:
        """Draws each pong's delay (scaled, seeded); None for prompt pongs."""
        latency = self.config.pong_latency
        if latency == 0 or latency == (0.0, 0.0):
            return None
        return partial(self.config.draw, latency, random.Random(f"pong-latency-{self.config.seed}"))

    # --- what clients need ------------------------------------------------------------------

    @property
    def started_at(self) -> float:
        """The event loop's time when the emulator started: ledger times count from it."""
        if self._hub is None:
            raise RuntimeError("the emulator has not started")
        return self._hub.started_at

    @property
    def base_url(self) -> str:
        """``https://127.0.0.1:<port>``: the SDK's ``HttpOptions.base_url``."""
        return f"https://{self.config.host}:{self.port}"

    def http_options(self) -> types.HttpOptions:
        """SDK HTTP options pointing at the emulator and trusting its CA."""
        return types.HttpOptions(
            base_url=self.base_url, async_client_args={"ssl": self.client_ssl_context()}
        )

    def client(self, vertex: bool = False) -> genai.Client:
        """A google-genai client pointed at the emulator.

        Gemini-API mode uses a fake API key; Vertex mode uses fixed OAuth credentials (a token
        that never needs refreshing), project ``emulator-project`` and location ``us-central1``,
        so it never touches the network or Application Default Credentials.
        """
        if vertex:
            return genai.Client(
                vertexai=True,
                credentials=Credentials(token="emulator-token"),  # type: ignore[no-untyped-call]
                project=VERTEX_PROJECT,
                location=VERTEX_LOCATION,
                http_options=self.http_options(),
            )
        return genai.Client(api_key="emulator-key", http_options=self.http_options())

    # --- serving ----------------------------------------------------------------------------

    def _attempt(self, path: str, outcome: str) -> None:
        assert self._hub is not None
        # The query may hold a key: only the path is recorded.
        bare, _ = _split(path)
        self.ledger.attempts.append(AttemptRecord(self._hub.now(), bare, outcome))

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if route(request.path) is None:
            self._attempt(request.path, "http404")
            return connection.respond(404, "Not Found\n")
        if not _authorised(request):
            self._attempt(request.path, "http401")
            return connection.respond(401, _REFUSAL_BODIES[401])
        status = self.faults.take_upgrade_refusal()
        if status is not None:
            self._attempt(request.path, f"http{status}")
            return connection.respond(status, _REFUSAL_BODIES[status])
        self._attempt(request.path, "accepted")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        assert self._hub is not None
        path = ws.request.path if ws.request is not None else ""
        api = route(path) or "gemini"
        await Connection(ws, self._hub, api, _split(path)[0]).run()
