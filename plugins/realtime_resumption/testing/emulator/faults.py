"""Scripted faults: goAway now or at a chosen moment, a deadline close without goAway, drops,
refused, hanging, slow and dead attempts, a flapping server, and raw frames.

Every fault can be set from synchronous code. Those that act on live connections return an
``Applied``: its ``count`` says how many connections the fault reached, and awaiting it waits
until each of them has carried it out (the goAway written, the close sent).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from .config import EmulatorConfig

RefusalHow = Literal["http401", "http403", "http429", "http503", "close1011"]
REFUSALS: tuple[RefusalHow, ...] = ("http401", "http403", "http429", "http503", "close1011")
TriggerEvent = Literal["chunk", "tool_call", "idle"]
NoticeDefault = Literal["notice"]


class FaultTarget(Protocol):
    """A live connection, as faults see it."""

    @property
    def session_id(self) -> str | None:
        """The session the connection serves (None before setup)."""

    def go_away(
        self, time_left: float | None, *, close_at_deadline: bool, silence: bool
    ) -> asyncio.Task[None] | None:
        """Send goAway (scheduled on the connection); None if the connection is closing."""

    def close_with(self, code: int, reason: str) -> asyncio.Task[None] | None:
        """Close the connection with ``code`` (scheduled); None if already closing."""

    def deadline_close(self) -> asyncio.Task[None] | None:
        """End the connection's life now, without a goAway (scheduled); None if closing."""

    def drop(self) -> None:
        """Abort the TCP connection without a close frame."""

    def send_raw(self, frame: str | bytes) -> asyncio.Task[None] | None:
        """Send ``frame`` as it is (scheduled); None if the connection is closing."""


class Applied:
    """How many connections a fault reached; ``await`` it to wait until it was carried out."""

    def __init__(self, tasks: list[asyncio.Task[None]]) -> None:
        self._tasks = tasks

    @property
    def count(self) -> int:
        """The number of connections the fault reached."""
        return len(self._tasks)

    def __await__(self) -> Generator[object, None, int]:
        return self._wait().__await__()

    async def _wait(self) -> int:
        if self._tasks:
            await asyncio.wait(self._tasks)
        return len(self._tasks)

    def __repr__(self) -> str:
        return f"Applied(count={self.count})"


@dataclass(frozen=True)
class DeadResume:
    """A resumed connection that never answers (``Faults.dead_after_resume``)."""

    first_update: bool
    """It still sends its first resumption update."""


@dataclass(frozen=True)
class Flap:
    """What a flapping server does to each new connection (``Faults.flap``)."""

    close_after: float | None
    """Close this long (unscaled) after setupComplete; None: no timed close."""
    code: int
    drop_on_first_message: bool
    """Abort the connection right after the client's first message following setup."""


@dataclass
class _SlowSetups:
    count: int
    seconds: float
    resumed_only: bool


@dataclass
class GoAwayTrigger:
    """A goAway scripted for a moment of the conversation; it fires once."""

    turn: int | None
    chunk: int | None
    on_tool_call: bool
    when_idle: bool
    time_left: float | None
    session_id: str | None
    close_at_deadline: bool
    silence: bool

    def matches(
        self, event: TriggerEvent, session_id: str, turn: int | None, chunk: int | None
    ) -> bool:
        """Whether this trigger fires at ``event``."""
        if self.session_id is not None and self.session_id != session_id:
            return False
        if self.turn is not None and self.turn != turn:
            return False
        if event == "chunk":
            return not (self.on_tool_call or self.when_idle) and (
                self.chunk is None or self.chunk == chunk
            )
        if event == "tool_call":
            return self.on_tool_call
        return self.when_idle


class Faults:
    """The scripted faults of one emulator (``emu.faults``)."""

    def __init__(
        self,
        config: EmulatorConfig,
        targets: Callable[[], Iterable[FaultTarget]],
        expire: Callable[[], int],
    ) -> None:
        self._config = config
        self._targets = targets
        self._expire = expire
        self._refusals: deque[RefusalHow] = deque()
        self._refuse_all: RefusalHow | None = None
        self._hangs = 0
        self._slow: deque[_SlowSetups] = deque()
        self._flap: Flap | None = None
        self._flaps_left: int | None = None
        self._dead: deque[DeadResume] = deque()
        self._triggers: list[GoAwayTrigger] = []

    @property
    def refuse_resume_while_open(self) -> bool:
        """``EmulatorConfig.refuse_resume_while_open`` (on by default), settable here while
        the emulator runs."""
        return self._config.refuse_resume_while_open

    @refuse_resume_while_open.setter
    def refuse_resume_while_open(self, refuse: bool) -> None:
        self._config.refuse_resume_while_open = refuse

    def _time_left(self, time_left: float | NoticeDefault | None) -> float | None:
        return self._config.notice if time_left == "notice" else time_left

    def _select(self, session_id: str | None) -> list[FaultTarget]:
        return [
            t
            for t in self._targets()
            if t.session_id is not None and session_id in (None, t.session_id)
        ]

    def go_away(
        self,
        time_left: float | NoticeDefault | None = "notice",
        *,
        session_id: str | None = None,
        close_at_deadline: bool = True,
        silence: bool = False,
    ) -> Applied:
        """Send goAway now to every live connection (or ``session_id``'s).

        ``time_left`` is in seconds before ``time_scale`` applies (the wire carries the scaled
        figure, and the close comes at the scaled deadline); it defaults to the configured
        notice; None sends ``{}`` (no figure, and the close comes after the configured notice).
        With ``close_at_deadline`` the connection is closed at the deadline, with the profile's
        close code; with ``silence`` it sends nothing more after the goAway.
        """
        left = self._time_left(time_left)
        tasks = [
            task
            for t in self._select(session_id)
            if (task := t.go_away(left, close_at_deadline=close_at_deadline, silence=silence))
        ]
        return Applied(tasks)

    def go_away_at(
        self,
        *,
        turn: int | None = None,
        chunk: int | None = None,
        on_tool_call: bool = False,
        when_idle: bool = False,
        time_left: float | NoticeDefault | None = "notice",
        session_id: str | None = None,
        close_at_deadline: bool = True,
        silence: bool = False,
    ) -> None:
        """Script a goAway for a moment of the conversation; it fires once.

        - ``turn``/``chunk``: right after chunk ``chunk`` of answer turn ``turn`` was sent
          (``turn`` alone: after the turn's first chunk sent; ``chunk`` alone: in any turn).
        - ``on_tool_call``: right after a toolCall (of ``turn``, if given) was sent.
        - ``when_idle``: when a connection next becomes idle after an answer (after the
          answer's resumption handle, if any).

        Answer turns are numbered from 0 in each session, across its connections.
        ``time_left``, ``close_at_deadline`` and ``silence`` are as for ``go_away``.
        """
        if turn is None and chunk is None and not on_tool_call and not when_idle:
            raise ValueError("go_away_at needs turn, chunk, on_tool_call or when_idle")
        if on_tool_call and when_idle:
            raise ValueError("choose one of on_tool_call and when_idle")
        self._triggers.append(
            GoAwayTrigger(
                turn=turn,
                chunk=chunk,
                on_tool_call=on_tool_call,
                when_idle=when_idle,
                time_left=self._time_left(time_left),
                session_id=session_id,
                close_at_deadline=close_at_deadline,
                silence=silence,
            )
        )

    def deadline_close(self, *, session_id: str | None = None) -> Applied:
        """End the life of every live connection (or ``session_id``'s) now, as a rotation with
        ``rotate_without_go_away`` does at its age: the profile's deadline close (Gemini 1011
        "Deadline expired ...", Vertex 1000) with no goAway before it, and, with
        ``refuse_resume_after_deadline``, every later resume of the session refused."""
        tasks = [task for t in self._select(session_id) if (task := t.deadline_close())]
        return Applied(tasks)

    def drop(self, session_id: str | None = None) -> int:
        """Abort the TCP connection of every live connection (or ``session_id``'s): the client
        sees close code 1006. Returns how many were dropped."""
        targets = self._select(session_id)
        for t in targets:
            t.drop()
        return len(targets)

    def close(self, code: int, reason: str = "", *, session_id: str | None = None) -> Applied:
        """Close every live connection (or ``session_id``'s) with ``code`` and ``reason``."""
        tasks = [task for t in self._select(session_id) if (task := t.close_with(code, reason))]
        return Applied(tasks)

    def refuse_next(self, n: int = 1, how: RefusalHow = "http503") -> None:
        """Refuse the next ``n`` connection attempts: ``http401``, ``http403``, ``http429`` or
        ``http503`` refuse the WebSocket upgrade with that HTTP status; ``close1011`` closes
        1011 right after setupComplete."""
        _check_refusal(how)
        if n < 0:
            raise ValueError("n must be >= 0")
        self._refusals.extend([how] * n)

    def refuse_all(self, how: RefusalHow | None = "http503") -> None:
        """Refuse every attempt from now on (after the ``refuse_next`` ones) as ``how``
        describes (see ``refuse_next``); None accepts attempts again."""
        if how is not None:
            _check_refusal(how)
        self._refuse_all = how

    def slow_setups(self, n: int, seconds: float, *, resumed_only: bool = False) -> None:
        """The next ``n`` setups (only resumed ones, a setup with a handle, with
        ``resumed_only``) take ``seconds`` (unscaled) instead of ``setup_latency``, as the
        service's reported 4-8 s "reconnect penalty" does. Refused setups count too, except a
        resume refused while its session is open before setupComplete (it takes no time)."""
        if n < 0:
            raise ValueError("n must be >= 0")
        if not seconds >= 0:
            raise ValueError("seconds must be >= 0")
        if n:
            self._slow.append(_SlowSetups(n, seconds, resumed_only))

    def flap(
        self,
        *,
        close_after: float | None = None,
        code: int = 1011,
        drop_on_first_message: bool = False,
        n: int | None = None,
    ) -> None:
        """A flapping server: each connection set up from now on (the next ``n``, or every
        one until ``clear()``) is closed with ``code`` ``close_after`` seconds (unscaled)
        after its setupComplete, and/or aborted (1006) right after the client's first message
        following setup (``drop_on_first_message``)."""
        if close_after is None and not drop_on_first_message:
            raise ValueError("flap needs close_after or drop_on_first_message")
        if close_after is not None and not close_after >= 0:
            raise ValueError("close_after must be >= 0")
        if not 1000 <= code <= 4999:
            raise ValueError("code must be a WebSocket close code (1000-4999)")
        if n is not None and n < 0:
            raise ValueError("n must be >= 0 or None")
        self._flap = Flap(close_after, code, drop_on_first_message) if n != 0 else None
        self._flaps_left = n

    def send_raw(self, frame: str | bytes, *, session_id: str | None = None) -> Applied:
        """Send ``frame`` unchanged to every live connection (or ``session_id``'s): a str as
        a text frame, bytes as a binary frame. For what a strict client must survive: valid
        JSON that is not an object (``"[1, 2]"``, ``'"str"'``), JSON nested too deep
        (``"[" * 100_000 + "]" * 100_000``), invalid JSON, unknown keys. It travels in order
        with the connection's other frames."""
        if not isinstance(frame, str | bytes):
            raise TypeError(f"frame must be str or bytes, not {type(frame).__name__}")
        tasks = [task for t in self._select(session_id) if (task := t.send_raw(frame))]
        return Applied(tasks)

    def hang_next(self, n: int = 1) -> None:
        """Accept the next ``n`` attempts and their setup, but never send setupComplete."""
        if n < 0:
            raise ValueError("n must be >= 0")
        self._hangs += n

    def dead_after_resume(self, n: int = 1, *, first_update: bool = True) -> None:
        """The next ``n`` resumed connections (a setup with a valid handle) are set up and send
        their first resumption update (unless ``first_update`` is False: then nothing at all
        follows setupComplete), then never answer anything: no transcription, no model output,
        no turnComplete, no further update. Every client message is recorded in the ledger
        (user audio counts as received, not consumed). goAway, close and drop faults still
        apply. The connection's ledger record is marked ``dead``."""
        if n < 0:
            raise ValueError("n must be >= 0")
        self._dead.extend([DeadResume(first_update)] * n)

    def expire_handles(self) -> int:
        """Every handle issued so far becomes expired; returns how many were still valid."""
        return self._expire()

    def clear(self) -> None:
        """Forget pending refusals (``refuse_all`` too), hangs, slow setups, dead resumes,
        flapping and scripted goAways."""
        self._refusals.clear()
        self._refuse_all = None
        self._hangs = 0
        self._slow.clear()
        self._dead.clear()
        self._flap = None
        self._flaps_left = None
        self._triggers.clear()

    # Used by the server and its connections.

    def take_upgrade_refusal(self) -> int | None:
        """The HTTP status to refuse this upgrade with, if the next refusal is one."""
        how = self._next_refusal()
        if how is None or how == "close1011":
            return None
        self._consume_refusal()
        return int(how.removeprefix("http"))

    def take_setup_refusal(self) -> bool:
        """Whether to close 1011 right after this setupComplete (the next refusal is one)."""
        if self._next_refusal() != "close1011":
            return False
        self._consume_refusal()
        return True

    def _next_refusal(self) -> RefusalHow | None:
        return self._refusals[0] if self._refusals else self._refuse_all

    def _consume_refusal(self) -> None:
        if self._refusals:
            self._refusals.popleft()

    def take_setup_latency(self, *, resumed: bool) -> float | None:
        """The unscaled latency of this setup if a ``slow_setups`` fault covers it."""
        for slow in self._slow:
            if resumed or not slow.resumed_only:
                slow.count -= 1
                if not slow.count:
                    self._slow.remove(slow)
                return slow.seconds
        return None

    def take_flap(self) -> Flap | None:
        """The flapping this newly set up connection gets, if any."""
        flap = self._flap
        if flap is None:
            return None
        if self._flaps_left is not None:
            self._flaps_left -= 1
            if self._flaps_left <= 0:
                self._flap = self._flaps_left = None
        return flap

    def take_hang(self) -> bool:
        """Consume a pending hang."""
        if self._hangs:
            self._hangs -= 1
            return True
        return False

    def take_dead(self) -> DeadResume | None:
        """Consume a pending dead resume."""
        return self._dead.popleft() if self._dead else None

    def take_trigger(
        self, event: TriggerEvent, session_id: str, turn: int | None, chunk: int | None = None
    ) -> GoAwayTrigger | None:
        """The first scripted goAway that fires at ``event`` (removed: it fires once)."""
        for i, trigger in enumerate(self._triggers):
            if trigger.matches(event, session_id, turn, chunk):
                return self._triggers.pop(i)
        return None


def _check_refusal(how: str) -> None:
    if how not in REFUSALS:
        raise ValueError(f"how must be one of {REFUSALS}, not {how!r}")
