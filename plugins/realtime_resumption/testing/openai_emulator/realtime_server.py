"""The emulator: a TLS WebSocket server on 127.0.0.1 that speaks OpenAI Realtime.

Where clients dial (read from the clients' sources): the ``openai`` SDK's GA
client dials ``<websocket_base_url>/realtime?model=`` with a Bearer key
(``openai/resources/realtime/realtime.py``), its beta client the same path with
``OpenAI-Beta: realtime=v1``; Pipecat dials its ``base_url`` (``.../v1/realtime``) plus
``?model=``; LiveKit ``<base_url>/realtime?model=`` (``/v1`` becomes ``/v1/realtime``) or, on
Azure, ``/openai/v1/realtime?model=`` (GA) or ``/openai/realtime?api-version=&deployment=``
(the legacy surface, beta names) with an ``api-key`` header. Any path ending in ``/realtime``
is served; the beta header or the legacy Azure path selects the beta spelling.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from ..emulator.listener import ListeningEmulator
from .conversation_ledger import Ledger
from .protocol import Flavour
from .realtime_session import ServedSession, Shared
from .scripted_faults import REFUSALS, Faults
from .service_config import OpenAIEmulatorConfig

if TYPE_CHECKING:
    import openai

DEFAULT_MODEL = "gpt-realtime"
EMULATOR_KEY = "sk-emulator-key"


def _split(target: str) -> tuple[str, dict[str, list[str]]]:
    path, _, query = target.partition("?")
    return path, parse_qs(query)


def _refusal(connection: ServerConnection, status: int) -> Response:
    type_, code, message = REFUSALS[status]
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})
    response = connection.respond(status, body + "\n")
    response.headers["Content-Type"] = "application/json"
    return response


def _key(request: Request) -> str:
    headers = request.headers
    bearer = headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return headers.get("api-key", "").strip()


def flavour_of(request: Request) -> Flavour:
    """``beta`` for the beta header (``OpenAI-Beta: realtime=v1``) or the legacy Azure path
    (``/openai/realtime?api-version=``); ``ga`` otherwise."""
    path, query = _split(request.path)
    if "realtime=v1" in request.headers.get("openai-beta", ""):
        return "beta"
    if path.rstrip("/").endswith("/openai/realtime") and "api-version" in query:
        return "beta"
    return "ga"


class OpenAIEmulator(ListeningEmulator[ServedSession]):
    """A local OpenAI Realtime service for tests, demos and offline development.

    ``async with OpenAIEmulator(config) as emu:`` then ``emu.client()`` (an ``openai``
    ``AsyncOpenAI`` pointed at it; pass ``emu.websocket_options()`` to ``realtime.connect``),
    or ``emu.realtime_url`` and ``emu.ca_file`` for a framework's own client.
    """

    def __init__(self, config: OpenAIEmulatorConfig | None = None) -> None:
        self.config = config if config is not None else OpenAIEmulatorConfig()
        super().__init__(self.config.host, self.config.port)
        self.ledger = Ledger()
        """Every session (see ``realtime_resumption.testing.openai_emulator.conversation_ledger``)."""
        self.faults = Faults(lambda: list(self._live))
        """Scripted faults (see ``realtime_resumption.testing.openai_emulator.scripted_faults``)."""
        self._shared: Shared | None = None

    async def start(self) -> None:
        """Make the certificates and start listening."""
        if self._listener.listening:
            raise RuntimeError("the emulator is already running")
        config = self.config
        self._shared = Shared(
            config=config,
            ledger=self.ledger,
            faults=self.faults,
            started_at=asyncio.get_running_loop().time(),
            rng=random.Random(config.seed),
            live=self._live,
        )
        await self._listener.start(self._handle, self._process_request, one_way=config.one_way)
        logger.debug("openai emulator: listening on {} ({})", self.base_url, config.profile)

    # --- what clients need ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``https://127.0.0.1:<port>/v1``: the SDK's (and LiveKit's) ``base_url``."""
        return f"https://{self.config.host}:{self.port}/v1"

    @property
    def websocket_base_url(self) -> str:
        """``wss://127.0.0.1:<port>/v1``: the SDK's ``websocket_base_url``."""
        return f"wss://{self.config.host}:{self.port}/v1"

    @property
    def realtime_url(self) -> str:
        """``wss://127.0.0.1:<port>/v1/realtime``: Pipecat's ``base_url``."""
        return f"{self.websocket_base_url}/realtime"

    def websocket_options(self) -> dict[str, object]:
        """``websocket_connection_options`` for ``client.realtime.connect``: trust the CA."""
        return {"ssl": self.client_ssl_context()}

    def client(self, api_key: str | None = None) -> openai.AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` pointed at the emulator (``base_url`` and
        ``websocket_base_url``), with the configured key (or a fixed fake one)."""
        import openai

        return openai.AsyncOpenAI(
            api_key=api_key or self.config.api_key or EMULATOR_KEY,
            base_url=self.base_url,
            websocket_base_url=self.websocket_base_url,
        )

    def azure_client(self, api_version: str = "2025-04-01-preview") -> openai.AsyncAzureOpenAI:
        """An ``openai.AsyncAzureOpenAI`` for the emulator as an Azure resource: it dials the
        legacy ``/openai/realtime?api-version=&deployment=`` surface with an ``api-key``
        header (``openai/lib/azure.py``), so its sessions speak the beta names."""
        import openai

        return openai.AsyncAzureOpenAI(
            api_key=self.config.api_key or EMULATOR_KEY,
            azure_endpoint=f"https://{self.config.host}:{self.port}",
            api_version=api_version,
        )

    # --- serving ----------------------------------------------------------------------------

    def _refuse(self, connection: ServerConnection, path: str, status: int) -> Response:
        assert self._shared is not None
        self.ledger.refused.append((self._shared.now(), path, status))
        return _refusal(connection, status)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path, _ = _split(request.path)
        if not path.rstrip("/").endswith("/realtime"):
            return connection.respond(404, "Not Found\n")
        key = _key(request)
        expected = self.config.api_key
        if not key or (expected is not None and key != expected):
            return self._refuse(connection, path, 401)
        status = self.faults.take_refusal()
        if status is not None:
            return self._refuse(connection, path, status)
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        assert self._shared is not None and ws.request is not None
        path, query = _split(ws.request.path)
        model = (query.get("model") or query.get("deployment") or [DEFAULT_MODEL])[0]
        session = ServedSession(ws, self._shared, path, flavour_of(ws.request), model)
        await session.run()
