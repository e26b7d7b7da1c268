"""The timeline picture: per stack, its connections, the user's speech, the answer audio the
caller heard, and the moves and losses, on one time axis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from realtime_resumption.testing.emulator.caller import SentAudio

from .call import DURING_MOVE, Question
from .figures import Figures, lost_audio
from .run import LaneRun

_LANES = ("connections", "user speech", "answer heard", "moves & losses")
_Y = {name: len(_LANES) - 1 - i for i, name in enumerate(_LANES)}
_H = 0.6
_RESUMED, _NEW, _SETUP = "#2e7d32", "#1565c0", "#bdbdbd"
_SPEECH, _HEARD, _LOST = "#00838f", "#6a1b9a", "#d32f2f"
_SKIPPED = "#bdbdbd"
_MOVE_MARKERS = {
    "goAway": "v",
    "drop": "X",
    "deadline": "s",
    "cap": "s",
    "planned": "^",
    "restart": "P",
}
"""How each cause of a move is drawn (``deadline``: a close without goAway; ``cap``: the
OpenAI session's cap, ``planned``: a move before it, ``restart``: stock LiveKit's own)."""
_MOVE_LABELS = {
    "goAway": "goAway",
    "drop": "drop",
    "deadline": "close without goAway",
    "cap": "session cap (close)",
    "planned": "move before the cap",
    "restart": "restart (max_session_duration)",
}


@dataclass(frozen=True)
class ConnectionSpan:
    """One connection on the picture."""

    index: int
    opened_at: float
    setup_at: float | None
    """When it was set up (None: never)."""
    closed_at: float | None
    resumed: bool
    """It resumed the session (else a new session)."""


@dataclass(frozen=True)
class Ledgered:
    """How the picture reads a call's ledger (the Gemini one by default)."""

    connections: Callable[[LaneRun], list[ConnectionSpan]]
    refused: Callable[[LaneRun], list[float]]
    """When each refused attempt came."""
    lost: Callable[[LaneRun], list[SentAudio]]
    """The microphone chunks the service never kept."""
    move_question: Question = DURING_MOVE
    """The question whose answer delay is ``Figures.move_question_delay``."""
    move_question_label: str = "question during the move"


def _gemini_connections(run: LaneRun) -> list[ConnectionSpan]:
    return [
        ConnectionSpan(
            c.index,
            c.opened_at,
            c.setup_at if c.established else None,
            c.closed_at,
            c.resumed_from is not None,
        )
        for session in run.ledger.sessions.values()
        for c in session.connections
    ]


def _gemini_refused(run: LaneRun) -> list[float]:
    refused = [
        c.opened_at
        for session in run.ledger.sessions.values()
        for c in session.connections
        if not c.established and c.refused is not None
    ]
    return refused + [a.time for a in run.ledger.attempts if a.outcome != "accepted"]


GEMINI = Ledgered(_gemini_connections, _gemini_refused, lost_audio)


def _bar(
    ax: Axes, lane: str, start: float, end: float, *, row: int | None = None, **style: object
) -> None:
    """A bar on ``lane``; ``row`` 0 or 1 puts it in the lower or upper half of the lane."""
    if row is None:
        bottom, height = _Y[lane] - _H / 2, _H
    else:
        bottom, height = _Y[lane] - _H / 2 + row * _H / 2, _H / 2
    ax.broken_barh([(start, max(end - start, 0.02))], (bottom, height), **style)


def _connections(ax: Axes, run: LaneRun, ledgered: Ledgered) -> None:
    # Consecutive connections alternate between two rows, so an overlap (the replacement
    # setting up while the incumbent still serves) shows as such.
    for c in ledgered.connections(run):
        row = c.index % 2
        end = c.closed_at if c.closed_at is not None else run.duration
        if c.setup_at is not None and c.setup_at > c.opened_at + 0.05:
            _bar(ax, "connections", c.opened_at, c.setup_at, row=row, facecolor=_SETUP, hatch="//")
        if c.setup_at is not None:
            color = _RESUMED if c.resumed else _NEW
            _bar(ax, "connections", c.setup_at, end, row=row, facecolor=color, edgecolor="white")
    for at in ledgered.refused(run):
        ax.plot(at, _Y["connections"], "x", color=_LOST, ms=9, mew=2)


def _speech(ax: Axes, run: LaneRun, ledgered: Ledgered) -> None:
    origin = run.origin
    for u in run.microphone.utterances:
        if u.started_at is not None:
            end = u.finished_at if u.finished_at is not None else u.started_at
            _bar(ax, "user speech", u.started_at - origin, end - origin, facecolor=_SPEECH)
    lost = ledgered.lost(run)
    # Lost silence is drawn apart from lost speech: it held no words (ours leaves some out
    # on purpose: a move does not replay silence it cannot place).
    for speech, color, alpha in ((False, _SKIPPED, 0.8), (True, _LOST, 0.55)):
        times = [a.at - origin for a in lost if a.speech is speech]
        for start, end in _runs(times, 0.05):
            _bar(ax, "user speech", start, end + 0.02, facecolor=color, alpha=alpha)


def _runs(times: Sequence[float], gap: float) -> list[tuple[float, float]]:
    runs: list[tuple[float, float]] = []
    for t in times:
        if runs and t - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def _move_color(cause: str) -> str:
    return _LOST if cause in ("drop", "deadline", "cap") else "#ef6c00"


def _moves(ax: Axes, run: LaneRun, figures: Figures, ledgered: Ledgered) -> None:
    y = _Y["moves & losses"]
    for move in figures.moves:
        marker = _MOVE_MARKERS[move.cause]
        ax.plot(move.at, y, marker, color=_move_color(move.cause), ms=10)
        if move.recovered_at is not None:
            ax.annotate(
                f"input stalled {move.input_stall:.2f} s",
                (move.at, y + 0.33),
                fontsize=7,
                color=_LOST if move.input_stall > 0.2 else "#2e7d32",
            )
    # A stack may surface an error per audio frame (stock Pipecat after its session is gone):
    # one star per run of them, with their number.
    errors = [mark.at for mark in run.record.marks if mark.kind == "error"]
    for start, end in _runs(errors, 0.5):
        ax.plot(start, y, "*", color="#6a1b9a", ms=9)
        count = sum(1 for at in errors if start <= at <= end)
        if count > 1:
            ax.annotate(f"{count} errors", (start, y + 0.15), fontsize=7, color="#6a1b9a")
    for mark in run.record.marks:
        if mark.kind == "loss":
            ax.plot(mark.at, y, "o", color=_LOST, ms=6)
            label = _loss_label(mark.text)
            ax.annotate(label, (mark.at, y - 0.5), fontsize=7, color=_LOST, ha="center")
        elif mark.kind == "ask" and mark.text == " ".join(ledgered.move_question.words):
            delay = figures.move_question_delay
            text = "never answered" if delay is None else f"answered after {delay:.2f} s"
            slow = delay is None or delay > 1.5 * _at_rest(figures)
            ax.annotate(
                f"{ledgered.move_question_label}: {text}",
                (mark.at, _Y["user speech"] + 0.33),
                fontsize=7,
                color=_LOST if slow else "black",
            )


def _at_rest(figures: Figures) -> float:
    return figures.at_rest_delay if figures.at_rest_delay is not None else 1.0


def _loss_label(text: str) -> str:
    if text.startswith("no answer"):
        return "unanswered"
    if text.startswith("call ended"):
        return "call ended"
    if text.endswith("cut"):
        return "answer cut"
    return text[:20]


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def verdict(figures: Figures) -> str:
    """What the call lost, in a few words."""
    losses = []
    if figures.answers_cut:
        losses.append(f"{_count(figures.answers_cut, 'answer')} cut")
    if figures.user_speech_lost:
        losses.append(f"{figures.user_speech_lost:.1f} s of user speech lost")
    if figures.tool_calls_stranded:
        losses.append(f"{_count(figures.tool_calls_stranded, 'tool call')} stranded")
    if figures.answered < figures.questions:
        losses.append(f"{_count(figures.questions - figures.answered, 'question')} unanswered")
    if not figures.survived:
        losses.append("the session died")
    return ", ".join(losses) if losses else "nothing lost"


def draw(
    runs: Sequence[LaneRun],
    results: Sequence[Figures],
    path: Path,
    ledgered: Ledgered = GEMINI,
) -> None:
    """Write the timeline of every lane to ``path`` (PNG), reading the ledgers as
    ``ledgered`` says."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(14, 2.3 * len(runs) + 1), sharex=True)
    axes_list = [axes] if len(runs) == 1 else list(axes)
    end = max(run.duration for run in runs)
    for ax, run, figures in zip(axes_list, runs, results, strict=True):
        _connections(ax, run, ledgered)
        _speech(ax, run, ledgered)
        for start, stop in run.ear.spans:
            _bar(ax, "answer heard", start, stop, facecolor=_HEARD)
        _moves(ax, run, figures, ledgered)
        ax.set_yticks(list(_Y.values()), list(_Y.keys()), fontsize=8)
        ax.set_ylim(-0.7, len(_LANES) - 0.3)
        ax.set_xlim(0, end)
        ax.set_title(
            f"{figures.title}: {verdict(figures)}",
            loc="left",
            fontsize=10,
            color="#2e7d32" if not figures.lost_anything else _LOST,
        )
        ax.grid(axis="x", alpha=0.3)
    axes_list[-1].set_xlabel("seconds since the call started")
    legend = [
        Patch(facecolor=_RESUMED, label="connection (resumed session)"),
        Patch(facecolor=_NEW, label="connection (new session)"),
        Patch(facecolor=_SETUP, hatch="//", label="connection setting up"),
        Patch(facecolor=_SPEECH, label="user speech"),
        Patch(facecolor=_LOST, alpha=0.55, label="user speech lost"),
        Patch(facecolor=_SKIPPED, alpha=0.8, label="user silence lost"),
        Patch(facecolor=_HEARD, label="answer audio heard"),
        *(
            Line2D(
                [], [], marker=_MOVE_MARKERS[cause], color=_move_color(cause), ls="", label=label
            )
            for cause, label in _MOVE_LABELS.items()
            if any(m.cause == cause for f in results for m in f.moves)
        ),
        Line2D([], [], marker="x", color=_LOST, ls="", label="refused attempt"),
        Line2D([], [], marker="o", color=_LOST, ls="", label="loss (cut, unanswered, ended)"),
        Line2D([], [], marker="*", color="#6a1b9a", ls="", label="error to the app"),
    ]
    fig.legend(handles=legend, loc="lower center", ncol=6, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
