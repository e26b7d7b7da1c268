"""The plugin's own event, beside those of ``llm.RealtimeSession``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from realtime_resumption.move_reports import MoveReport

SessionMoved = Literal["session_moved"]
"""``RealtimeSession`` emits ``session_moved`` with a :class:`SessionMovedEvent`."""


@dataclass(frozen=True)
class SessionMovedEvent:
    """The session moved to a new connection (``session.on("session_moved", ...)``).

    ``report.outcome`` says how: ``resumed`` (the server kept the conversation), ``rebuilt``
    (a fresh server session seeded with the conversation so far, after a refused or expired
    handle) or ``lost`` (the session is over; an ``error`` event with ``recoverable=False``
    follows). ``report.reason`` says why (``planned`` at a goAway, ``lost`` after a drop,
    ``config`` for new instructions, tools or voice, ``requested``), and ``report.gap_ms``
    how long no connection took input. A resumed or rebuilt move is followed by
    ``session_reconnected``.
    """

    report: MoveReport
