"""The figures of one lane's OpenAI call, from the emulator's conversation ledger and from what
the caller heard.

As on the Gemini call nothing trusts the stack's own account: user speech is counted by the
chunk numbers the sessions' items hold (the ledger's ``speech_committed``), answers by the
answer-chunk ids the caller heard played against those each answer produced (the ledger's
outcome ``cut`` among them), the word recalled from the last answer's transcript.
"""

from __future__ import annotations

from collections import Counter

from realtime_resumption.testing.emulator.caller import SentAudio
from realtime_resumption.testing.openai_emulator import SessionRecord

from .call import MIC_CHUNK
from .display import ROWS, Rows
from .figures import Figures, Move, answer_delay, before_hang_up
from .openai_call import (
    ACROSS_CAP,
    AFTER_CAP,
    RECALL,
    REMEMBER,
    WORD,
    OpenAIPlan,
    answers_to,
)
from .run import LaneRun
from .timeline import ConnectionSpan, Ledgered


def _sessions(run: LaneRun) -> list[SessionRecord]:
    sessions: list[SessionRecord] = run.ledger.sessions
    return sessions


def lost_speech(run: LaneRun) -> list[SentAudio]:
    """The microphone's speech chunks no session's conversation holds (the ledger's
    ``speech_lost``), the hang-up's last moments aside. The service keeps speech only:
    silence is neither kept nor lost."""
    lost = set(run.ledger.summary().speech_lost([a.seq for a in run.microphone.audio]))
    return [a for a in before_hang_up(run.microphone.audio) if a.speech and a.seq in lost]


def _answers(run: LaneRun) -> tuple[list[int], int, float]:
    """(cut turns, spoken answers heard whole, seconds of answer audio heard twice): an
    answer is cut when the ledger says so (its session ended while it ran) or when the
    caller did not hear every chunk it produced (a stack that dropped it on its way); answers
    stopped by the user are not."""
    heard = Counter((h.turn, h.chunk) for h in run.ear.chunks)
    cut = []
    complete = 0
    for session in _sessions(run):
        for answer in session.answers:
            if answer.outcome in ("cancelled", "truncated", "running"):
                continue
            missing = any((answer.turn, k) not in heard for k in range(answer.produced))
            if answer.outcome == "cut" or missing:
                cut.append(answer.turn)
            elif answer.produced:
                complete += 1
    twice = sum(n - 1 for n in heard.values() if n > 1)
    return cut, complete, twice * run.config.chunk_ms / 1000


def _tools(run: LaneRun) -> tuple[int, int]:
    """(stranded, re-sent): calls the model made that no session got an output for, plus
    outputs a session refused (its call unknown there); outputs sent twice to the session
    that made the call."""
    sessions = _sessions(run)
    outputs = Counter(
        i.call_id for s in sessions for i in s.items if i.type == "function_call_output"
    )
    stranded = resent = 0
    for session in sessions:
        for item in session.items:
            if item.type == "function_call" and item.source == "model":
                stranded += outputs[item.call_id] == 0
                here = sum(
                    1
                    for i in session.items
                    if i.type == "function_call_output" and i.call_id == item.call_id
                )
                resent += max(0, here - 1)
        stranded += sum(1 for code, _ in session.errors if code == "invalid_tool_call_id")
    return stranded, resent


def _moves(run: LaneRun, lost_at: list[float]) -> list[Move]:
    """A move per session that ended while the call went on: at the cap, at a drop, or closed
    by the stack itself before the cap (ours) or at its own restart (stock LiveKit)."""
    sessions = _sessions(run)
    moves = []
    since = 0.0
    for i, session in enumerate(sessions):
        following = sessions[i + 1] if i + 1 < len(sessions) else None
        if session.closed_by in ("client", None) and following is None:
            continue  # the hang-up
        if session.closed_by in ("cap", "drop"):
            cause: str = str(session.closed_by)
            at = session.closed_at if session.closed_at is not None else run.duration
        else:
            cause = "planned" if run.lane.ours else "restart"
            at = following.opened_at if following is not None else run.duration
        recovered = following.created_at if following is not None else None
        last = session.last_audio_at if session.last_audio_at is not None else at
        if following is not None:
            first = following.first_audio_at if following.first_audio_at is not None else last
            stall = max(0.0, first - last)
        else:
            stall = run.duration - last
        upto = recovered if recovered is not None else run.duration
        moves.append(
            Move(
                cause=cause,
                at=at,
                recovered_at=recovered,
                resumed=False,
                input_stall=stall,
                audio_lost=sum(1 for t in lost_at if since <= t < upto) * MIC_CHUNK,
            )
        )
        since = upto
    return moves


def _recalled(run: LaneRun) -> bool | None:
    """The last answer to ``RECALL`` says ``WORD`` after its ``recall``."""
    if not any(a.question == RECALL for a in run.record.asked):
        return None
    sessions = _sessions(run)
    for session in reversed(sessions):
        for answer in reversed(answers_to([session], RECALL.key)):
            item = session.item(answer.item_id) if answer.item_id else None
            if item is not None and "recall " in item.text:
                return WORD in item.text.split("recall ", 1)[1].split()
    return False


def _alive_after_caps(run: LaneRun, plan: OpenAIPlan) -> tuple[bool, ...]:
    """For each cap the script passed (the first session's ``session.created`` plus a
    multiple of ``plan.cap``): the first question begun after it was answered (the question
    spoken across the cap may be lost by a session that lives on; the next one tells)."""
    sessions = _sessions(run)
    if not sessions or sessions[0].created_at is None:
        return (False,)
    first = sessions[0].created_at
    caps = [first + n * plan.cap for n in range(1, plan.caps + 1)]
    alive = []
    for cap in caps:
        after = [
            a
            for a in run.record.asked
            if a.utterance.started_at is not None and a.utterance.started_at - run.origin >= cap
        ]
        alive.append(bool(after) and after[0].first_heard_at is not None)
    return tuple(alive)


def ledger_figures(run: LaneRun) -> dict[str, int]:
    """The emulator's own account: its ledger summary, and the caller's speech it never
    committed."""
    summary = run.ledger.summary()
    sent = [a.seq for a in run.microphone.audio if a.speech]
    return {
        "sessions": summary.sessions,
        "speech_chunks_sent": len(sent),
        "speech_chunks_lost": len(summary.speech_lost(sent)),
        "speech_chunks_heard_twice": len(summary.speech_heard_twice),
        "answers": summary.answers,
        "answers_complete": summary.answers_complete,
        "answers_cut": summary.answers_cut,
        "items_given": summary.seeded_items,
        "error_events": summary.errors,
    }


def openai_figures(run: LaneRun, plan: OpenAIPlan) -> Figures:
    """The figures of ``run``, an OpenAI call of ``plan``."""
    cut, complete, heard_twice = _answers(run)
    lost = lost_speech(run)
    stranded, resent = _tools(run)
    by_question = {a.question: a for a in run.record.asked}
    final = by_question.get(RECALL)
    alive = _alive_after_caps(run, plan)
    survived = (
        run.record.closed is None
        and final is not None
        and final.first_heard_at is not None
        and all(alive)
    )
    summary = run.ledger.summary()
    return Figures(
        key=run.lane.key,
        title=run.lane.title,
        ours=run.lane.ours,
        answers_cut=len(cut),
        cut_turns=tuple(cut),
        answers_complete=complete,
        user_audio_lost=len(lost) * MIC_CHUNK,
        user_speech_lost=len(lost) * MIC_CHUNK,
        answer_audio_heard_twice=heard_twice,
        user_audio_heard_twice=len(summary.speech_heard_twice) * MIC_CHUNK,
        tool_calls_stranded=stranded,
        tool_results_resent=resent,
        survived=survived,
        moves=tuple(_moves(run, [a.at - run.origin for a in lost])),
        move_question_delay=answer_delay(by_question.get(ACROSS_CAP)),
        at_rest_delay=answer_delay(by_question.get(REMEMBER) or by_question.get(AFTER_CAP)),
        errors=tuple(run.record.errors),
        questions=len(run.record.asked),
        answered=sum(1 for a in run.record.asked if a.first_heard_at is not None),
        duration=run.duration,
        recalled=_recalled(run),
        alive_after_caps=alive,
        ledger=ledger_figures(run),
    )


def _connections(run: LaneRun) -> list[ConnectionSpan]:
    return [
        ConnectionSpan(s.index, s.opened_at, s.created_at, s.closed_at, resumed=False)
        for s in _sessions(run)
    ]


def _refused(run: LaneRun) -> list[float]:
    return [at for at, _, _ in run.ledger.refused]


LEDGERED = Ledgered(
    _connections,
    _refused,
    lost_speech,
    move_question=ACROSS_CAP,
    move_question_label="question across the cap",
)
"""How the timeline reads the OpenAI ledger: a connection is a session (none is resumed:
OpenAI keeps nothing of a closed session)."""


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


_CELLS = dict(ROWS)
OPENAI_ROWS: Rows = (
    ("answers complete", lambda f: str(f.answers_complete)),
    ("answers cut", _CELLS["answers cut"]),
    ("user speech lost (s)", lambda f: f"{f.user_speech_lost:.2f}"),
    ("user speech lost per move (s)", _CELLS["user audio lost per move (s)"]),
    ("user speech heard twice (s)", lambda f: f"{f.user_audio_heard_twice:.2f}"),
    ("answer audio heard twice (s)", _CELLS["answer audio heard twice (s)"]),
    ("tool calls stranded", _CELLS["tool calls stranded"]),
    ("questions answered", _CELLS["questions answered"]),
    ("word said early recalled at the end", lambda f: _yes_no(f.recalled)),
    (
        "session alive after every cap",
        lambda f: "yes" if f.alive_after_caps and all(f.alive_after_caps) else "NO",
    ),
    ("moves", lambda f: ", ".join(m.cause for m in f.moves) or "-"),
    ("input stall per move (s)", _CELLS["input stall per move (s)"]),
    (
        "answer delay, question across the cap (s)",
        _CELLS["answer delay, question during the move (s)"],
    ),
    ("answer delay at rest (s)", _CELLS["answer delay at rest (s)"]),
    ("errors surfaced to the app", _CELLS["errors surfaced to the app"]),
    (
        "ledger: speech chunks never committed",
        lambda f: (
            f"{f.ledger.get('speech_chunks_lost', 0)} of {f.ledger.get('speech_chunks_sent', 0)}"
        ),
    ),
    ("ledger: answers cut", lambda f: str(f.ledger.get("answers_cut", 0))),
    ("ledger: sessions", lambda f: str(f.ledger.get("sessions", 0))),
)
"""The OpenAI call's table: the Gemini call's rows where they mean the same, the recall and
the caps, and the emulator ledger's own figures."""
