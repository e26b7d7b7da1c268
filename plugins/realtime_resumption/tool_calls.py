"""Which tool calls are open, which server session issued them, and where their results may go.

A tool response belongs to the server session that issued the call: sent to a session that
never issued it, it is dropped or leaves the model waiting. Sessions form a *lineage*: a
connection that resumes from a handle continues it, a fresh session (first connection or
rebuild) starts a new one. Within a lineage a handle is a snapshot, so resuming from a handle
issued before a call loses that call too.

:class:`ToolCallTracker` follows each call from the server's ``toolCall`` to the write of its
response, and answers:

- whether a move should wait (:attr:`ToolCallTracker.busy`: a blocking call awaits its result,
  or a result awaits its write) — a planned move does not happen then unless the deadline
  forces it. A non-blocking call (the model talks on while it runs) holds no answer, so it
  holds no move either; its result still goes only to a session that issued it;
- after a move, which open calls the new session does not know
  (:meth:`ToolCallTracker.connected` returns them): the transport ends their generation with a
  reason saying so, withdraws any result of theirs it still holds, and lets the framework ask
  again;
- whether a result the framework hands over may be sent (:meth:`ToolCallTracker.result_submitted`):
  a late result of an orphaned or cancelled call is refused.

It holds no I/O; it sees events only from the live connection (others are ignored, and the
calls return False so the transport can skip them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from loguru import logger

from realtime_resumption.handles import HandleRef
from realtime_resumption.redaction import redact
from realtime_resumption.transport import ToolCall, ToolCallOrphanedError, UnknownToolCallError


class CallState(StrEnum):
    """Where an open call stands."""

    PENDING = "pending"
    """Issued; the framework has not produced its result yet."""
    RESULT_UNSENT = "result_unsent"
    """The result is accepted but not yet written to a connection."""
    RESULT_SENT = "result_sent"
    """The result was written."""


class ResultVerdict(StrEnum):
    """What to do with a result the framework hands over."""

    SEND = "send"
    """The live session issued the call and waits for this result."""
    ORPHANED = "orphaned"
    """Issued by a session the transport left (rebuilt, or resumed from before the call)."""
    CANCELLED = "cancelled"
    """The server cancelled the call (toolCallCancellation)."""
    DUPLICATE = "duplicate"
    """A result for this call was already accepted."""
    UNKNOWN = "unknown"
    """No such call was issued (or it was forgotten long ago): do not send it."""


@dataclass(frozen=True)
class TrackedCall:
    """An open tool call."""

    id: str
    name: str
    connection: int
    """The connection the call arrived on."""
    lineage: int
    """The server session lineage that issued it (see the module documentation)."""
    issued_at: float
    state: CallState
    blocking: bool = True
    """The model holds its answer until the result comes (False: a non-blocking call, whose
    answer went on without it)."""


@dataclass(frozen=True, eq=False)
class _Snapshot:
    handle: HandleRef
    known: frozenset[str]

    def __repr__(self) -> str:
        return f"_Snapshot(handle={redact(self.handle)}, known={len(self.known)})"


class ToolCallTracker:
    """Tracks the tool calls of one session; see the module documentation.

    ``max_handles`` handles are kept as snapshots (as many as the outbox keeps); a resume from
    any other handle is treated as knowing no open call. ``remember_closed`` closed call ids
    are kept so a late result gets an exact verdict.
    """

    def __init__(self, *, max_handles: int = 8, remember_closed: int = 256) -> None:
        if max_handles < 1 or remember_closed < 1:
            raise ValueError("max_handles and remember_closed must be >= 1")
        self._max_handles = max_handles
        self._remember_closed = remember_closed
        self._calls: dict[str, TrackedCall] = {}
        self._closed: OrderedDict[str, ResultVerdict] = OrderedDict()
        self._snapshots: OrderedDict[HandleRef, _Snapshot] = OrderedDict()
        self._live: int | None = None
        self._lineage = 0
        self._non_blocking: frozenset[str] = frozenset()

    def declared(self, non_blocking: frozenset[str]) -> None:
        """The functions whose calls do not hold the answer, as the live connection's setup
        declares them (``live_models.non_blocking_functions``); calls issued from now on."""
        self._non_blocking = non_blocking

    def non_blocking(self, function: str) -> bool:
        """Whether a call of ``function`` issued now would be non-blocking."""
        return function in self._non_blocking

    @property
    def lineage(self) -> int:
        """The current server session lineage (0 before the first connection)."""
        return self._lineage

    @property
    def live_connection(self) -> int | None:
        """The connection whose events count."""
        return self._live

    @property
    def busy(self) -> bool:
        """A blocking call awaits its result, or a result awaits its write: a planned move
        waits. A non-blocking call that runs holds nothing."""
        return any(
            c.state is CallState.RESULT_UNSENT or (c.blocking and c.state is CallState.PENDING)
            for c in self._calls.values()
        )

    @property
    def open_calls(self) -> tuple[TrackedCall, ...]:
        """Every call still tracked, in issue order."""
        return tuple(self._calls.values())

    def pending_ids(self) -> list[str]:
        """Calls whose result the framework has not produced yet."""
        return [c.id for c in self._calls.values() if c.state is CallState.PENDING]

    def unsent_ids(self) -> list[str]:
        """Calls whose result is accepted but not yet written."""
        return [c.id for c in self._calls.values() if c.state is CallState.RESULT_UNSENT]

    def connected(self, connection: int, *, resumed_from: HandleRef | None) -> list[str]:
        """``connection`` took over the session, resumed from a handle or (None) as a fresh
        session. Returns the ids of tracked calls the new session never issued (orphaned), in
        issue order: their results must not be sent, and one already written must be
        withdrawn from the outbox (the snapshot resumed from predates the call, so the
        outbox would replay it). A call in the list may belong to a generation that is
        already over."""
        self._live = connection
        if resumed_from is None:
            orphaned = list(self._calls)
            self._lineage += 1
            self._snapshots.clear()
        else:
            snapshot = self._snapshots.get(resumed_from)
            if snapshot is None:
                logger.warning(
                    "resumed from {}, a handle with no tool-call snapshot: treating every open "
                    "call as orphaned",
                    redact(resumed_from),
                )
                known: frozenset[str] = frozenset()
            else:
                known = snapshot.known
            orphaned = [call_id for call_id in self._calls if call_id not in known]
        for call_id in orphaned:
            self._close(call_id, ResultVerdict.ORPHANED)
        return orphaned

    def known_at(self, handle: HandleRef) -> frozenset[str]:
        """The calls a session resumed from ``handle`` knows (none for an unknown handle)."""
        snapshot = self._snapshots.get(handle)
        return snapshot.known if snapshot is not None else frozenset()

    def calls_issued(self, calls: Iterable[ToolCall], connection: int, now: float) -> bool:
        """The server asked for ``calls`` on ``connection``. Returns False (and tracks
        nothing) when that is not the live connection: those calls must not run."""
        if connection != self._live:
            return False
        for call in calls:
            if call.id in self._calls or call.id in self._closed:
                logger.warning("tool call {} issued twice; keeping the first", call.id)
                continue
            self._calls[call.id] = TrackedCall(
                call.id,
                call.name,
                connection,
                self._lineage,
                now,
                CallState.PENDING,
                blocking=call.name not in self._non_blocking,
            )
        return True

    def orphan(self, ids: Iterable[str]) -> list[str]:
        """The answer these calls belong to was cut (a move left its connection while they
        were open): a resumed session does not continue it, so their results must not be
        sent. Returns the ids that were open. Non-blocking calls are kept: no answer waits
        for them, and a session resumed from a handle that knows one takes its result
        (:meth:`connected` decides)."""
        orphaned = [
            call_id for call_id in ids if call_id in self._calls and self._calls[call_id].blocking
        ]
        for call_id in orphaned:
            self._close(call_id, ResultVerdict.ORPHANED)
        return orphaned

    def calls_cancelled(self, ids: Iterable[str], connection: int) -> list[str]:
        """The server cancelled ``ids`` (toolCallCancellation) on ``connection``. Returns the
        ids that were open: any result of theirs not yet written must be withdrawn."""
        if connection != self._live:
            return []
        cancelled = [call_id for call_id in ids if call_id in self._calls]
        for call_id in cancelled:
            self._close(call_id, ResultVerdict.CANCELLED)
        return cancelled

    def result_submitted(self, call_id: str) -> ResultVerdict:
        """The framework produced the result of ``call_id``: may it be sent? On SEND the
        call's result counts as unsent until :meth:`result_sent`."""
        call = self._calls.get(call_id)
        if call is None:
            return self._closed.get(call_id, ResultVerdict.UNKNOWN)
        if call.state is not CallState.PENDING:
            return ResultVerdict.DUPLICATE
        self._calls[call_id] = replace(call, state=CallState.RESULT_UNSENT)
        return ResultVerdict.SEND

    def admit_result(self, call_id: str) -> bool:
        """The framework hands over the result of ``call_id``: True when it goes to the live
        session (it counts as unsent until :meth:`result_sent`), False when it is not sent (the
        server cancelled the call, or a result of it was taken already: logged). Raises
        ``ToolCallOrphanedError`` for a call of a session a move left behind and
        ``UnknownToolCallError`` for one no session issued: sending either would strand the
        model."""
        verdict = self.result_submitted(call_id)
        if verdict is ResultVerdict.ORPHANED:
            raise ToolCallOrphanedError(call_id)
        if verdict is ResultVerdict.UNKNOWN:
            raise UnknownToolCallError(
                f"no tool call {call_id!r} was issued by this session: its result would "
                "strand the model"
            )
        if verdict is not ResultVerdict.SEND:
            logger.info("result of tool call {} not sent ({})", call_id, verdict)
            return False
        return True

    def results_refused(self, call_ids: Iterable[str]) -> None:
        """The accepted results of ``call_ids`` were dropped (the SDK refused them, or the
        service refused them as too big): the calls wait for a result again, and a new one
        is sent."""
        for call_id in call_ids:
            call = self._calls.get(call_id)
            if call is not None and call.state is not CallState.PENDING:
                self._calls[call_id] = replace(call, state=CallState.PENDING)

    def result_sent(self, call_id: str) -> None:
        """The result of ``call_id`` was written to the live connection (again, after a
        replay: repeats change nothing)."""
        call = self._calls.get(call_id)
        if call is None or call.state is CallState.PENDING:
            return
        self._calls[call_id] = replace(call, state=CallState.RESULT_SENT)
        self._forget_settled()

    def handle_recorded(
        self, handle: HandleRef, connection: int, *, resumable: bool = True
    ) -> bool:
        """A resumption handle arrived on ``connection``: remember which calls its snapshot
        holds. Returns False (records nothing) for a non-resumable handle or another
        connection than the live one."""
        if not resumable or not handle or connection != self._live:
            return False
        self._snapshots.pop(handle, None)
        self._snapshots[handle] = _Snapshot(handle, frozenset(self._calls))
        while len(self._snapshots) > self._max_handles:
            self._snapshots.popitem(last=False)
        self._forget_settled()
        return True

    def clear(self) -> None:
        """Forget everything (the session is closed)."""
        self._calls.clear()
        self._closed.clear()
        self._snapshots.clear()
        self._live = None

    def __repr__(self) -> str:
        return (
            f"ToolCallTracker(live={self._live}, lineage={self._lineage}, "
            f"open={len(self._calls)}, busy={self.busy})"
        )

    def _close(self, call_id: str, verdict: ResultVerdict) -> None:
        del self._calls[call_id]
        self._closed[call_id] = verdict
        self._closed.move_to_end(call_id)
        while len(self._closed) > self._remember_closed:
            self._closed.popitem(last=False)

    def _forget_settled(self) -> None:
        """A call whose result was written and which every kept snapshot holds can no longer
        be orphaned: stop tracking it."""
        snapshots = list(self._snapshots.values())
        settled = [
            call.id
            for call in self._calls.values()
            if call.state is CallState.RESULT_SENT
            and all(call.id in snapshot.known for snapshot in snapshots)
        ]
        for call_id in settled:
            self._close(call_id, ResultVerdict.DUPLICATE)
