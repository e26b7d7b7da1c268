"""The live view while the calls run (a lane per stack), and the comparison table after."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .call import Mark
from .figures import Figures
from .stacks import Lane

_STYLES = {
    "ask": "cyan",
    "go_away": "yellow",
    "move": "yellow",
    "drop": "bold red",
    "deadline": "bold red",
    "refused": "red",
    "connect": "green",
    "close": "dim",
    "error": "magenta",
    "loss": "bold red",
}
_RECENT = 4


@dataclass
class _LaneState:
    lane: Lane
    recent: deque[Mark] = field(default_factory=lambda: deque(maxlen=_RECENT))
    connects: int = 0
    losses: int = 0
    audio_lost: float = 0.0
    errors: int = 0


class LiveView:
    """A lane per stack: its last events, and its moves, losses and errors so far."""

    def __init__(self, lanes: Sequence[Lane], console: Console) -> None:
        self._states = {lane.key: _LaneState(lane) for lane in lanes}
        self._live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render())
        self._live.__exit__(None, None, None)

    def listener(self, key: str) -> Callable[[Mark], None]:
        """The ``on_mark`` callback of lane ``key``."""
        state = self._states[key]

        def on_mark(mark: Mark) -> None:
            if mark.kind == "lost_audio":
                state.audio_lost = mark.value or 0.0
                self._live.update(self._render())
                return
            state.recent.append(mark)
            if mark.kind == "connect":
                # Every connection after the first is a move.
                state.connects += 1
            elif mark.kind == "loss":
                state.losses += 1
            elif mark.kind == "error":
                state.errors += 1
            self._live.update(self._render())

        return on_mark

    def _render(self) -> Table:
        title = f"One call, {len(self._states)} stacks (live)"
        table = Table(title=title, expand=True, show_lines=True)
        table.add_column("stack", ratio=4)
        table.add_column("moves", justify="right", min_width=5)
        table.add_column("losses", justify="right", min_width=6)
        table.add_column("audio lost", justify="right", min_width=7)
        table.add_column("errors", justify="right", min_width=6)
        table.add_column("latest", ratio=8)
        for state in self._states.values():
            latest = Text()
            for mark in state.recent:
                latest.append(f"{mark.at:5.1f}s ", style="dim")
                latest.append(mark.text[:70] + "\n", style=_STYLES.get(mark.kind, ""))
            title = Text(state.lane.title, style="bold" if state.lane.ours else "")
            table.add_row(
                title,
                str(max(0, state.connects - 1)),
                Text(str(state.losses), style="bold red" if state.losses else "green"),
                Text(
                    f"{state.audio_lost:.1f} s", style="bold red" if state.audio_lost else "green"
                ),
                Text(str(state.errors), style="magenta" if state.errors else ""),
                latest,
            )
        return table


def _seconds(value: float | None, *, never: str = "never") -> str:
    return never if value is None else f"{value:.2f}"


ROWS: tuple[tuple[str, Callable[[Figures], str]], ...] = (
    (
        "answers cut",
        lambda f: (
            str(f.answers_cut)
            + (
                f" ({f.answers_cut_without_notice} by a close without goAway)"
                if f.answers_cut_without_notice
                else ""
            )
        ),
    ),
    (
        "user audio lost (s)",
        lambda f: (
            f"{f.user_audio_lost:.2f}"
            + (f" ({f.user_speech_lost:.2f} speech)" if f.user_audio_lost else "")
        ),
    ),
    (
        "user audio lost per move (s)",
        lambda f: ", ".join(f"{m.audio_lost:.2f}" for m in f.moves) or "-",
    ),
    ("answer audio heard twice (s)", lambda f: f"{f.answer_audio_heard_twice:.2f}"),
    ("user audio taken in twice (s)", lambda f: f"{f.user_audio_heard_twice:.2f}"),
    ("tool calls stranded", lambda f: str(f.tool_calls_stranded)),
    ("session survived", lambda f: "yes" if f.survived else "NO"),
    (
        "input stall per move (s)",
        lambda f: (
            ", ".join(
                f"{m.input_stall:.2f}" + ("" if m.recovered_at is not None else " (dead)")
                for m in f.moves
            )
            or "-"
        ),
    ),
    (
        "answer delay, question during the move (s)",
        lambda f: _seconds(f.move_question_delay),
    ),
    ("answer delay at rest (s)", lambda f: _seconds(f.at_rest_delay)),
    ("questions answered", lambda f: f"{f.answered} of {f.questions}"),
    ("errors surfaced to the app", lambda f: str(len(f.errors))),
)


Rows = Sequence[tuple[str, Callable[[Figures], str]]]


def comparison_table(results: Sequence[Figures], rows: Rows = ROWS) -> Table:
    """One column per stack, one row per figure."""
    table = Table(title="What the same call did on each stack", show_lines=False)
    table.add_column("")
    for f in results:
        table.add_column(f.title, justify="right", style="bold" if f.ours else "")
    for name, cell in rows:
        table.add_row(name, *(cell(f) for f in results))
    return table


def markdown_table(results: Sequence[Figures], rows: Rows = ROWS) -> str:
    """The comparison table in Markdown, for the README."""
    lines = [
        "| | " + " | ".join(f.title for f in results) + " |",
        "|---|" + "---:|" * len(results),
    ]
    lines += [f"| {name} | " + " | ".join(cell(f) for f in results) + " |" for name, cell in rows]
    return "\n".join(lines)
