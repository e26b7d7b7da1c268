"""Sessions that outlive connections, and the resumption handles that point into them."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, Protocol

from ...redaction import redact
from .ledger import HandleRecord, Ledger, SessionRecord
from .snapshot import SessionState, Snapshot

SessionEnd = Literal["session-ended", "deadline"]
"""Why a session ended for good (the ledger's refusal reason for a later resume of it)."""


class Served(Protocol):
    """A connection of a session, as the session keeps it (``served_connection.Connection``)."""

    @property
    def serving(self) -> bool:
        """Set up, and neither side has started closing it."""
        ...

    def close_with(self, code: int, reason: str) -> object:
        """Close with ``code`` and ``reason`` (without waiting)."""
        ...


@dataclass
class HandleEntry:
    """A handle the service issued: the session and the snapshot it stands for."""

    token: str
    session: Session
    record: HandleRecord

    def __repr__(self) -> str:
        return f"HandleEntry({redact(self.token)}, session={self.session.id})"


class Session:
    """A conversation that lives on across connections.

    Its state lives on each connection (a resumed connection starts from a snapshot, so two
    open connections of one session can diverge); the session keeps what is shared: its id,
    the handles issued, the call ids issued, and counters that keep turn and call ids unique.
    """

    def __init__(self, session_id: str, record: SessionRecord) -> None:
        self.id = session_id
        self.record = record
        self.open: set[Served] = set()
        """Its connections that were set up and have not ended."""
        self.issued_calls: set[str] = set()
        self._next_turn = 0
        self._next_call = 0
        self._connected = 0.0
        self._since: float | None = None
        self.ended_at: float | None = None
        """When its last open connection ended (None while one is open, or before any)."""
        self.took_video = False
        """It was sent video input, on any of its connections."""
        self.ended_why: SessionEnd | None = None
        """Why the session ended for good, its handles refused from then on: ``session-ended``
        (it reached its cap) or ``deadline`` (a connection's life ended without a goAway,
        with ``refuse_resume_after_deadline``). None while it can be resumed."""

    def attach(self, conn: Served, now: float) -> None:
        """``conn`` was set up: it serves the session from ``now``."""
        if not self.open:
            self._since, self.ended_at = now, None
        self.open.add(conn)

    def detach(self, conn: Served, now: float) -> None:
        """``conn`` ended at ``now``."""
        if conn not in self.open:
            return
        self.open.discard(conn)
        if not self.open and self._since is not None:
            self._connected += now - self._since
            self._since, self.ended_at = None, now

    def session_time(self, now: float) -> float:
        """How long the session has had a connection open (overlaps counted once)."""
        return self._connected + (now - self._since if self._since is not None else 0.0)

    def end(self, why: SessionEnd, now: float) -> bool:
        """The session ends for good at ``now`` (see ``ended_why``); False if it already had."""
        if self.ended_why is not None:
            return False
        self.ended_why = why
        if why == "session-ended":
            self.record.capped_at = now
        return True

    def valid_at(self, now: float, validity: float) -> bool:
        """Whether the session's handles are valid at ``now``: while a connection is open,
        and for ``validity`` after the last one ended (a session that ended for good, at its
        cap or at a deadline close, has none)."""
        if self.ended_why is not None:
            return False
        return self.ended_at is None or now - self.ended_at <= validity

    def new_turn(self) -> int:
        """A new answer turn id (unique within the session, across resumes)."""
        turn = self._next_turn
        self._next_turn += 1
        return turn

    def new_call_id(self) -> str:
        """A new function call id (unique within the session, across resumes)."""
        call_id = f"fc-{self.id}-{self._next_call}"
        self._next_call += 1
        self.issued_calls.add(call_id)
        self.record.tool_calls_issued.append(call_id)
        return call_id

    def adopt(self, state: SessionState) -> None:
        """``state`` (a newly set up connection's) is now the session's latest."""
        self.record.state = state


class SessionRegistry:
    """Every session and handle of one emulator."""

    def __init__(self, ledger: Ledger, rng: random.Random) -> None:
        self._ledger = ledger
        self._rng = rng
        self.sessions: dict[str, Session] = {}
        self._handles: dict[str, HandleEntry] = {}

    def _token(self, nbytes: int) -> str:
        return self._rng.randbytes(nbytes).hex()

    def new_session(self) -> Session:
        """A fresh session with a new id."""
        session_id = f"emu-{len(self.sessions):04d}-{self._token(4)}"
        session = Session(session_id, self._ledger.session(session_id))
        self.sessions[session_id] = session
        return session

    def issue_handle(
        self,
        session: Session,
        snapshot: Snapshot,
        *,
        now: float,
        connection: int,
        last_consumed_index: int | None,
        consumed_through: int,
        input_waiting: int,
    ) -> HandleEntry:
        """A new handle standing for ``snapshot`` (see ``HandleRecord`` for the rest)."""
        token = self._token(24)
        record = HandleRecord(
            index=len(session.record.handles),
            redacted=redact(token),
            issued_at=now,
            connection=connection,
            last_consumed_index=last_consumed_index,
            snapshot=snapshot,
            consumed_through=consumed_through,
            input_waiting=input_waiting,
        )
        session.record.handles.append(record)
        entry = self._handles[token] = HandleEntry(token, session, record)
        return entry

    def resolve(
        self, token: str, *, now: float, validity: float, lifetime: float | None
    ) -> HandleEntry | None:
        """The entry of a valid handle; None when unknown or expired: its session ended more
        than ``validity`` ago (or reached its cap), or, with a ``lifetime``, the handle was
        issued more than that ago."""
        entry = self._handles.get(token)
        if entry is None or entry.record.expired:
            return None
        stale = lifetime is not None and now - entry.record.issued_at > lifetime
        if stale or not entry.session.valid_at(now, validity):
            entry.record.expired = True
            return None
        return entry

    def known(self, token: str) -> HandleEntry | None:
        """The entry of any handle ever issued, valid or not."""
        return self._handles.get(token)

    def expire_all(self) -> int:
        """Expire every handle issued so far; returns how many were still valid."""
        count = 0
        for entry in self._handles.values():
            if not entry.record.expired:
                entry.record.expired = True
                count += 1
        return count
