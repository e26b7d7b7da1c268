"""The figures of one lane's call, from the emulator's ledger and from what the caller heard.

Nothing here trusts the stack's own account: answers are counted from the answer-chunk ids
the caller heard played, user audio from the sequence numbers the emulator's session kept.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from realtime_resumption.testing.emulator.caller import SentAudio
from realtime_resumption.testing.emulator.ledger import (
    ConnectionRecord,
    LedgerSummary,
    SessionRecord,
)

from .call import AFTER_MOVE, DURING_MOVE, FINAL, MIC_CHUNK, Asked, Heard
from .run import LaneRun

# The ledger stamps a delivery once written; the ear's clock starts a moment after the
# emulator's: a chunk can be heard a few milliseconds "before" its delivery was stamped.
_CLOCK_SLACK = 0.25
# A framework may hold the last partial chunk of its input when the call hangs up (LiveKit
# sends 50 ms chunks): the microphone's last moments are not counted as lost.
_HANG_UP = 0.2


@dataclass(frozen=True)
class Move:
    """What a fault made the stack do: a new connection, or none."""

    cause: str
    """``goAway``, ``deadline`` (the connection's life ended without a goAway) or ``drop``; on
    the OpenAI call ``cap`` (the service closed the session at its cap), ``planned`` (ours
    moved before it) or ``restart`` (stock LiveKit's ``max_session_duration``)."""
    at: float
    """When the fault reached the stack (ledger clock)."""
    recovered_at: float | None
    """setupComplete of the connection that replaced the lost one (None: never)."""
    resumed: bool
    """The new connection resumed the session (its context kept)."""
    input_stall: float
    """Longest the service went without user audio around the switch (seconds): the
    emulator's own figure for the move; for a move to a new session (a rebuild), from the last
    audio before the fault to the first on the replacement; for a move that never recovered,
    from the last audio it got to the next fault (or the end of the call)."""
    audio_lost: float
    """Seconds of microphone audio lost that were sent after the previous move recovered
    (or the call began) and before this one did (or the call ended)."""


@dataclass(frozen=True)
class Figures:
    """Every figure of one lane."""

    key: str
    title: str
    ours: bool
    answers_cut: int
    user_audio_lost: float
    """Seconds of microphone audio the service never kept."""
    user_speech_lost: float
    """Of those, seconds of speech."""
    answer_audio_heard_twice: float
    """Seconds of answer audio the caller heard more than once."""
    user_audio_heard_twice: float
    """Seconds of user audio the service's final state holds twice."""
    tool_calls_stranded: int
    """Tool calls never answered to the session that made them, plus results sent to a
    session that never made the call."""
    tool_results_resent: int
    """Results sent again for a call already answered."""
    survived: bool
    moves: tuple[Move, ...]
    move_question_delay: float | None
    """From the end of the question asked during the move to its answer heard (None: never)."""
    at_rest_delay: float | None
    """The same for a question asked with no move under way."""
    errors: tuple[tuple[float, str], ...]
    """(when, text) of each error the stack surfaced to the application (ledger clock)."""
    questions: int
    answered: int
    duration: float
    cut_turns: tuple[int, ...] = field(default=())
    answers_cut_without_notice: int = 0
    """Of ``answers_cut``, those the service cut itself by closing their connection with no
    goAway before (gemini-3.8-live's deadline close): no client can keep such an answer."""
    answers_complete: int | None = None
    """Spoken answers the caller heard whole (None: not counted)."""
    recalled: bool | None = None
    """The last answer said again a word the caller said early (None: the call did not ask)."""
    alive_after_caps: tuple[bool, ...] = ()
    """For each cap the call passed: a question asked after it was answered."""
    ledger: dict[str, int] = field(default_factory=dict)
    """The emulator's own account of the call, as its ledger summary counts it."""

    @property
    def lost_anything(self) -> bool:
        """Something the caller said or should have heard is gone, or the call died. (Silence
        is not something said: a move does not replay silence in the window where the service's
        snapshot may or may not hold it.)"""
        return bool(
            self.answers_cut > self.answers_cut_without_notice
            or self.user_speech_lost
            or self.tool_calls_stranded
            or not self.survived
            or self.answered < self.questions
            or self.recalled is False
            or not all(self.alive_after_caps)
        )

    def to_json(self) -> dict[str, Any]:
        """The figures as plain JSON values (seconds rounded to milliseconds)."""
        data = asdict(self)
        data["lost_anything"] = self.lost_anything
        return _rounded(data)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _connections(run: LaneRun) -> list[tuple[SessionRecord, ConnectionRecord]]:
    return [(s, c) for s in run.ledger.sessions.values() for c in s.connections]


def attribute_heard(run: LaneRun) -> list[tuple[str, Heard]]:
    """Each heard chunk with the session that delivered it (turn numbers repeat across
    sessions): the latest delivery of that (turn, chunk) before it was heard."""
    deliveries: dict[tuple[int, int], list[tuple[float, str]]] = {}
    for session, conn in _connections(run):
        for m in conn.server_messages:
            if m.kind == "audio" and m.delivered and m.turn is not None and m.chunk is not None:
                deliveries.setdefault((m.turn, m.chunk), []).append((m.time, session.session_id))
    for times in deliveries.values():
        times.sort()
    attributed = []
    for heard in run.ear.chunks:
        times = deliveries.get((heard.turn, heard.chunk), [])
        i = bisect.bisect_right(times, (heard.at + _CLOCK_SLACK, "\uffff"))
        if i:
            attributed.append((times[i - 1][1], heard))
    return attributed


def _closed_without_notice(conn: ConnectionRecord) -> bool:
    """The service closed ``conn`` without a goAway first (not a drop, not the client)."""
    return conn.closed_by == "server" and all(m.kind != "go_away" for m in conn.server_messages)


def _answers(run: LaneRun) -> tuple[list[int], list[int], float]:
    """(cut turns, those cut by a close without notice, seconds of answer audio heard
    twice)."""
    heard = Counter((sid, h.turn, h.chunk) for sid, h in attribute_heard(run))
    cut = []
    unwarned = []
    for session in run.ledger.sessions.values():
        for turn in session.turns.values():
            if turn.produced == 0 or turn.outcome in ("interrupted", "running"):
                continue
            missing = any(
                (session.session_id, turn.turn, k) not in heard for k in range(turn.produced)
            )
            if turn.outcome == "cut" or missing:
                cut.append(turn.turn)
                if _closed_without_notice(session.connections[turn.connection]):
                    unwarned.append(turn.turn)
    twice = sum(n - 1 for n in heard.values() if n > 1)
    return cut, unwarned, twice * run.config.chunk_ms / 1000


def _tools(run: LaneRun) -> tuple[int, int]:
    """(stranded, re-sent)."""
    stranded = resent = 0
    for session in run.ledger.sessions.values():
        responses = Counter(
            call_id
            for conn in session.connections
            for message in conn.client_messages
            for call_id in message.tool_response_ids
        )
        unawaited = Counter(session.unawaited_tool_responses)
        cancelled = {
            call_id
            for turn in session.turns.values()
            if turn.outcome == "interrupted"
            for call_id in turn.tool_calls
        }
        for call_id in session.tool_calls_issued:
            if call_id in cancelled:
                continue
            if responses[call_id] - unawaited[call_id] < 1:
                stranded += 1
            resent += max(0, responses[call_id] - 1)
        stranded += len(session.stranded_tool_responses)
    return stranded, resent


def _audio_arrivals(conn: ConnectionRecord) -> list[float]:
    return [m.time for m in conn.client_messages if m.audio_seqs]


def _moves(run: LaneRun, summary: LedgerSummary, lost_at: list[float]) -> list[Move]:
    conns = _connections(run)
    # The emulator's own account of each move, by the connection it moved to.
    measured = {(sid, m.to_connection): m for sid, s in summary.sessions.items() for m in s.moves}
    arrivals = sorted(t for _, c in conns for t in _audio_arrivals(c))
    faults: list[tuple[str, float]] = []
    for _, conn in conns:
        for m in conn.server_messages:
            if m.kind == "go_away" and m.delivered:
                faults.append(("goAway", m.time))
    faults += [
        (mark.kind, mark.at) for mark in run.record.marks if mark.kind in ("drop", "deadline")
    ]
    faults.sort(key=lambda f: f[1])
    moves = []
    since = 0.0
    for i, (cause, at) in enumerate(faults):
        until = faults[i + 1][1] if i + 1 < len(faults) else run.duration
        replacement = min(
            (
                (s, c)
                for s, c in conns
                if c.established and c.setup_at is not None and at < c.setup_at <= until
            ),
            key=lambda sc: sc[1].setup_at or 0.0,
            default=None,
        )
        move = (
            measured.get((replacement[0].session_id, replacement[1].index)) if replacement else None
        )
        if move is not None:
            stall = move.input_stall or 0.0
        elif replacement is not None:
            # A new session (a rebuild): the emulator measures moves within a session, so
            # the stall is read from the arrivals, the last before the fault to the first on
            # the replacement.
            setup = replacement[1].setup_at or at
            before = max((t for t in arrivals if t <= at), default=at)
            stall = min((t for t in arrivals if t >= setup), default=setup) - before
        else:
            # No replacement took input: the service heard nothing more until the next fault
            # (or the end of the call).
            stall = until - max((t for t in arrivals if t < until), default=until)
        recovered = replacement[1].setup_at if replacement is not None else None
        upto = recovered if recovered is not None and i + 1 < len(faults) else run.duration
        moves.append(
            Move(
                cause=cause,
                at=at,
                recovered_at=recovered,
                resumed=replacement is not None and replacement[1].resumed_from is not None,
                input_stall=stall,
                audio_lost=sum(1 for t in lost_at if since <= t < upto) * MIC_CHUNK,
            )
        )
        since = upto
    return moves


def answer_delay(asked: Asked | None) -> float | None:
    """``asked``'s answer delay (None: not asked, or never answered)."""
    return None if asked is None else asked.delay


def before_hang_up(sent: Sequence[SentAudio]) -> list[SentAudio]:
    """The microphone chunks ``sent``, less the call's last moments: a framework may hold the
    last partial chunk of its input when the call hangs up, which is not a loss."""
    hang_up = sent[-1].at - _HANG_UP if sent else 0.0
    return [a for a in sent if a.at <= hang_up]


def lost_audio(run: LaneRun) -> list[SentAudio]:
    """Microphone chunks the service never kept (the hang-up's last moments aside)."""
    kept = {seq for s in run.ledger.sessions.values() for seq in s.audio_consumed}
    return [a for a in before_hang_up(run.microphone.audio) if a.seq not in kept]


def figures(run: LaneRun) -> Figures:
    """The figures of ``run``."""
    cut, unwarned, heard_twice = _answers(run)
    lost = lost_audio(run)
    summary = run.ledger.summary(run.duration)
    duplicated = sum(len(s.audio_duplicates) for s in summary.sessions.values())
    stranded, resent = _tools(run)
    by_question = {a.question: a for a in run.record.asked}
    final = by_question.get(FINAL)
    survived = run.record.closed is None and final is not None and final.first_heard_at is not None
    return Figures(
        key=run.lane.key,
        title=run.lane.title,
        ours=run.lane.ours,
        answers_cut=len(cut),
        cut_turns=tuple(cut),
        answers_cut_without_notice=len(unwarned),
        user_audio_lost=len(lost) * MIC_CHUNK,
        user_speech_lost=sum(1 for a in lost if a.speech) * MIC_CHUNK,
        answer_audio_heard_twice=heard_twice,
        user_audio_heard_twice=duplicated * MIC_CHUNK,
        tool_calls_stranded=stranded,
        tool_results_resent=resent,
        survived=survived,
        moves=tuple(_moves(run, summary, [a.at - run.origin for a in lost])),
        move_question_delay=answer_delay(by_question.get(DURING_MOVE)),
        at_rest_delay=answer_delay(by_question.get(AFTER_MOVE)),
        errors=tuple(run.record.errors),
        questions=len(run.record.asked),
        answered=sum(1 for a in run.record.asked if a.first_heard_at is not None),
        duration=run.duration,
    )
