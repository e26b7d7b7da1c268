"""``RealtimeDialler``: one dial of an OpenAI Realtime session, up to the service's confirmation
of its configuration.

A dial opens the SDK's connection (``realtime_connection.dial``), waits for
``session.created``, sends the configuration (``session.update``) and returns the session
once the service confirmed it (``session.updated``), or raises ``ConnectError`` (the socket
closed, never leaked). Each dial is reported through ``on_connection_lifecycle`` (an attempt,
then its setup's outcome). Whether a failed dial is tried again is the move machine's to say
(``realtime_moves``): a dial is one attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from realtime_resumption.openai.call_state import CallState, OpenSession
from realtime_resumption.openai.conversation_state import ConversationState, HeldItem
from realtime_resumption.openai.realtime_connection import RealtimeConnection, dial
from realtime_resumption.openai.realtime_server_events import (
    ServerError,
    ServerEvent,
    SessionEvent,
)
from realtime_resumption.transport import (
    ConnectAttempt,
    ConnectError,
    ConnectFailure,
    SetupFailed,
    SetupOk,
)

EventHook = Callable[[RealtimeConnection, ServerEvent], None]
"""What a connection calls with each server event it reads."""
CloseHook = Callable[[RealtimeConnection, int | None, str | None], None]
"""What a connection calls when it ends (its close code and reason)."""


class RealtimeDialler:
    """Dials the call's sessions (see the module documentation): ``client`` the SDK's client,
    ``on_event`` and ``on_closed`` what each connection it opens reports to."""

    def __init__(
        self, state: CallState, client: Any, *, on_event: EventHook, on_closed: CloseHook
    ) -> None:
        self._s = state
        self._client = client
        self._on_event = on_event
        self._on_closed = on_closed
        self._dial_gen = 0
        self._transport_generation = 0
        self._pending: OpenSession | None = None

    @property
    def dial_gen(self) -> int:
        """Advances per dial."""
        return self._dial_gen

    @property
    def transport_generation(self) -> int:
        """Advances on each session whose configuration the service confirmed."""
        return self._transport_generation

    @property
    def pending(self) -> OpenSession | None:
        """The session being dialled and set up (its events feed its state only)."""
        return self._pending

    async def open(self, conversation: Sequence[HeldItem] = ()) -> OpenSession:
        """Dial, give the session the configuration, and return it once confirmed; its state
        starts with ``conversation`` (the items a seed is about to give it)."""
        s = self._s
        options = s.options
        self._dial_gen += 1
        attempt = f"oai-{self._dial_gen}"
        s.emit("on_connection_lifecycle", ConnectAttempt(attempt, handle_supplied=False))
        timeout = options.connect_timeout
        try:
            sdk = await dial(
                self._client,
                model=options.model,
                flavour=s.flavour,
                websocket_options=options.websocket_options,
                timeout=timeout,
                headers=options.dial_headers,
            )
        except ConnectError as exc:
            s.emit("on_connection_lifecycle", SetupFailed(attempt, exc.failure))
            raise
        state = ConversationState(
            input_format=s.config.input_format,
            output_format=s.config.output_format,
            conversation=conversation,
        )
        conn = RealtimeConnection(
            sdk, flavour=s.flavour, on_event=self._on_event, on_closed=self._on_closed
        )
        session = OpenSession(conn, state, attempt)
        self._pending = session
        try:
            answer = await self._configure(conn, timeout)
        except (TimeoutError, ConnectError) as exc:
            await conn.close()
            failure = (
                exc.failure
                if isinstance(exc, ConnectError)
                else ConnectFailure("timeout", f"no confirmed session within {timeout:g} s")
            )
            s.emit("on_connection_lifecycle", SetupFailed(attempt, failure))
            raise ConnectError(failure) from None
        except BaseException:
            # Cancelled (a disconnect, an abandoned move): the socket is closed, not leaked.
            await asyncio.shield(conn.close())
            raise
        finally:
            self._pending = None
        if isinstance(answer, ServerError):
            await conn.close()
            failure = ConnectFailure(
                "error",
                "the service refused the session's configuration",
                provider_text=f"{answer.code}: {answer.message}",
            )
            s.emit("on_connection_lifecycle", SetupFailed(attempt, failure))
            raise ConnectError(failure)
        self._transport_generation += 1
        s.emit(
            "on_connection_lifecycle",
            SetupOk(attempt, self._transport_generation, session.state.session_id),
        )
        return session

    async def _configure(self, conn: RealtimeConnection, timeout: float) -> ServerEvent:
        """Wait for ``session.created``, send the configuration, and return the service's
        answer to it: ``session.updated``, or the ``error`` that refused it."""
        async with asyncio.timeout(timeout):
            await conn.wait_for(lambda e: isinstance(e, SessionEvent) and e.created, timeout)
            answered = conn.expect(
                lambda e: (
                    isinstance(e, ServerError) or (isinstance(e, SessionEvent) and not e.created)
                )
            )
            conn.post(self._s.config.session_update(self._s.flavour))
            try:
                return await answered
            finally:
                answered.cancel()
