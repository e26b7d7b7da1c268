"""``--live``: ours on real Gemini Live, waiting for the service's own goAways.

No fault can be injected there and there is no ledger to read, so the figures are the
client's own account: the transport's move reports (outcome, input gap, audio dropped), how
each answer ended, and the errors it raised. The microphone streams silence the whole call (the
caller's synthetic audio is not speech) and the questions are typed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator.caller import ScriptedCaller
from realtime_resumption.transport import GenerationEndReason, TransportError

from .call import INSTRUCTIONS
from .stacks import WEATHER_DECLARATION

_QUESTIONS = (
    "Hello there.",
    "What is the weather in Paris? Use get_weather.",
    "Tell me a short story.",
    "And what about tomorrow?",
    "How about Lisbon?",
)
_ANSWER_TIMEOUT = 30.0
_PAUSE = 20.0
_FINE = {GenerationEndReason.GENERATION_COMPLETE, GenerationEndReason.INTERRUPTED}


async def run_live(seconds: float, console: Console) -> dict[str, Any]:
    """A typed conversation for ``seconds`` on real Gemini Live; returns its figures."""
    transport = GeminiLiveTransport(
        api_key=os.environ["GOOGLE_API_KEY"],
        tools=[WEATHER_DECLARATION],
        system_instruction=INSTRUCTIONS,
    )
    transport.on_move = lambda r: console.print(
        f"move {r.number}: {r.reason} -> {r.outcome}, gap {r.gap_ms:.0f} ms, "
        f"{r.audio_seconds_dropped:.2f} s audio dropped"
    )
    asked = answered = 0
    loop = asyncio.get_running_loop()
    async with ScriptedCaller(transport) as caller:
        try:
            await transport.connect()
        except TransportError as error:
            raise SystemExit(f"could not open a Gemini Live session: {error}") from None
        caller.start_microphone()
        stop_at = loop.time() + seconds
        for question in itertools.cycle(_QUESTIONS):
            if loop.time() >= stop_at:
                break
            asked += 1
            console.print(f"[cyan]{question}[/]")
            try:
                await caller.ask_typed(question, timeout=_ANSWER_TIMEOUT)
                answered += 1
            except TimeoutError:
                console.print("[red]no answer[/]")
            await asyncio.sleep(min(_PAUSE, max(0.0, stop_at - loop.time())))
        await caller.stop_microphone()
        await transport.disconnect()
        summary = caller.summary()
    cut = sum(n for reason, n in summary.generation_ends.items() if reason not in _FINE)
    lost = sum(m.audio_seconds_dropped for m in summary.moves)
    figures: dict[str, Any] = {
        "answers_cut": cut,
        "user_audio_lost": round(lost, 3),
        "survived": answered == asked > 0 and summary.move_outcomes.get("lost", 0) == 0,
        "go_aways": summary.go_aways,
        "moves": [
            {"reason": str(m.reason), "outcome": str(m.outcome), "input_gap_ms": m.gap_ms}
            for m in summary.moves
        ],
        "errors": summary.errors,
        "questions": asked,
        "answered": answered,
    }
    return figures


def report_live(figures: dict[str, Any], seconds: float, out: Path, console: Console) -> int:
    """Print and write the live call's figures; 1 if anything was lost."""
    table = Table(title="Ours on real Gemini Live (the client's own account)")
    table.add_column("")
    table.add_column("ours: transport alone", justify="right")
    for name, value in figures.items():
        table.add_row(name.replace("_", " "), str(value))
    console.print(table)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report-live.json"
    report.write_text(json.dumps({"live": True, "seconds": seconds, "ours": figures}, indent=2))
    console.print(f"report: {report}")
    lost = figures["answers_cut"] or figures["user_audio_lost"] or not figures["survived"]
    return 1 if lost else 0
