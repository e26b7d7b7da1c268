"""The state of one transport's session, shared by the parts that serve it.

:class:`TransportState` is handed to the receiver, the dialler, the switchover and the rotation
instead of the transport itself: it holds the connection the session runs on, the session's
resumption handles (their texts in its ``HandleBook``, the one place a handle's text is kept;
the other parts hold ``HandleRef`` numbers) and which is the latest resumable one, and the few
operations more than one part needs — calling the framework's callbacks, applying generation
effects, installing and detaching connections, taking in a new handle, closing the session.

The bookkeeping (the generation tracker, the input path, the tool calls, the history, the
retained user turn) is the owners' own: the state keeps them private and answers what the other
parts ask of them through its methods; the receiver and the switchover, which feed them,
are handed the ones they feed. The transport owns the state; the other parts read it and
change it only through its methods.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, ParamSpec, Protocol

from loguru import logger

from realtime_resumption.callbacks import callbacks_of
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.live_models import ModelTraits, non_blocking_functions
from realtime_resumption.gemini.live_options import LiveOptions
from realtime_resumption.gemini.watchdog import UserTurnRetainer
from realtime_resumption.generation import (
    Effect,
    GenerationEnded,
    GenerationTracker,
)
from realtime_resumption.handles import HandleBook, HandleRef
from realtime_resumption.history import ConversationHistory
from realtime_resumption.move_machine import InputGate
from realtime_resumption.redaction import redact
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import (
    ConnectionLifecycleEvent,
    GenerationClose,
    LLMTransport,
    ReplayItem,
    ToolCall,
    TransportErrorEvent,
)

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import LiveConnection
    from realtime_resumption.gemini.messages import ClientMessage
    from realtime_resumption.move_reports import HandleKind, MoveReason, MoveReport

_P = ParamSpec("_P")


class Callbacks(LLMTransport, Protocol):
    """The framework's callbacks, as the transport holds them: the interface's ``on_*``
    attributes and the two that report moves."""

    on_move: Callable[[MoveReport], None] | None
    on_move_started: Callable[[MoveReason, HandleKind], None] | None


_REASON_LIMIT: Final = 200


class TransportState:
    """One transport's session state; see the module documentation.

    ``callbacks`` is the transport whose public ``on_*`` attributes are the framework's
    callbacks; ``credential_expired`` is called when an installed connection's credential
    expires.
    """

    def __init__(
        self,
        callbacks: Callbacks,
        *,
        options: LiveOptions,
        secrets: set[str],
        tracker: GenerationTracker,
        input_path: InputPath,
        tools: ToolCallTracker,
        history: ConversationHistory,
        retained_turn: UserTurnRetainer,
        credential_expired: Callable[[LiveConnection], None],
    ) -> None:
        self._callbacks = callbacks
        self._options = options
        self.secrets = secrets
        """API keys, tokens and handles: redacted wherever text leaves the transport."""
        self._tracker = tracker
        self._input = input_path
        self._tools = tools
        self._history = history
        self._retained_turn = retained_turn
        self.seeded: tuple[ReplayItem, ...] = ()
        """History the client replayed: a rebuilt session is seeded with it."""
        self.without_id: set[str] = set()
        """Tool calls the provider issued without an id (their result goes without one)."""
        self.results_without_id = False
        """The service takes a tool result without an id, matched by name (Vertex AI; the
        Gemini API refuses one)."""
        self.traits = ModelTraits()
        """What the transport assumes of the model (``live_models``)."""
        self._working: LiveOptions | None = None
        self._current: LiveConnection | None = None
        self.handles = HandleBook()
        """The texts of the session's handles: every other part holds their references."""
        self._handle: HandleRef | None = None
        self._active = False
        self.quiesced = False
        self._setup_stale = False
        self.answers_prove_input = True
        """Whether the model's output on the current connection shows it took in the tool
        results written before it: no function its setup declared lets the model talk on
        while it runs (``outbox``, *Answered*)."""
        self.tool_calls_possible = True
        """The current connection's setup declares functions: a tool call may still finish
        an answer after the provider's turnComplete (``GenerationTracker``'s grace)."""
        self._credential_expired = credential_expired
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tick: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._end_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._close_reported: set[LiveConnection] = set()

    # --- the state it owns: read by every part, written only through its methods --------------

    @property
    def options(self) -> LiveOptions:
        """The setup the next connection is dialled with."""
        return self._options

    @property
    def working(self) -> LiveOptions | None:
        """The setup the latest installed connection was set up with: the one to go back to
        when the service refuses a changed setup."""
        return self._working

    @property
    def setup_stale(self) -> bool:
        """The setup changed since the current connection opened."""
        return self._setup_stale

    @property
    def current(self) -> LiveConnection | None:
        """The connection the session runs on; None during a gap."""
        return self._current

    @property
    def latest(self) -> HandleRef | None:
        """The latest handle the provider marked resumable."""
        return self._handle

    @property
    def handle(self) -> str | None:
        """The text of :attr:`latest` (for the transport's API and the store)."""
        return self.handles.text(self._handle) if self._handle is not None else None

    @property
    def active(self) -> bool:
        """A session is up and takes input (written at once, or held during a move)."""
        return self._active

    @property
    def gate(self) -> InputGate:
        """How much of the input the current connection takes (the move decides)."""
        return self._input.gate

    def set_gate(self, gate: InputGate) -> None:
        """Let the current connection take ``gate``'s share of the input (no feed: the
        caller feeds when the moment is right)."""
        self._input.set_gate(gate)

    def update_setup(self, options: LiveOptions) -> bool:
        """The next connection's setup is ``options``; True when that changes the setup of
        a session that is up (the current connection then runs a stale one)."""
        changed = self._active and options != self._options
        self._options = options
        if changed:
            self._setup_stale = True
        return changed

    def update_in_session(self, options: LiveOptions) -> None:
        """The current connection is sent ``options``' instruction and tools in the session
        (a context update the model takes): it runs them from now on, and the next
        connection is set up with them."""
        self._options = options
        working = self._working
        if working is None:
            return
        working = replace(
            working, system_instruction=options.system_instruction, tools=options.tools
        )
        self._working = working
        self._setup_stale = working != options
        self._declare_calls(working)

    def _declare_calls(self, setup: LiveOptions) -> None:
        non_blocking = non_blocking_functions(
            setup.tools, by_default=self.traits.non_blocking_calls
        )
        self._tools.declared(non_blocking)
        self.answers_prove_input = not non_blocking
        self.tool_calls_possible = setup.declares_functions

    def roll_back_setup(self) -> None:
        """The service refused the changed setup: go back to the one that worked."""
        if self._working is not None:
            self._options = self._working
        self._setup_stale = False

    def resumable(self, handle: HandleRef) -> None:
        """The provider marked ``handle`` resumable: a new connection may resume from it."""
        self._handle = handle

    def handle_issued(
        self,
        text: str,
        conn: LiveConnection,
        now: float,
        *,
        resumable: bool,
        last_consumed_index: int | None,
    ) -> HandleRef:
        """``conn``, the current connection, issued the handle ``text`` (handled at ``now``):
        every owner learns of it in this one step. Its text is a secret, kept in the book
        alone; the input places it, the tool calls note which calls its session issued, and
        a resumable one becomes :attr:`latest`. Returns its reference."""
        self.secrets.add(text)
        handle = self.handles.enter(text)
        if resumable:
            self._handle = handle
        self._input.record_handle(
            handle, conn, now, resumable=resumable, last_consumed_index=last_consumed_index
        )
        self._tools.handle_recorded(handle, conn.dial_gen, resumable=resumable)
        return handle

    def forget_handle(self) -> None:
        """The server session's handles resume nothing any more (rebuilt, cleared, aborted)."""
        self._handle = None

    def activate(self) -> None:
        """A session is up: it takes input from now on."""
        self._active = True

    def strand(self) -> LiveConnection | None:
        """Detach the current connection at once and forget the handle (``abort_incumbent``:
        a recovery dial must not resume a wedged turn); returns the connection."""
        conn, self._current = self._current, None
        self._input.stop_feeding()
        self._handle = None
        return conn

    def deactivate(self) -> None:
        """The session stops without ``on_close`` (``abort_incumbent``): the answer in
        progress ends, and everyone waiting for an answer's end is released."""
        self._active = False
        self.cancel_timers()
        self.apply(self._tracker.connection_lost(self.now()))
        self.release_waiters()

    @property
    def callbacks(self) -> Callbacks:
        """The transport: its public ``on_*`` attributes are the framework's callbacks."""
        return self._callbacks

    # --- small services -----------------------------------------------------------------------

    def now(self) -> float:
        """The event loop's clock."""
        return asyncio.get_running_loop().time()

    def call(
        self, callback: Callable[_P, None] | None, *args: _P.args, **kwargs: _P.kwargs
    ) -> None:
        """Call a framework callback; one that raises is logged and changes nothing else."""
        if callback is None:
            return
        try:
            callback(*args, **kwargs)
        except Exception:
            logger.exception("{}: a callback raised; the transport goes on", self._callbacks)

    def lifecycle(self, event: ConnectionLifecycleEvent) -> None:
        """Report a connection lifecycle event."""
        self.call(self._callbacks.on_connection_lifecycle, event)

    def clean(self, text: str | None) -> str | None:
        """``text`` with every secret the transport knows redacted, shortened for logs."""
        if not text:
            return text
        for secret in self.secrets:
            if secret and secret in text:
                text = text.replace(secret, redact(secret))
        return text[:_REASON_LIMIT]

    def own(self, task: asyncio.Task[Any]) -> None:
        """Keep ``task`` until it is done; ``wait_tasks`` awaits what is left."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def tasks(self) -> set[asyncio.Task[Any]]:
        """The tasks the session owns that are still running."""
        return set(self._tasks)

    def spawn_close(self, conn: LiveConnection) -> asyncio.Task[Any]:
        """Close ``conn`` in a task the session owns."""
        task = asyncio.get_running_loop().create_task(
            conn.close(), name=f"gemini-live-close-{conn.attempt_id}"
        )
        self.own(task)
        return task

    def can_rebuild(self) -> bool:
        """There is a conversation to seed a fresh session with."""
        return bool(self.seeded) or self._history.turns > 0

    # --- what the session holds, for its record and a rebuild -----------------------------------

    @property
    def generation_id(self) -> str | None:
        """The answer in progress, if any."""
        return self._tracker.generation_id

    def conversation(self) -> list[ReplayItem]:
        """The conversation a fresh session is seeded with: what the client replayed, then
        the history since."""
        return list(self.seeded) + self._history.replay_items()

    def lacking(self, handle: HandleRef | None) -> list[ClientMessage]:
        """The input a session resumed from ``handle`` (rebuilt, for None) would lack."""
        return self._input.lacking(handle)

    def pin(self, handle: HandleRef) -> bool:
        """Keep ``handle``'s place in the input until the next connection attaches (a dial
        from it starts); False when the input no longer knows it."""
        return self._input.pin(handle)

    def issued_by(self, handle: HandleRef | None) -> frozenset[str]:
        """The tool calls the server session at ``handle`` issued (none for None)."""
        return self._tools.known_at(handle) if handle is not None else frozenset()

    def open_calls(self) -> list[ToolCall]:
        """The tool calls waiting for their result, as the model issued them."""
        return [
            call
            for call_id in self._tools.pending_ids()
            if (call := self._history.call(call_id)) is not None
        ]

    def calls_restored(self, calls: Sequence[ToolCall], handle: HandleRef) -> None:
        """The session resumed from ``handle`` on the current connection still waits for
        ``calls`` (a call taken over): they are open, issued by that session (a record taken
        before its next handle keeps them), and in the history."""
        conn = self._current
        assert conn is not None
        self._tools.calls_issued(calls, conn.dial_gen, self.now())
        self._tools.handle_recorded(handle, conn.dial_gen)
        for call in calls:
            self._history.tool_call(call)

    # --- input --------------------------------------------------------------------------------

    def feed(self) -> None:
        """Hand the current connection its next message, as far as the gate lets it."""
        self._input.feed(self.now())

    # --- connections --------------------------------------------------------------------------

    def install(
        self, conn: LiveConnection, dialled_with: LiveOptions, expires_at: float | None
    ) -> None:
        """Make ``conn`` the session's connection: it delivers and takes sends from now on."""
        self._current = conn
        self._working = dialled_with
        self._input.connected(conn)
        self._setup_stale = dialled_with != self._options
        self._declare_calls(dialled_with)
        conn.start()
        if expires_at is not None:
            self._expiry = asyncio.get_running_loop().call_later(
                max(0.0, expires_at - time.time()), self._expired, conn
            )
        self.call(self._callbacks.on_session_ready, conn.session_id or "")
        self.feed()
        self.schedule_tick()

    def detach(self, conn: LiveConnection) -> bool:
        """``conn`` stops being the session's connection (if it was); True when it was."""
        if conn is not self._current:
            return False
        self._current = None
        self._input.detach(conn)
        self.cancel_expiry()
        return True

    def report_generation_close(
        self, conn: LiveConnection, code: int | None, reason: str | None
    ) -> None:
        """Report ``conn``'s close as a lifecycle event, once."""
        if conn.transport_generation is None or conn in self._close_reported:
            return
        self._close_reported.add(conn)
        self.lifecycle(
            GenerationClose(conn.attempt_id, conn.transport_generation, code, self.clean(reason))
        )

    def forget_close(self, conn: LiveConnection) -> None:
        """``conn`` is gone: forget that its close was reported."""
        self._close_reported.discard(conn)

    def close(self, code: int | None, reason: str | None) -> None:
        """The session is over: the answer ends, input and tool calls are forgotten, and
        ``on_close`` reports it (once)."""
        was_active = self._active
        self._active = False
        self._input.set_gate(InputGate.OPEN)
        conn, self._current = self._current, None
        self._input.stop_feeding()
        if conn is not None:
            self.spawn_close(conn)
        self.cancel_timers()
        self.apply(self._tracker.connection_lost(self.now()))
        self.release_waiters()
        self._input.clear()
        self._tools.clear()
        self._retained_turn.clear()
        if was_active:
            self.call(self._callbacks.on_close, code, self.clean(reason))

    def lost(self, error: Exception, code: int | None, reason: str | None) -> None:
        """The session cannot go on: ``on_error`` (not recoverable), then it closes."""
        self.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=False))
        if code is None:
            code, reason = 1000, "the session could not be moved to a new connection"
        self.close(code, reason)

    def _expired(self, conn: LiveConnection) -> None:
        self._expiry = None
        self._credential_expired(conn)

    # --- generation effects and their timers --------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        """Deliver generation effects to the framework's callbacks."""
        cb = self._callbacks
        for effect in effects:
            for name, args in callbacks_of(effect):
                if name == "on_first_audio_chunk" and self.quiesced:
                    continue
                self.call(getattr(cb, name), *args)
            if isinstance(effect, GenerationEnded):
                for waiter in self._end_waiters.pop(effect.generation_id, ()):
                    if not waiter.done():
                        waiter.set_result(None)

    def apply_and_schedule(self, effects: list[Effect]) -> None:
        """:meth:`apply`, then re-arm the generation timer."""
        self.apply(effects)
        self.schedule_tick()

    def wait_for_end(self, generation_id: str) -> asyncio.Future[None]:
        """A future done when generation ``generation_id`` ends (or the session closes)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._end_waiters.setdefault(generation_id, []).append(waiter)
        return waiter

    def schedule_tick(self) -> None:
        """Arm the generation tracker's next deadline (bounds run while the session is up,
        across moves; a closed session ends the answer)."""
        deadline = self._tracker.next_deadline if self._active else None
        if self._tick is not None:
            if deadline is not None and self._tick.when() == deadline:
                return
            self._tick.cancel()
            self._tick = None
        if deadline is not None:
            self._tick = asyncio.get_running_loop().call_at(deadline, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        self.apply(self._tracker.tick(self.now()))
        self.schedule_tick()

    def cancel_expiry(self) -> None:
        """Stop watching the current connection's credential."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def cancel_timers(self) -> None:
        """Stop every timer of the session."""
        self.cancel_expiry()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None

    def release_waiters(self) -> None:
        """Release everyone waiting for a generation's end."""
        waiters, self._end_waiters = self._end_waiters, {}
        for futures in waiters.values():
            for waiter in futures:
                if not waiter.done():
                    waiter.set_result(None)
