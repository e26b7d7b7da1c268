"""A voice conversation that survives connection rotation, with a live timeline.

On the bundled emulator (the default): a scripted caller streams microphone audio through
``GeminiLiveTransport`` for about a minute while the emulator rotates the connection every
15 s with a 5 s goAway notice, drops it once abruptly and refuses the first attempt to come
back. The timeline shows connections, goAways, turns, answers and every move with its outcome
and gap; the ledger at the end is the emulator's own account of what was cut, lost or
stranded. The exit status is non-zero if anything was.

With ``GOOGLE_API_KEY`` set (or ``--target gemini``) it talks to the real Gemini Live service
instead, typing its questions (the caller's synthetic audio is not speech). The service rotates
a connection only every ten minutes or so, so a short run there shows the lifecycle, not a move.

    python -m examples.demo                      # about a minute on the emulator
    python -m examples.demo --time-scale 0.1     # the same script ten times faster
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from google.genai import types
from loguru import logger

from realtime_resumption.emulator import Emulator, EmulatorConfig
from realtime_resumption.emulator.caller import CallerEvent, ScriptedCaller
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.outbox import OutboxLimits
from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.moves import HandleKind, MoveReason, MoveReport
from realtime_resumption.transport import ConnectionLifecycleEvent

WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
    ),
)

# What the caller says, one utterance per turn, round and round until the time is up. The
# emulator calls a declared function whose name it hears.
SCRIPT: tuple[tuple[str, ...], ...] = (
    ("hello", "there"),
    ("tell", "me", "a", "story"),
    ("what", "is", "the", "get_weather", "in", "paris"),
    ("thanks",),
    ("and", "tomorrow"),
    ("one", "more", "thing"),
    ("how", "about", "lisbon"),
    ("sounds", "good"),
    ("tell", "me", "another"),
    ("what", "time", "is", "it"),
    ("that", "is", "all"),
    ("goodbye",),
)


@dataclass(frozen=True)
class Plan:
    """The demo's schedule in demo seconds (multiplied by the time scale)."""

    duration: float = 60.0
    rotate_every: float = 15.0
    notice: float = 5.0
    pause: float = 1.5

    @property
    def drop_at(self) -> float:
        """Between two rotations, well after the script's tool call."""
        return self.duration * 0.63


class Timeline:
    """Prints what happens, one line an event, in demo seconds since the start."""

    def __init__(self, scale: float) -> None:
        self._scale = scale
        self._start = asyncio.get_running_loop().time()

    def say(self, text: str) -> None:
        elapsed = (asyncio.get_running_loop().time() - self._start) / self._scale
        print(f"{elapsed:7.2f}s  {text}", flush=True)

    def caller_event(self, event: CallerEvent) -> None:
        shown = {
            "utterance": "user says:",
            "typed": "user typed",
            "generation_start": "answer started",
            "generation_end": "answer ended",
            "turn_complete": "turn complete",
            "interrupted": "interrupted",
            "tool_call": "tool call",
            "tool_result": "tool result sent",
            "tool_cancel": "tool call cancelled",
            "go_away": "goAway",
            "error": "error",
        }
        label = shown.get(event.kind)
        if label is not None:
            self.say(f"{label} {event.detail}".rstrip())

    def lifecycle(self, event: ConnectionLifecycleEvent) -> None:
        if event.kind == "attempt":
            how = "resuming" if event.handle_supplied else "new session"
            self.say(f"connection {event.connect_attempt_id}: dialling ({how})")
        elif event.kind == "setup-ok":
            self.say(
                f"connection {event.connect_attempt_id}: open "
                f"(transport generation {event.transport_generation})"
            )
        elif event.kind == "setup-failed":
            self.say(f"connection {event.connect_attempt_id}: failed ({event.failure})")
        else:
            self.say(f"connection {event.connect_attempt_id}: closed ({event.code})")

    def move_started(self, reason: MoveReason, kind: HandleKind) -> None:
        self.say(f"move: {reason.value}, {kind.value.replace('_', '-')} handle")

    def move(self, report: MoveReport) -> None:
        self.say(
            f"move {report.number}: {report.outcome.value.upper()} after {report.attempts} "
            f"attempt(s), input gap {report.gap_ms:.0f} ms, {report.messages_replayed} "
            f"replayed, {report.audio_chunks_dropped} audio chunk(s) dropped"
        )


INSTRUCTIONS = "You are a friendly assistant on a phone call."


def _emulated_transport(emulator: Emulator, scale: float) -> GeminiLiveTransport:
    # The transport's own wall-clock windows (the tool-call grace after turnComplete, the
    # replay margin before a handle) shrink with the emulator's time, so that a faster run
    # behaves as the real-time one does.
    return GeminiLiveTransport(
        client=emulator.client(),
        tools=[WEATHER],
        system_instruction=INSTRUCTIONS,
        tool_call_grace=TOOL_CALL_GRACE * scale,
        input_buffer=OutboxLimits(handle_margin=OutboxLimits().handle_margin * scale),
    )


def _wire(transport: GeminiLiveTransport, timeline: Timeline) -> None:
    transport.on_connection_lifecycle = timeline.lifecycle
    transport.on_move_started = timeline.move_started
    transport.on_move = timeline.move


async def _converse(
    caller: ScriptedCaller, plan: Plan, scale: float, *, typed: bool, stop_at: float
) -> tuple[int, int]:
    """Says the script in turn until the time is up; returns (turns asked, turns answered)."""
    loop = asyncio.get_running_loop()
    asked = answered = 0
    for words in itertools.cycle(SCRIPT):
        if loop.time() >= stop_at:
            break
        asked += 1
        try:
            if typed:
                await caller.ask_typed(" ".join(words), timeout=30 * max(scale, 1.0))
            else:
                await caller.ask(words, timeout=30 * max(scale, 0.1))
        except TimeoutError as error:
            print(f"  no answer: {error}", flush=True)
            continue
        answered += 1
        await asyncio.sleep(plan.pause * scale)
    return asked, answered


async def _run_emulator(plan: Plan, scale: float, profile: str) -> int:
    config = EmulatorConfig(
        profile="vertex" if profile == "vertex" else "gemini",
        time_scale=scale,
        rotate_every=plan.rotate_every,
        notice=plan.notice,
        vad_silence=0.3,
        answer_chunks=20,
        chunk_interval=0.05,
        # The script's fault timeline was tuned on an emulator that set up instantly, with no
        # network delay and a handle after every setup; the realistic defaults move the drop
        # into a move in progress.
        setup_latency=0.0,
        round_trip=0.0,
        update_after_setup=True,
    )
    async with Emulator(config) as emulator:
        print(f"emulator ({profile} profile) at {emulator.base_url}", flush=True)
        timeline = Timeline(scale)
        transport = _emulated_transport(emulator, scale)
        _wire(transport, timeline)
        async with ScriptedCaller(
            transport, pace=scale, turn_silence=0.6 * scale, tool_delay=0.3 * scale
        ) as caller:
            caller.add_listener(timeline.caller_event)
            loop = asyncio.get_running_loop()
            stop_at = loop.time() + plan.duration * scale
            await transport.connect()
            caller.start_microphone()

            async def fault() -> None:
                await asyncio.sleep(plan.drop_at * scale)
                timeline.say("FAULT: the connection drops; the first attempt back is refused")
                emulator.faults.refuse_next(1, how="http503")
                emulator.faults.drop()

            fault_task = asyncio.create_task(fault(), name="demo-fault")
            try:
                asked, answered = await _converse(caller, plan, scale, typed=False, stop_at=stop_at)
                await asyncio.sleep(max(0.0, stop_at - loop.time()))
            finally:
                fault_task.cancel()
                await asyncio.gather(fault_task, return_exceptions=True)
            await caller.stop_microphone()
            await transport.disconnect()
        await emulator.wait_disconnected(timeout=5.0)
        summary = caller.summary()
        comparison = summary.compare(emulator.ledger.summary())

    print("\nledger (the emulator's account)")
    print(f"  turns answered          {answered} of {asked} asked")
    print(f"  moves                   {summary.move_outcomes or 'none'}")
    print(f"  answers cut             {len(comparison.chunks_missing)}")
    print(f"  client audio lost       {len(comparison.audio_missing)} chunk(s)")
    print(f"  tool calls stranded     {len(comparison.stranded_tool_responses)}")
    print(f"  unpaired generations    {len(comparison.unpaired_generations)}")
    lost_moves = summary.move_outcomes.get("lost", 0)
    ok = comparison.clean and lost_moves == 0 and answered == asked > 0 and bool(summary.moves)
    print("\nnothing lost" if ok else "\nSOMETHING WAS LOST", flush=True)
    return 0 if ok else 1


async def _run_gemini(plan: Plan) -> int:
    print("real Gemini Live (GOOGLE_API_KEY): typed questions; no emulator ledger", flush=True)
    timeline = Timeline(1.0)
    transport = GeminiLiveTransport(
        api_key=os.environ["GOOGLE_API_KEY"], tools=[WEATHER], system_instruction=INSTRUCTIONS
    )
    _wire(transport, timeline)
    async with ScriptedCaller(transport) as caller:
        caller.add_listener(timeline.caller_event)
        await transport.connect()
        stop_at = asyncio.get_running_loop().time() + plan.duration
        asked, answered = await _converse(caller, plan, 1.0, typed=True, stop_at=stop_at)
        await transport.disconnect()
        summary = caller.summary()
    print(f"\n{summary}")
    ok = answered == asked > 0 and not summary.unpaired_generations
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--target",
        choices=("auto", "emulator", "gemini"),
        default="auto",
        help="auto: real Gemini when GOOGLE_API_KEY is set, else the emulator",
    )
    parser.add_argument("--profile", choices=("gemini", "vertex"), default="gemini")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every duration (emulator only); 0.1 runs the minute in six seconds",
    )
    parser.add_argument("--duration", type=float, default=Plan.duration, help="demo seconds")
    parser.add_argument(
        "--rotate-every", type=float, default=Plan.rotate_every, help="emulator rotation period"
    )
    parser.add_argument(
        "--notice", type=float, default=Plan.notice, help="goAway notice before each rotation"
    )
    args = parser.parse_args(argv)
    if not 0.001 <= args.time_scale <= 10:
        parser.error("--time-scale must be between 0.001 and 10")
    target = args.target
    if target == "auto":
        target = "gemini" if os.environ.get("GOOGLE_API_KEY") else "emulator"
    if target == "gemini" and not os.environ.get("GOOGLE_API_KEY"):
        parser.error("--target gemini needs GOOGLE_API_KEY")
    plan = Plan(duration=args.duration, rotate_every=args.rotate_every, notice=args.notice)
    # The timeline is the demo's output; the library's own log shows only trouble.
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("LOGURU_LEVEL", "WARNING"))
    if target == "gemini":
        return asyncio.run(_run_gemini(plan))
    return asyncio.run(_run_emulator(plan, args.time_scale, args.profile))


if __name__ == "__main__":
    sys.exit(main())
