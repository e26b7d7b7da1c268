"""Keeping a Gemini Live call in a ``SessionStore``, so another process can take it over.

:class:`Persister` is the core's :class:`~realtime_resumption.record_keeper.RecordKeeper`
(the lease, the save beats, the hand-over, the end: see there) for a Gemini Live session: its
snapshot (``gemini.stored_session``) with the handle it resumes from, and the takeover:

- ``take_over`` (at ``connect``, when the store held the call): the session resumed from the
  stored handle with the stored input replayed, its open tool calls issued again, or rebuilt
  from the stored conversation; reported as a move. The dials are the transport's opening move,
  carried out by the rotation's one driver (``Rotation.open``: the move machine, its one
  failure policy), with ``TAKEOVER_RETRY_DELAYS`` on the stored handle.
  Until the resumed session issues a handle of its own, the stored one stays its handle (saved
  with its kind and issue time, the input replayed counted as lacking from it): a process that
  dies before then is taken over by resuming it again, not by rebuilding the call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

from loguru import logger

from realtime_resumption.gemini.live_options import LiveOptions
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.gemini.stored_session import (
    RecordCodec,
    SessionSnapshot,
    Setup,
)
from realtime_resumption.handles import HandleRef
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason, MoveReport
from realtime_resumption.outbox import ReplayScope
from realtime_resumption.record_keeper import RecordKeeper
from realtime_resumption.record_keeper import StoreStats as StoreStats
from realtime_resumption.redaction import redact
from realtime_resumption.store import SessionStore, StoreOptions

if TYPE_CHECKING:
    from realtime_resumption.gemini.rotation import Opened

TAKEOVER_RETRY_DELAYS: Final = (0.0, 0.5, 1.0)
"""The pauses before each dial a takeover spends on the stored handle (jittered, as every
retry) before it rebuilds the call: a transient failure, or a resume the service refuses
while the stopped process's connection is still open there (1011), gets two more tries."""

Preload = Sequence[tuple[ClientMessage, ReplayScope]]
"""Messages a session gets first, each with its replay scope."""
OpenSession = Callable[
    [HandleRef | None, HandleKind, tuple[float, ...], Callable[[bool], Preload]],
    Awaitable["Opened"],
]
"""Opens the transport's session as the rotation's opening move (``Rotation.open``): resuming
from the handle (of the kind given; None: a fresh session), the pauses before each dial, and
what the session gets first (``preload(resumed)``); a refused or spent handle opens a fresh
session. Raises ``ConnectError`` when no dial opens it."""


class Persister(RecordKeeper[SessionSnapshot]):
    """The store I/O of one Gemini Live session; see the module documentation.

    ``report`` is called (on the event loop) with each error worth telling the transport's
    user about; ``describe`` names the transport in logs.
    """

    def __init__(
        self,
        s: TransportState,
        store: SessionStore,
        key: str,
        options: StoreOptions,
        *,
        vertex: bool,
        report: Callable[[Exception], None],
        describe: str,
    ) -> None:
        super().__init__(
            store,
            key,
            options,
            lambda session_key, writer: RecordCodec(
                options.encryption_key, session_key=session_key, writer=writer
            ),
            report=report,
            describe=describe,
        )
        self._s = s
        self._vertex = vertex
        self._seen_handle: str | None = None
        self._handle_kind = HandleKind.NONE
        self._handle_at: float | None = None
        self._setup: tuple[LiveOptions, Setup] | None = None
        """The options last seen and their setup as a record keeps it."""

    # --- connect ------------------------------------------------------------------------------

    async def claim(self) -> SessionSnapshot | None:
        """Take the lease and load the record left by a previous process (see
        ``RecordKeeper.claim``); its handle is the call's until the session issues one."""
        snapshot = await super().claim()
        if snapshot is not None:
            self._seen_handle = snapshot.handle
            self._handle_kind = snapshot.handle_kind
            self._handle_at = snapshot.handle_issued_at
        return snapshot

    def active(self) -> bool:
        return self._s.active

    # --- taking a call over -------------------------------------------------------------------

    async def take_over(
        self,
        stored: SessionSnapshot,
        take_held: Callable[[], Preload],
        open_session: OpenSession,
    ) -> None:
        """Continue the call another process left in the store (``stored``): resume its session
        from the stored handle and replay the input it may lack, then what was sent while the
        store answered (``take_held`` hands it over, once ``on_move_started`` was called: what
        the framework sends then goes with it), and issue its open tool calls again; an expired
        or refused handle (or one whose dials are spent: ``TAKEOVER_RETRY_DELAYS``) rebuilds
        the session from the stored conversation. Reported as a move (reason ``takeover``).
        Raises ``ConnectError`` when the call cannot be opened."""
        s = self._s
        started = s.now()
        handle = (
            s.handles.enter(stored.handle)
            if stored.handle is not None and stored.handle_valid(time.time())
            else None
        )
        kind = stored.handle_kind if handle is not None else HandleKind.NONE
        if stored.handle:
            s.secrets.add(stored.handle)
        s.call(s.callbacks.on_move_started, MoveReason.TAKEOVER, kind)
        # History the framework replayed meanwhile is its own start of the call, not this
        # call's: the stored conversation is (the session has it, or is seeded with it).
        held = [
            (message, scope) for message, scope in take_held() if scope is not ReplayScope.RESUMED
        ]
        stored_input = [(message, ReplayScope.SESSION) for message in stored.input]
        history = ClientMessage.history(stored.conversation)
        rebuilt_preload: Preload = [
            *([(history, ReplayScope.RESUMED)] if history is not None else []),
            # A result answers a call the rebuilt session never issued.
            *((msg, scope) for msg, scope in stored_input if msg.kind != "tool_response"),
            *held,
        ]

        def preload(resumed: bool) -> Preload:
            return [*stored_input, *held] if resumed else rebuilt_preload

        opened = await open_session(handle, kind, TAKEOVER_RETRY_DELAYS, preload)
        resumed = opened.handle is not None
        error = opened.error
        if stored.handle is not None and not resumed and error is None:
            error = "the stored handle expired"
        # A later rebuild seeds a fresh session with the whole call, not just this part.
        s.seeded = stored.conversation
        replayed = len(stored.input) if resumed else len(rebuilt_preload) - len(held)
        report = MoveReport(
            number=1,
            reason=MoveReason.TAKEOVER,
            handle_kind=kind,
            handle=redact(stored.handle),
            outcome=MoveOutcome.RESUMED if resumed else MoveOutcome.REBUILT,
            gap_ms=max(0.0, (time.time() - stored.saved_at) * 1000),
            messages_buffered=0,
            messages_replayed=replayed,
            audio_chunks_dropped=0,
            audio_seconds_dropped=0.0,
            attempts=opened.dials,
            started_at=started,
            finished_at=s.now(),
            error=error,
        )
        logger.info(
            "{}: took the call {!r} over ({}, {} message(s) replayed)",
            self._describe,
            self.key,
            report.outcome.value,
            replayed,
        )
        s.call(s.callbacks.on_move, report)
        if handle is not None and resumed and stored.tool_calls:
            # The resumed session still waits for these: the app runs them here.
            # The stored handle's session issued them: a snapshot taken before the session's
            # next handle keeps them open, for the process that takes the call over next.
            s.calls_restored(stored.tool_calls, handle)
            s.call(s.callbacks.on_tool_call, stored.tool_calls)

    # --- saving -------------------------------------------------------------------------------

    def snapshot(self) -> SessionSnapshot:
        """The session's state now."""
        s = self._s
        now = time.time()
        if s.handle != self._seen_handle:
            self._seen_handle = s.handle
            # Noted up to one beat after it arrived: its age is counted from the beat before.
            self._handle_at = now - self._options.write_interval
            self._handle_kind = (
                HandleKind.AFTER_TURN if s.generation_id is None else HandleKind.MID_TURN
            )
        if self._setup is None or self._setup[0] is not s.options:
            # The options are replaced whole when the setup changes: its dict form is made
            # once per setup, not once per beat.
            self._setup = (s.options, Setup.of(s.options))
        return SessionSnapshot.capture(
            s,
            handle_kind=self._handle_kind,
            handle_issued_at=self._handle_at,
            vertex=self._vertex,
            now=now,
            setup=self._setup[1],
        )
