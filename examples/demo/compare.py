"""Runs every lane's call at once, shows them live, and writes the report and the picture."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from .call import Plan
from .display import LiveView, comparison_table, markdown_table
from .figures import Figures, figures
from .run import run_lanes
from .stacks import Lane
from .timeline import draw


async def compare(lanes: Sequence[Lane], plan: Plan, out: Path) -> int:
    """The call on every lane, concurrently; 1 if one of ours lost anything."""
    console = Console()
    with LiveView(lanes, console) as view:
        runs = await run_lanes(lanes, plan, lambda lane: view.listener(lane.key))
    results = [figures(run) for run in runs]
    console.print(comparison_table(results))
    report = out / "report.json"
    picture = out / "timeline.png"
    write_report(results, plan, report)
    (out / "table.md").write_text(markdown_table(results) + "\n")
    draw(runs, results, picture)
    console.print(f"report:   {report}")
    console.print(f"timeline: {picture}")
    console.print(f"log:      {out / 'demo.log'}")
    lost = [f.title for f in results if f.ours and f.lost_anything]
    if lost:
        console.print(f"[bold red]ours lost something: {', '.join(lost)}[/]")
        return 1
    console.print("[green]ours lost nothing[/]")
    return 0


def write_report(results: Sequence[Figures], plan: Plan, path: Path) -> None:
    """Every figure, per stack, with the script's timings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "plan": plan.__dict__,
        "stacks": {f.key: f.to_json() for f in results},
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
