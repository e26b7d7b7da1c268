"""Runs every lane's call at once, shows them live, and writes the report and the picture."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from realtime_resumption.testing.emulator.models import model_profile

from .call import Plan
from .display import LiveView, comparison_table, markdown_table
from .figures import Figures, figures
from .run import run_lanes
from .stacks import Lane
from .timeline import draw

README = Path("README.md")
README_PICTURE = Path("examples/demo/timeline.png")
_TABLE_START, _TABLE_END = "<!-- demo table: start -->", "<!-- demo table: end -->"


async def compare(
    lanes: Sequence[Lane],
    plan: Plan,
    out: Path,
    *,
    readme: bool = False,
    model: str | None = None,
) -> int:
    """The call on every lane, concurrently; 1 if one of ours lost anything.

    With ``readme``, the table and the picture also go into the README. With ``model`` (a
    model profile's name) every lane's emulator behaves as for that model, and the files
    written carry its name (``report-gemini-3.8-live.json``, ...).
    """
    console = Console()
    with LiveView(lanes, console) as view:
        runs = await run_lanes(lanes, plan, lambda lane: view.listener(lane.key), model)
    results = [figures(run) for run in runs]
    console.print(comparison_table(results))
    suffix = "" if model is None else f"-{model_profile(model).name}"
    report = out / f"report{suffix}.json"
    picture = out / f"timeline{suffix}.png"
    write_report(results, plan, report, model)
    (out / f"table{suffix}.md").write_text(markdown_table(results) + "\n")
    draw(runs, results, picture)
    console.print(f"report:   {report}")
    console.print(f"timeline: {picture}")
    console.print(f"log:      {out / 'demo.log'}")
    if readme:
        update_readme(markdown_table(results), picture)
        console.print(f"README:   {README} and {README_PICTURE}")
    lost = [f.title for f in results if f.ours and f.lost_anything]
    if lost:
        console.print(f"[bold red]ours lost something: {', '.join(lost)}[/]")
        return 1
    console.print("[green]ours lost nothing[/]")
    return 0


def write_report(
    results: Sequence[Figures], plan: Plan, path: Path, model: str | None = None
) -> None:
    """Every figure, per stack, with the script's timings and the model profile (None: the
    emulator's defaults)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "plan": plan.__dict__,
        "model": None if model is None else model_profile(model).name,
        "stacks": {f.key: f.to_json() for f in results},
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def update_readme(table: str, picture: Path) -> None:
    """Put ``table`` between the README's demo-table markers and ``picture`` beside it."""
    text = README.read_text()
    start, end = text.index(_TABLE_START) + len(_TABLE_START), text.index(_TABLE_END)
    README.write_text(f"{text[:start]}\n{table}\n{text[end:]}")
    shutil.copyfile(picture, README_PICTURE)
