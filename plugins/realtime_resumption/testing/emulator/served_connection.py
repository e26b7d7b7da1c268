"""One client connection: the handshake, admission of resumes, the read loop, goAway and close.

Everything on the wire crosses the emulated network (``network``, below websockets): it
arrives half the configured round trip after it was sent, in order, both ways. The setup
itself takes ``setup_latency``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.protocol import State

from ...redaction import redact
from . import network, wire
from .config import PREBUILT_VOICES, RefusalTiming
from .conversation import Conversation
from .faults import Flap
from .hub import Api, Hub
from .ledger import (
    ClientMessageRecord,
    ClosedBy,
    ConnectionRecord,
    ServerMessageRecord,
    SetupRecord,
)
from .listener import received_close
from .owned_tasks import OwnedTasks
from .sessions import HandleEntry, Session
from .snapshot import SessionState

DEADLINE_CLOSE = {
    "gemini": (1011, "Deadline expired before operation could complete."),
    "vertex": (1000, "The operation was cancelled."),
}
"""How each profile closes a connection at a goAway deadline."""

OVERSTAY_CLOSE = (1008, "client failed to close the connection after receiving a GoAway signal")
"""The close at a goAway deadline one report describes (``overstay_1008``)."""

_REASONS = {
    1000: "The operation was cancelled.",
    1007: wire.INVALID_ARGUMENT,
    1008: "Requested entity was not found.",
    1011: "Internal error encountered.",
}


def _too_long(instruction: str | None, limit: int | None) -> bool:
    """Whether ``instruction`` is over ``limit`` tokens (four characters a token)."""
    return limit is not None and instruction is not None and len(instruction) > 4 * limit


def close_reason(code: int) -> str:
    """The reason text the service sends with ``code``."""
    return _REASONS.get(code, "")


class Connection:
    """Serves one WebSocket connection; every task it starts is cancelled when it ends."""

    def __init__(self, ws: ServerConnection, hub: Hub[Connection], api: Api, path: str) -> None:
        self.hub = hub
        self._ws = ws
        self.api = api
        """Which API path the client dialled."""
        self._path = path
        self._opened_at = hub.now()
        self._tasks = OwnedTasks("emulator: connection task failed")
        self._closing = False
        self._silenced = False
        self._flap: Flap | None = None
        self._closed_by: ClosedBy | None = None
        self._sent_close: tuple[int, str] | None = None
        self._conversation: Conversation | None = None
        self.session: Session | None = None
        self.record: ConnectionRecord | None = None
        self.message_index = 0
        """Index of the last client message received (the setup is 0)."""

    @property
    def serving(self) -> bool:
        """Set up, and neither side has started closing it."""
        established = self.record is not None and self.record.established
        return established and not self._closing and self._ws.state is State.OPEN

    def input_waiting(self) -> int:
        """Client messages that reached this connection but wait, unread, in websockets'
        queue: the conversation has not taken them in. (The client sends each message as one
        frame; 0 where websockets keeps the queue elsewhere.)"""
        # websockets keeps its queue of received frames in its assembler: read defensively.
        frames = getattr(getattr(self._ws, "recv_messages", None), "frames", None)
        try:
            return len(frames) if frames is not None else 0
        except TypeError:
            return 0

    @property
    def session_id(self) -> str | None:
        """The session this connection serves, once established."""
        if self.record is None or not self.record.established or self._closing:
            return None
        return self.record.session_id

    def __repr__(self) -> str:
        return f"Connection({self.api}, session={self.session.id if self.session else None})"

    # --- tasks and sending ------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` in a task this connection owns."""
        return self._tasks.spawn(coro)

    async def send(
        self,
        message: wire.ServerMessage,
        *,
        kind: str,
        turn: int | None = None,
        chunk: int | None = None,
        handle_index: int | None = None,
    ) -> asyncio.Future[bool]:
        """Send a server message; the future says whether it was delivered (see the ledger).

        The frame is written at once; the future resolves once it crossed the network.
        """
        return await self._post(wire.encode(message), kind, turn, chunk, handle_index)

    async def _post(
        self,
        frame: str | bytes,
        kind: str,
        turn: int | None = None,
        chunk: int | None = None,
        handle_index: int | None = None,
    ) -> asyncio.Future[bool]:
        entry = ServerMessageRecord(kind, self.hub.now(), False, turn, chunk, handle_index)
        if self.record is not None:
            self.record.server_messages.append(entry)
        if self._silenced or self._closing:
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            done.set_result(False)
            return done

        def delivered(crossed: bool) -> None:
            entry.delivered = crossed

        return await network.send_crossing(self._ws, frame, delivered)

    # --- faults ------------------------------------------------------------------------------

    def go_away(
        self, time_left: float | None, *, close_at_deadline: bool, silence: bool
    ) -> asyncio.Task[None] | None:
        """Schedule a goAway (see ``Faults.go_away``); None when the connection is closing."""
        if self._closing:
            return None
        return self.spawn(self.send_go_away(time_left, close_at_deadline, silence))

    async def send_go_away(
        self, time_left: float | None, close_at_deadline: bool, silence: bool
    ) -> None:
        """Send goAway now and wait until it was delivered (see ``post_go_away``)."""
        await (await self.post_go_away(time_left, close_at_deadline, silence))

    async def post_go_away(
        self, time_left: float | None, close_at_deadline: bool, silence: bool
    ) -> asyncio.Future[bool]:
        """Send goAway now (``time_left`` unscaled) and arm the close at its deadline."""
        scaled = None if time_left is None else self.hub.config.scaled(time_left)
        delivered = await self.send(wire.go_away(scaled), kind="go_away")
        if silence:
            self._silenced = True
        if close_at_deadline and not self._closing:
            left = time_left if time_left is not None else self.hub.config.notice
            self.spawn(self._close_at_deadline(self.hub.config.scaled(left)))
        return delivered

    async def _close_at_deadline(self, delay: float) -> None:
        await asyncio.sleep(delay)
        config = self.hub.config
        await self.close(
            *(OVERSTAY_CLOSE if config.overstay_1008 else DEADLINE_CLOSE[config.profile])
        )

    def deadline_close(self) -> asyncio.Task[None] | None:
        """Schedule the end of the connection's life (see ``Faults.deadline_close``); None
        when the connection is closing."""
        if self._closing:
            return None
        return self.spawn(self._end_life())

    async def _end_life(self) -> None:
        """The deadline close without a goAway; with ``refuse_resume_after_deadline`` the
        session ends with it."""
        if self._closing:
            return
        config = self.hub.config
        assert self.session is not None
        if config.refuse_resume_after_deadline and self.session.end("deadline", self.hub.now()):
            logger.debug("emulator: session {} ended at a deadline close", self.session.id)
        await self.close(*DEADLINE_CLOSE[config.profile])

    async def _close_later(self, delay: float, code: int) -> None:
        await asyncio.sleep(delay)
        await self.close(code)

    def send_raw(self, frame: str | bytes) -> asyncio.Task[None] | None:
        """Schedule ``frame`` as it is (see ``Faults.send_raw``); None when closing."""
        if self._closing:
            return None
        return self.spawn(self._send_raw(frame))

    async def _send_raw(self, frame: str | bytes) -> None:
        await (await self._post(frame, "raw"))

    def close_with(self, code: int, reason: str) -> asyncio.Task[None] | None:
        """Schedule a close with ``code``; None when the connection is already closing."""
        if self._closing:
            return None
        return self.spawn(self.close(code, reason))

    def drop(self) -> None:
        """Abort the TCP connection: no close frame, the client sees 1006 (the reset crosses
        the network; frames on their way, either way, are lost)."""
        if self._closing:
            return
        self._closing = True
        self._closed_by = "drop"
        self._ws.transport.abort()

    async def close(self, code: int, reason: str | None = None) -> None:
        """Close with ``code`` (and the service's reason for it)."""
        if self._closing:
            return
        self._closing = True
        self._closed_by = "server"
        text = close_reason(code) if reason is None else reason
        self._sent_close = (code, text)
        # The close frame follows what was sent before it, across the same network.
        await self._ws.close(code, text)

    # --- the connection's life -------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes."""
        await self.hub.live.serve(self, self._run, self._finish)

    async def _run(self) -> None:
        config = self.hub.config
        try:
            raw = await asyncio.wait_for(self._ws.recv(), config.scaled(config.setup_timeout))
        except TimeoutError:
            logger.debug("emulator: no setup in time")
            await self.close(*DEADLINE_CLOSE["gemini"])
            return
        try:
            setup = wire.parse_client_message(raw)
        except wire.WireError as exc:
            logger.debug("emulator: bad first message: {}", exc)
            await self.close(1007)
            return
        if not isinstance(setup, wire.Setup):
            logger.debug("emulator: first message is not a setup")
            await self.close(1007)
            return
        not_served = wire.model_not_served(self._path, setup.model)
        if not_served is not None:
            logger.debug("emulator: {} is not served on {}", setup.model, self._path)
            await self.close(wire.MODEL_NOT_FOUND, not_served)
            return
        if not await self._admit(setup):
            return
        while True:
            raw = await self._ws.recv()
            self.message_index += 1
            if not await self._receive(raw):
                return
            if self._flap is not None and self._flap.drop_on_first_message:
                logger.debug("emulator: flapping: dropping after the first message")
                self.drop()

    def _open_record(self, session: Session, entry: HandleEntry | None, setup: wire.Setup) -> None:
        resumption = setup.resumption
        handle = resumption.handle if resumption else None
        record = ConnectionRecord(
            index=len(session.record.connections),
            session_id=session.id,
            path=self._path,
            api=self.api,
            opened_at=self._opened_at,
            resumed_from=redact(handle) if handle else None,
            resumed_handle_index=entry.record.index if entry else None,
            setup=SetupRecord(
                model=setup.model,
                system_instruction=setup.system_instruction,
                tools=setup.functions,
                voice=setup.voice,
                response_modalities=setup.response_modalities,
                resumption=resumption is not None,
                with_handle=handle is not None,
                transparent=bool(resumption and resumption.transparent),
                generation=setup.generation,
                compression=setup.compression,
            ),
        )
        record.client_messages.append(ClientMessageRecord(0, "setup", self.hub.now()))
        session.record.connections.append(record)
        self.session, self.record = session, record

    async def _refuse(self, why: str, code: int, *, after_setup_complete: bool) -> bool:
        assert self.record is not None and self.session is not None
        self.record.refused = why
        logger.debug("emulator: refusing connection of {} ({})", self.session.id, why)
        if after_setup_complete:
            await self.send(wire.setup_complete(self.session.id), kind="setup_complete")
            self.record.setup_at = self.hub.now()
        await self.close(code)
        return False

    async def _admit(self, setup: wire.Setup) -> bool:
        """Apply faults and resumption rules; set the connection up if it is accepted."""
        hub, config = self.hub, self.hub.config
        resumption = setup.resumption
        handle = resumption.handle if resumption else None
        entry = None
        if handle is not None:
            lifetime = config.handle_lifetime
            entry = hub.sessions.resolve(
                handle,
                now=hub.now(),
                validity=config.scaled(config.handle_validity_seconds),
                lifetime=None if lifetime is None else config.scaled(lifetime),
            )
        known = entry or (hub.sessions.known(handle) if handle else None)
        session = known.session if known else hub.sessions.new_session()
        self._open_record(session, entry, setup)
        assert self.record is not None
        if hub.faults.take_hang():
            self.record.refused = "hang"
            if not await self._client_left_within(config.scaled(config.hang_limit)):
                await self.close(1011)
            return False
        if self._refuses_while_open(entry, "before_setup_complete"):
            # As measured: the close follows the setup frame, no setupComplete.
            return await self._refuse("open-session", 1011, after_setup_complete=False)
        self.record.setup_latency = hub.setup_latency(resumed=handle is not None)
        if await self._client_left_within(self.record.setup_latency):
            logger.debug("emulator: the client left during its setup")
            return False
        if hub.faults.take_setup_refusal():
            return await self._refuse("close1011", 1011, after_setup_complete=True)
        if resumption and resumption.transparent and config.profile == "gemini":
            return await self._refuse("transparent", 1007, after_setup_complete=False)
        if config.refuse_unknown_voice and setup.voice not in (None, *PREBUILT_VOICES):
            return await self._refuse("voice", 1007, after_setup_complete=False)
        if handle is not None and entry is None:
            return await self._refuse(
                session.ended_why or "handle",
                config.refuse_close_code,
                after_setup_complete=config.refuse_after_setup_complete,
            )
        if entry is not None and _too_long(
            setup.system_instruction, config.resume_instruction_limit
        ):
            return await self._refuse(
                "instruction-length", config.refuse_close_code, after_setup_complete=False
            )
        if entry is not None and config.refuse_resume_after_video and session.took_video:
            return await self._refuse("video", config.refuse_close_code, after_setup_complete=False)
        if self._refuses_while_open(entry, "after_setup_complete"):
            return await self._refuse("open-session", 1011, after_setup_complete=True)
        state = self._state(entry, setup)
        if state is None:
            return await self._refuse("instruction", 1007, after_setup_complete=False)
        dead = hub.faults.take_dead() if entry is not None else None
        self.record.dead = dead is not None
        self._conversation = Conversation(self, session, state, setup, dead=dead)
        session.attach(self, hub.now())
        session.adopt(state)
        await self.send(wire.setup_complete(session.id), kind="setup_complete")
        self.record.setup_at = hub.now()
        logger.debug(
            "emulator: session {} connection {} set up ({})",
            session.id,
            self.record.index,
            f"resumed from {redact(handle)}" if handle else "new",
        )
        if dead is not None:
            logger.debug("emulator: connection {} is resumed but dead", self.record.index)
        await self._conversation.start()
        if config.rotate_every is not None:
            self.spawn(self._rotate(config.rotate_every))
        if config.session_cap is not None and not setup.compression:
            cap_in = config.scaled(config.session_cap) - session.session_time(hub.now())
            self.spawn(self._end_at_cap(max(0.0, cap_in)))
        self._flap = hub.faults.take_flap()
        if self._flap is not None and self._flap.close_after is not None:
            close_after = config.scaled(self._flap.close_after)
            self.spawn(self._close_later(close_after, self._flap.code))
        return True

    def _refuses_while_open(self, entry: HandleEntry | None, when: RefusalTiming) -> bool:
        """Whether this resume is refused now because its session has an open connection."""
        config = self.hub.config
        if entry is None or not config.refuse_resume_while_open:
            return False
        if config.refuse_resume_while_open_when != when:
            return False
        return any(c is not self and c.serving for c in entry.session.open)

    async def _end_at_cap(self, cap_in: float) -> None:
        """The session reaches its cap in ``cap_in`` (scaled): goAway with the usual notice
        (or what is left), then the session ends: every connection of it closes with the
        profile's deadline close, and its handles are refused from then on."""
        config = self.hub.config
        notice = min(config.scaled(config.notice), cap_in)
        await asyncio.sleep(cap_in - notice)
        await self.send(wire.go_away(notice), kind="go_away")
        await asyncio.sleep(notice)
        assert self.session is not None
        if self.session.end("session-ended", self.hub.now()):
            logger.debug("emulator: session {} reached its cap", self.session.id)
        code, reason = DEADLINE_CLOSE[config.profile]
        for conn in self.session.open - {self}:
            conn.close_with(code, reason)
        await self.close(code, reason)

    async def _client_left_within(self, seconds: float) -> bool:
        """Wait ``seconds``; True (at once) if the client closed the connection meanwhile."""
        if seconds <= 0:
            return False
        try:
            await asyncio.wait_for(self._ws.wait_closed(), seconds)
        except TimeoutError:
            return False
        return True

    def _state(self, entry: HandleEntry | None, setup: wire.Setup) -> SessionState | None:
        """The state the connection starts from, under its setup; None when the setup asks
        for a new system instruction the session refuses (``instruction_change``)."""
        fresh = SessionState(
            system_instruction=setup.system_instruction,
            functions=setup.functions,
            voice=setup.voice,
        )
        if entry is None:
            return fresh
        # The service applies the new connection's setup to the resumed session.
        state = SessionState.restore(entry.record.snapshot)
        state.functions, state.voice = fresh.functions, fresh.voice
        if setup.system_instruction != state.system_instruction:
            policy = self.hub.config.instruction_change
            if policy == "refuse":
                return None
            if policy == "accept":
                state.system_instruction = setup.system_instruction
        return state

    async def _rotate(self, every: float) -> None:
        """The connection's life ends at ``every`` (unscaled): a goAway ``notice`` before, or
        (``rotate_without_go_away``) the deadline close alone."""
        config = self.hub.config
        if config.rotate_without_go_away:
            await asyncio.sleep(config.scaled(every))
            await self._end_life()
            return
        notice = min(config.notice, every)
        await asyncio.sleep(config.scaled(every - notice))
        await self.send_go_away(notice, True, config.silence_after_go_away)

    async def _receive(self, raw: str | bytes) -> bool:
        """Handle one client frame; False when the connection is being closed for it."""
        assert self.record is not None and self._conversation is not None
        entry = ClientMessageRecord(self.message_index, "invalid", self.hub.now())
        self.record.client_messages.append(entry)
        try:
            message = wire.parse_client_message(raw)
        except wire.WireError as exc:
            logger.debug("emulator: invalid client message: {}", exc)
            await self.close(1007)
            return False
        entry.kind = wire.kind_of(message)
        if self.session is not None and "video" in entry.kind.split("+"):
            self.session.took_video = True
        if isinstance(message, wire.Setup):
            logger.debug("emulator: second setup message")
            await self.close(1007)
            return False
        await self._conversation.handle(message, entry)
        return True

    async def _finish(self) -> None:
        self._closing = True
        await self._tasks.cancel_all()
        if self._conversation is not None:
            self._conversation.close()
        if self.session is not None:
            self.session.detach(self, self.hub.now())
        record = self.record
        if record is None:
            return
        record.closed_at = self.hub.now()
        record.closed_by = self._closed_by or "client"
        if self._sent_close is not None:
            record.close_code, record.close_reason = self._sent_close
        elif self._closed_by == "drop":
            record.close_code = 1006
        else:
            record.close_code, record.close_reason = received_close(self._ws)
        logger.debug(
            "emulator: session {} connection {} closed {} by {}",
            record.session_id,
            record.index,
            record.close_code,
            record.closed_by,
        )
