"""``Opener``: a session's first connection, dialled with retries or taken over.

``connect``, ``reconnect`` while not connected, and a takeover (``Persister.take_over``)
start a session here: the parts are reset for it, what was sent before the dial started goes
first, and the rotation carries out the dials (``Rotation.open``), each installing the
connection it set up. The transport's ``Lifecycle`` follows: dialling, then open, or back to
idle when the session could not be opened.
"""

from __future__ import annotations

from collections.abc import Callable

from realtime_resumption.gemini.closing import Closer
from realtime_resumption.gemini.dialling import Dialler
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.persistence import Preload
from realtime_resumption.gemini.rotation import Opened, Rotation
from realtime_resumption.gemini.sends import Sends
from realtime_resumption.gemini.state import Callbacks, TransportState
from realtime_resumption.gemini.transport_phase import Lifecycle
from realtime_resumption.gemini.watchdog import UserTurnRetainer
from realtime_resumption.handles import HandleRef
from realtime_resumption.history import ConversationHistory
from realtime_resumption.move_reports import HandleKind, MoveReason
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import TransportErrorEvent


class Opener:
    """Opens a transport's sessions (see the module documentation). ``callbacks`` is the
    transport, whose ``on_error`` hears of each retried dial of a ``connect`` with retries."""

    def __init__(
        self,
        session: TransportState,
        callbacks: Callbacks,
        lifecycle: Lifecycle,
        *,
        dialler: Dialler,
        rotation: Rotation,
        closer: Closer,
        sends: Sends,
        input_path: InputPath,
        tools: ToolCallTracker,
        history: ConversationHistory,
        retained_turn: UserTurnRetainer,
    ) -> None:
        self._s = session
        self._callbacks = callbacks
        self._life = lifecycle
        self._dialler = dialler
        self._rotation = rotation
        self._closer = closer
        self._sends = sends
        self._input = input_path
        self._tools = tools
        self._history = history
        self._retained_turn = retained_turn

    def _now(self) -> float:
        return self._s.now()

    async def open(
        self,
        handle: HandleRef | None,
        *,
        delays: tuple[float, ...] | None = (0.0,),
        reason: MoveReason = MoveReason.REQUESTED,
        kind: HandleKind = HandleKind.NONE,
        preload: Callable[[bool], Preload] | None = None,
        report_retries: bool = False,
    ) -> Opened:
        """Start a session: ``connect``, ``reconnect`` while not connected, or a takeover.
        The rotation carries out its dials (``Rotation.open``: ``delays`` the pauses before
        each, None the session's ``retry_delays``); each installs the connection it set up.
        ``preload(resumed)``: what a takeover's session gets first, before what was sent
        meanwhile (a resumed one its stored input, a rebuilt one its stored conversation):
        with it a refused or spent handle opens a fresh session."""
        # A disconnect still closing (its caller was cancelled) finishes first.
        await self._closer.wait()
        # First: a start the lifecycle refuses must leave the parts as they are.
        self._life.dial()
        self._rotation.reset()
        self._input.clear()
        self._tools.clear()
        self._retained_turn.clear()
        self._sends.new_session()
        filled = [handle is not None]
        for message, scope in preload(filled[0]) if preload is not None else self._life.take_held():
            self._input.submit(message, self._now(), scope)

        async def dial(attempt: HandleRef | None) -> None:
            if preload is not None and filled[0] != (attempt is not None):
                # A takeover rebuilds: its session gets the stored conversation instead (what
                # was sent during the failed resumes goes with them, as after any failed dial).
                filled[0] = attempt is not None
                self._input.clear()
                for message, scope in preload(filled[0]):
                    self._input.submit(message, self._now(), scope)
            await self._dial_and_install(attempt)

        try:
            opened = await self._rotation.open(
                reason,
                handle,
                kind,
                dial,
                delays=delays,
                may_rebuild=preload is not None,
                rebuild_when_spent=preload is not None,
                on_retry=self._retried if report_retries else None,
            )
        except BaseException:
            self._input.clear()
            self._life.failed()
            raise
        self._life.opened()
        return opened

    async def open_taken_over(
        self,
        handle: HandleRef | None,
        kind: HandleKind,
        delays: tuple[float, ...],
        preload: Callable[[bool], Preload],
    ) -> Opened:
        """A takeover's session (``Persister.take_over``): see ``open``."""
        return await self.open(
            handle, delays=delays, reason=MoveReason.TAKEOVER, kind=kind, preload=preload
        )

    def _retried(self, error: BaseException) -> None:
        """A failed dial of ``connect`` is retried: the framework hears of it."""
        if isinstance(error, Exception):
            self._s.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=True))

    async def _dial_and_install(self, handle: HandleRef | None) -> None:
        """One dial of ``open``: on success the connection is installed and the session
        takes input from it."""
        if handle is None:
            self._history.clear()
            self._s.seeded = ()
        conn = await self._dialler.dial(handle)
        self._tools.connected(conn.dial_gen, resumed_from=None)
        if handle is None:
            self._s.forget_handle()
            # Nothing seeds this session: history replayed while it dialled goes to it as sent.
            self._input.attach_fresh(conn, self._now(), seeded=False)
        else:
            # Until the session issues a handle of its own, the one it resumed from is its
            # latest, as after a move: a store saves it, a move or another takeover resumes
            # from it, and either replays everything sent since (that session lacks it all).
            self._s.resumable(handle)
            self._tools.handle_recorded(handle, conn.dial_gen)
            self._input.record_foreign_handle(handle)
            self._input.attach_resumed(conn, handle, self._now())
            self._rotation.resumed_from(handle)
        self._s.activate()
        self._s.install(conn, *self._dialler.take(conn))
