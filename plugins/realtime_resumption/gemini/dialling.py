"""Opening connections: the client or credential for each dial, the setup, dial generations.

:class:`Dialler` belongs to one transport. Every dial runs in a task of its own, so a
disconnect can abandon it wherever it is, and is fenced by a *dial generation*: a dial that
completes after the generation moved on (an abort, a disconnect, a newer dial) is closed unused.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from google import genai
from loguru import logger

from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.live_options import (
    Auth,
    Credential,
    CredentialProvider,
    LiveOptions,
)
from realtime_resumption.gemini.preopen import SetupGate
from realtime_resumption.redaction import redact
from realtime_resumption.transport import (
    AttemptClose,
    ConnectAttempt,
    ConnectError,
    ConnectFailure,
    DialAbandonedError,
    SetupFailed,
    SetupOk,
)

if TYPE_CHECKING:
    from realtime_resumption.gemini.state import TransportState
    from realtime_resumption.handles import HandleRef


class Dialler:
    """Opens the transport's connections; see the module documentation."""

    def __init__(
        self,
        session: TransportState,
        *,
        hooks: ConnectionHooks,
        auth: Auth,
        client: genai.Client | None,
        credential_provider: CredentialProvider | None,
        setup_timeout: float,
        transparent: bool,
    ) -> None:
        self._s = session
        self._hooks = hooks
        self._auth = auth
        self._credential_provider = credential_provider
        self._injected_client = client
        self._client = client
        if client is None and credential_provider is None:
            # Made now so missing keys or projects fail at construction, not at the first dial.
            self._client = auth.client(session.options.model)
        self._setup_timeout = setup_timeout
        self._transparent = transparent
        self._dials: set[asyncio.Task[LiveConnection]] = set()
        self.gen = 0
        """Advances per dial, when the current dial fails, and on an abort."""
        self.transport_generation = 0
        """Advances only when a connection completes its setup."""
        self.dialled_with: dict[LiveConnection, LiveOptions] = {}
        """The setup each connection not yet installed was dialled with."""
        self.expires_at: dict[LiveConnection, float] = {}
        """When the credential of each connection not yet installed expires (epoch seconds)."""

    def advance(self) -> None:
        """Move the dial generation on: a dial in flight can no longer be installed."""
        self.gen += 1

    def take(self, conn: LiveConnection) -> tuple[LiveOptions, float | None]:
        """The setup ``conn`` was dialled with and when its credential expires, as it is
        installed (forgotten here)."""
        return self.dialled_with.pop(conn, self._s.options), self.expires_at.pop(conn, None)

    def forget(self, conn: LiveConnection) -> None:
        """``conn`` closed or was given up before it was installed."""
        self.dialled_with.pop(conn, None)
        self.expires_at.pop(conn, None)

    async def abandon(self, timeout: float) -> None:
        """Abandon every dial in flight and let them unwind (each closes its socket)."""
        dials = set(self._dials)
        if not dials:
            return
        self.gen += 1
        for dial in dials:
            dial.cancel()
        await asyncio.wait(dials, timeout=timeout)

    async def close_client(self, timeout: float) -> None:
        """Close the client the transport made for itself (not one it was given), within
        ``timeout`` seconds; never raises (but the caller's own cancellation)."""
        if self._client is None or self._injected_client is not None:
            return
        client, self._client = self._client, None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout):
                await client.aio.aclose()
        with contextlib.suppress(Exception):
            client.close()

    async def dial(self, handle: HandleRef | None, gate: SetupGate | None = None) -> LiveConnection:
        """Open a connection resuming from ``handle`` (None: a fresh session) and return it set up but not installed: it
        delivers nothing until the transport installs it. The incumbent is untouched. With
        ``gate``, the setup is sent only once the gate is released (the socket opens first).

        Raises ``ConnectError`` when the dial fails and ``DialAbandonedError`` when the dial
        generation moved on before it completed.
        """
        self.gen += 1
        gen = self.gen
        caller = asyncio.current_task()
        opening = asyncio.create_task(
            self._open(gen, handle, gate), name=f"gemini-live-dial-att_{gen}"
        )
        self._dials.add(opening)
        try:
            conn = await opening
        except asyncio.CancelledError:
            if caller is not None and caller.cancelling():
                raise
            raise DialAbandonedError(f"att_{gen} was abandoned while dialling") from None
        finally:
            self._dials.discard(opening)
        if gen != self.gen:
            self.forget(conn)
            await conn.close()
            raise DialAbandonedError(f"{conn.attempt_id} completed after the transport moved on")
        self.transport_generation += 1
        conn.transport_generation = self.transport_generation
        self._s.lifecycle(SetupOk(conn.attempt_id, self.transport_generation, conn.session_id))
        return conn

    async def _open(
        self, gen: int, handle: HandleRef | None, gate: SetupGate | None
    ) -> LiveConnection:
        s = self._s
        # The one place the text leaves the book for the wire.
        text = s.handles.text(handle) if handle is not None else None
        if gate is not None:
            gate.enter()
        try:
            client, owns_client, credential = await self._client_for_dial()
        except Exception as error:
            failure = ConnectFailure(
                "error", f"the credential provider failed ({type(error).__name__})"
            )
            if gen == self.gen:
                self.gen += 1
            raise ConnectError(failure) from error
        options = s.options
        conn = LiveConnection(
            client=client,
            model=options.model,
            config=options.live_connect_config(handle=text, transparent=self._transparent),
            dial_gen=gen,
            handle_supplied=handle is not None,
            hooks=self._hooks,
            owns_client=owns_client,
        )
        if gen == self.gen:
            s.lifecycle(ConnectAttempt(conn.attempt_id, handle is not None))
        logger.debug("{}: dialling {} (handle {})", s.callbacks, conn.attempt_id, redact(text))
        try:
            await conn.open(self._setup_timeout)
        except ConnectError as error:
            if gen == self.gen:
                self.gen += 1
                failure = error.failure
                if failure.kind == "closed":
                    s.lifecycle(
                        AttemptClose(conn.attempt_id, failure.code, s.clean(failure.provider_text))
                    )
                s.lifecycle(SetupFailed(conn.attempt_id, failure))
            logger.warning("{}: {} failed: {}", s.callbacks, conn.attempt_id, error)
            raise
        self.dialled_with[conn] = options
        if credential is not None and credential.expires_at is not None:
            self.expires_at[conn] = credential.expires_at
        return conn

    async def _client_for_dial(self) -> tuple[genai.Client, bool, Credential | None]:
        if self._credential_provider is None:
            if self._client is None:
                self._client = self._auth.client(self._s.options.model)
            return self._client, False, None
        async with asyncio.timeout(self._setup_timeout):
            credential = await self._credential_provider()
        self._s.secrets.add(credential.token)
        return self._auth.client(self._s.options.model, credential), True, credential
