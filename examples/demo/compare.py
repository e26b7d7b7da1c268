"""Runs every lane's call at once, shows them live, and writes the report and the picture."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from realtime_resumption.testing.emulator.models import model_profile

from .call import Plan
from .display import ROWS, LiveView, Rows, comparison_table, markdown_table
from .figures import Figures, figures
from .openai_call import OpenAIPlan, openai_call
from .openai_figures import LEDGERED, OPENAI_ROWS, openai_figures
from .run import Call, E, LaneRun, gemini_call, run_lanes
from .stacks import Lane
from .timeline import GEMINI, Ledgered, draw

README = Path("README.md")
README_PICTURE = Path("examples/demo/timeline.png")
_TABLE_START, _TABLE_END = "<!-- demo table: start -->", "<!-- demo table: end -->"


@dataclass
class Comparison:
    """One run of a call on every lane: the exit status, the runs and their figures."""

    status: int
    """1 if one of ours lost anything, else 0."""
    runs: list[LaneRun]
    results: list[Figures]
    table: str
    """The table, in Markdown."""
    picture: Path


async def run_comparison(
    lanes: Sequence[Lane],
    call: Call[E],
    measure: Callable[[LaneRun], Figures],
    out: Path,
    *,
    suffix: str = "",
    header: Mapping[str, Any],
    rows: Rows = ROWS,
    ledgered: Ledgered = GEMINI,
) -> Comparison:
    """``call`` on every lane, concurrently, shown live; then the table, ``report{suffix}.json``
    (``header`` and every lane's figures), ``table{suffix}.md`` and ``timeline{suffix}.png``
    under ``out``."""
    console = Console()
    with LiveView(lanes, console) as view:
        runs = await run_lanes(lanes, call, lambda lane: view.listener(lane.key))
    results = [measure(run) for run in runs]
    console.print(comparison_table(results, rows))
    report = out / f"report{suffix}.json"
    picture = out / f"timeline{suffix}.png"
    write_report(results, report, header)
    table = markdown_table(results, rows)
    (out / f"table{suffix}.md").write_text(table + "\n")
    draw(runs, results, picture, ledgered)
    console.print(f"report:   {report}")
    console.print(f"timeline: {picture}")
    console.print(f"log:      {out / 'demo.log'}")
    lost = [f.title for f in results if f.ours and f.lost_anything]
    if lost:
        console.print(f"[bold red]ours lost something: {', '.join(lost)}[/]")
    else:
        console.print("[green]ours lost nothing[/]")
    return Comparison(1 if lost else 0, runs, results, table, picture)


async def compare(
    lanes: Sequence[Lane],
    plan: Plan,
    out: Path,
    *,
    readme: bool = False,
    model: str | None = None,
) -> int:
    """The Gemini call on every lane, concurrently; 1 if one of ours lost anything.

    With ``readme``, the table and the picture also go into the README. With ``model`` (a
    model profile's name) every lane's emulator behaves as for that model, and the files
    written carry its name (``report-gemini-3.8-live.json``, ...).
    """
    name = None if model is None else model_profile(model).name
    comparison = await run_comparison(
        lanes,
        gemini_call(plan, model),
        figures,
        out,
        suffix="" if name is None else f"-{name}",
        header={"plan": plan.__dict__, "model": name},
    )
    if readme:
        update_readme(comparison.table, comparison.picture)
        Console().print(f"README:   {README} and {README_PICTURE}")
    return comparison.status


async def compare_openai(lanes: Sequence[Lane], plan: OpenAIPlan, out: Path) -> Comparison:
    """The OpenAI call on every lane (``openai_lanes``), concurrently; its files carry
    ``-openai`` (``report-openai.json``, ...)."""
    return await run_comparison(
        lanes,
        openai_call(plan),
        lambda run: openai_figures(run, plan),
        out,
        suffix="-openai",
        header={"plan": plan.__dict__, "service": "openai", "time_scale": plan.time_scale},
        rows=OPENAI_ROWS,
        ledgered=LEDGERED,
    )


def write_report(results: Sequence[Figures], path: Path, header: Mapping[str, Any]) -> None:
    """Every figure, per stack, after ``header`` (the script's timings, the model profile)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**header, "stacks": {f.key: f.to_json() for f in results}}
    path.write_text(json.dumps(data, indent=2) + "\n")


def update_readme(table: str, picture: Path) -> None:
    """Put ``table`` between the README's demo-table markers and ``picture`` beside it."""
    text = README.read_text()
    start, end = text.index(_TABLE_START) + len(_TABLE_START), text.index(_TABLE_END)
    README.write_text(f"{text[:start]}\n{table}\n{text[end:]}")
    shutil.copyfile(picture, README_PICTURE)
