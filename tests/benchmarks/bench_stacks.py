"""Client CPU per second of call, for each stack of ``make demo`` on the same script.

Each stack runs the same call in turn: a caller streaming 20 ms microphone chunks in real
time, a question every few seconds (one of them calls the tool), its answers played in real
time, and the emulator rotating the connection (goAway with notice) twice. The emulator runs
in a process of its own, so the figure is this process's CPU time alone
(``time.process_time``: every thread, a framework's native ones included) over the call's
wall time, beside the answer chunks the caller heard (a stack that loses part of the call at a
move delivers less, and so spends less), the questions answered, and how far the microphone
fell behind its pace. Each lane runs ``--runs`` times, the rounds interleaved, and its best
run counts. Printed, not asserted; ours over stock should be <= 1.05x.

CPU time on a shared machine varies too much to judge 5 % (one lane's figure went from 58 to
96 ms per s within a run): ``--callgrind`` counts instructions instead, which repeat. Each lane
runs once in a child process of its own under valgrind (this script again, counting during
the measured call only). Valgrind slows the child many times, so the call is time-scaled
(``--scale``): the emulator's ``time_scale`` (answer chunk pace, setup latency, rotations and
their notice), the microphone's pace, the playback of the answers and the bench's waits are all
``scale`` times slower, so each stack gets the same call (the same chunks, questions, answers
and moves) spread over ``scale`` times the wall clock. The emulator's VAD silence is divided by
the scale (its turns end after 0.5 s of silent audio, as in the real-time call), and its pongs
are prompt (a real-time call's 15 s connections never reach the SDK's first keepalive ping at
20 s; a scaled call's do, and the service's late pongs would outlast the SDK's timeout).

Wall-clock timers inside the frameworks and services do not scale: the SDK's keepalive pings
(every 20 s), Pipecat's "bot stopped speaking" fallback wait (3 s), LiveKit's user-away timer
(15 s), our transport's write watchdog (each 10 s per connection), the demo tool's 0.2 s
lookup. At scale ``s`` such work comes ``s`` times as often per second of call as in a real
call, so the figure overstates it, on whichever side owns the timer (a framework's own timers
weigh on stock and ours alike); comparing two scales separates the two kinds of work. Use the smallest scale at which no lane falls behind: ``late`` under 0.1 s, no
errors, every lane through its rotations answering as in real time (stock Pipecat loses the
answer in flight at each move either way). On this 2-core machine that is 8 (at 6, stock
Pipecat's loop stalled 0.15 s of call at a move); a 40 s call then takes 6 minutes per lane.

    .venv/bin/python tests/benchmarks/bench_stacks.py [--seconds 40] [--runs 3]
        [--lanes pipecat-stock,pipecat-ours,livekit-stock,livekit-ours]
        [--profile pipecat-ours]   # cProfile of one lane's call (its event loop thread's CPU)
        [--callgrind --scale 8]   # instructions instead of CPU time (repeatable)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path

import callgrind
import profiling
from emulator_process import EmulatorProcess
from loguru import logger

# The demo's stacks live in examples/ at the repository root (not an installed package).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.demo.call import FINAL, HELLO, MIC_CHUNK, WEATHER_Q, CallRecord, Ear, Microphone
from examples.demo.lanes import all_lanes
from examples.demo.stacks import Lane, StackContext
from realtime_resumption.testing.emulator import EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerRecord, ScriptedCaller
from realtime_resumption.testing.emulator.ledger import Ledger

ROTATE_EVERY = 15.0
NOTICE = 5.0
ASK_EVERY = 4.0
SETTLE = 2.0
"""Seconds after the stack starts before the measured call begins (connect, greeting)."""
QUESTIONS = (HELLO, WEATHER_Q, FINAL)
_CHILD_FIGURES = "figures: "
"""Prefix of the line a ``--callgrind`` child prints its call's figures on."""


@dataclasses.dataclass(frozen=True)
class CallFigures:
    """What one lane's measured call did (times in seconds of call)."""

    cpu: float
    """CPU seconds per second of call (meaningless under valgrind)."""
    heard: int
    """Answer chunks the caller heard during the call."""
    asked: int
    answered: int
    """Questions of which the caller heard some of the answer."""
    late: float
    """The most the microphone fell behind its pace during the call: a stack that does not
    keep up (valgrind, a loaded machine) delays the chunks, and its figure is not a paced
    call's."""
    errors: int
    """Errors the stack surfaced to the application."""
    closed: str | None
    """Why the stack ended the call itself, if it did."""
    connections: int
    """Connections the emulator established (the rotations' replacements included)."""
    resumed: int
    sessions: int

    def __str__(self) -> str:
        closed = f", closed: {self.closed}" if self.closed else ""
        return (
            f"{self.heard} answer chunks heard, {self.answered}/{self.asked} questions "
            f"answered, late {self.late:.2f} s, {self.errors} error(s){closed}, "
            f"{self.connections} connections ({self.resumed} resumed, {self.sessions} "
            "session(s))"
        )


def emulator(scale: float) -> EmulatorProcess:
    """The call's emulator in a child process: rotating connections, ``scale`` times slower."""
    vad_silence = EmulatorConfig().vad_silence
    return EmulatorProcess(
        EmulatorConfig(
            time_scale=scale,
            rotate_every=ROTATE_EVERY,
            notice=NOTICE,
            answer_chunks=50,
            # The VAD counts silence in audio time against its scaled figure: unscaled, a turn
            # ends after the same 0.5 s of silent audio as in the real-time call.
            vad_silence=vad_silence / scale,
            pong_latency=0.0,
        )
    )


def microphone_late(record: CallerRecord, since: float, scale: float) -> float:
    """How far (seconds of call) the microphone fell behind its pace after ``since``: the
    largest growth of a chunk's lag behind its schedule over the lag of an earlier one."""
    interval = MIC_CHUNK * scale
    least, late = float("inf"), 0.0
    for index, sent in enumerate(record.audio):
        if sent.at < since:
            continue
        lag = sent.at - index * interval
        least = min(least, lag)
        late = max(late, lag - least)
    return late / scale


def answered(ledger: Ledger, ear: Ear) -> int:
    """Question turns of which the caller heard a chunk. Turn ids count per session: a stack
    that opened a new session may mix its turns with the old one's (``sessions`` says so)."""
    keys = {question.key for question in QUESTIONS}
    heard = {chunk.turn for chunk in ear.chunks}
    return sum(
        1
        for session in ledger.sessions.values()
        for turn in session.turns.values()
        if keys & set(turn.user_text.split()) and turn.turn in heard
    )


async def measure(
    lane: Lane, seconds: float, scale: float, profiler: cProfile.Profile | None = None
) -> CallFigures:
    """One call on ``lane``'s stack, ``scale`` times slower than real time; ``profiler`` and
    callgrind (when this process runs under it) count over the measured call only."""
    loop = asyncio.get_running_loop()
    started = loop.time()

    def clock() -> float:
        return loop.time() - started

    record = CallRecord()
    ear = Ear(clock, pace=scale)
    async with emulator(scale) as server:
        assert server.http_options is not None
        context = StackContext(server.http_options, ear, record, clock, lambda kind, text: None)
        stack = lane.factory(context)
        try:
            await stack.start()
            microphone = Microphone(stack)
            async with ScriptedCaller(microphone, pace=scale, turn_silence=0.0) as caller:
                caller.start_microphone()
                await asyncio.sleep(SETTLE * scale)
                callgrind.measure("on")
                if profiler is not None:
                    profiler.enable()
                cpu, wall, heard = time.process_time(), loop.time(), len(ear.chunks)
                asked = 0
                while loop.time() - wall < seconds * scale:
                    question = QUESTIONS[asked % len(QUESTIONS)]
                    caller.say(question.words, speech_chunks=40)
                    asked += 1
                    await asyncio.sleep(ASK_EVERY * scale)
                cpu, elapsed = time.process_time() - cpu, loop.time() - wall
                heard = len(ear.chunks) - heard
                if profiler is not None:
                    profiler.disable()
                callgrind.measure("off")
                late = microphone_late(caller.record, wall, scale)
                await caller.stop_microphone()
        finally:
            await stack.stop()
        ledger = await server.ledger()
    connections = [c for s in ledger.sessions.values() for c in s.connections if c.established]
    return CallFigures(
        cpu=cpu / elapsed,
        heard=heard,
        asked=asked,
        answered=answered(ledger, ear),
        late=late,
        errors=len(record.errors),
        closed=record.closed,
        connections=len(connections),
        resumed=sum(1 for c in connections if c.resumed_from is not None),
        sessions=len(ledger.sessions),
    )


def lane_of(key: str) -> Lane:
    return next(lane for lane in all_lanes() if lane.key == key)


async def profile(key: str, seconds: float, scale: float) -> None:
    """Profile one lane's call: the top entries by own and by cumulative time of its event
    loop thread's CPU (not the wall clock, which another process's turn would inflate)."""
    lane = lane_of(key)
    profiler = cProfile.Profile(time.thread_time)
    figures = await measure(lane, seconds, scale, profiler)
    profiling.report(profiler, f"bench_stacks_{key}.prof")
    print(f"{lane.title}: {figures.cpu * 1000:.1f} ms CPU per s of call (profiled), {figures}")


def ratios(lanes: list[Lane], figure: dict[str, float], figures: dict[str, CallFigures]) -> None:
    """Each of our lanes over its framework's stock lane, beside the answer audio delivered."""
    for lane in (lane for lane in lanes if lane.ours):
        for other in (o for o in lanes if not o.ours and o.framework == lane.framework):
            ratio = figure[lane.key] / figure[other.key]
            work = figures[lane.key].heard / max(1, figures[other.key].heard)
            print(
                f"{lane.title} / {other.title}: {ratio:.3f}x (goal <= 1.05x), "
                f"having delivered {work:.2f}x the answer audio"
            )


async def child(key: str, seconds: float, scale: float) -> None:
    """One call on one lane, its figures printed on one line (a ``--callgrind`` child)."""
    figures = await measure(lane_of(key), seconds, scale)
    print(_CHILD_FIGURES + json.dumps(dataclasses.asdict(figures)), flush=True)


def instructions(lanes: list[Lane], seconds: float, scale: float) -> None:
    """Millions of instructions per second of call on each lane, each counted by callgrind in
    a child process of its own (this script, one call, counting during the measured call)."""
    counts: dict[str, float] = {}
    figures: dict[str, CallFigures] = {}
    for lane in lanes:
        began = time.monotonic()
        arguments = [f"--child={lane.key}", f"--seconds={seconds}", f"--scale={scale}"]
        count, output = callgrind.count(__file__, arguments, lane.title)
        line = next(line for line in output.splitlines() if line.startswith(_CHILD_FIGURES))
        figures[lane.key] = CallFigures(**json.loads(line.removeprefix(_CHILD_FIGURES)))
        counts[lane.key] = count / 1e6 / seconds
        print(
            f"{lane.title:16} {counts[lane.key]:8.1f} M instructions per s of call, "
            f"{figures[lane.key]} ({time.monotonic() - began:.0f} s under valgrind)",
            flush=True,
        )
    print(f"\n(callgrind, {seconds:.0f} s of call at time scale {scale})")
    ratios(lanes, counts, figures)


async def main(lanes: list[Lane], seconds: float, runs: int, scale: float) -> None:
    results: dict[str, list[CallFigures]] = {lane.key: [] for lane in lanes}
    # Rounds interleave the lanes, so a burst of load elsewhere falls on all of them; the
    # best run of each lane counts (load on a shared machine only adds time).
    for round_ in range(runs):
        for lane in lanes:
            figures = await measure(lane, seconds, scale)
            results[lane.key].append(figures)
            print(
                f"round {round_ + 1}: {lane.title:16} {figures.cpu * 1000:7.1f} ms CPU per s of "
                f"call, {figures}",
                flush=True,
            )
    best = {key: min(runs_, key=lambda figures: figures.cpu) for key, runs_ in results.items()}
    print()
    for lane in lanes:
        figures = best[lane.key]
        print(
            f"{lane.title:16} {figures.cpu * 1000:7.1f} ms CPU per s of call (best of {runs}), "
            f"{figures}"
        )
    ratios(lanes, {key: figures.cpu for key, figures in best.items()}, best)


if __name__ == "__main__":
    keys = [lane.key for lane in all_lanes()]
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="measured call length")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds; the best counts")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="wall-clock seconds per second of call (valgrind needs room: --callgrind --scale 8)",
    )
    parser.add_argument("--lanes", default=",".join(keys), help="the lanes, comma-separated")
    parser.add_argument("--profile", choices=keys, help="profile one lane's call")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions under valgrind instead, one call per lane (use --scale 8)",
    )
    parser.add_argument("--child", choices=keys, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.scale > 0:
        parser.error("--scale must be > 0")
    chosen = args.lanes.split(",")
    unknown = set(chosen) - set(keys)
    if unknown:
        parser.error(f"unknown lanes: {', '.join(sorted(unknown))}")
    lanes = [lane for lane in all_lanes() if lane.key in chosen]
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("LOGURU_LEVEL", "ERROR"))
    logging.basicConfig(level=logging.ERROR)
    if args.callgrind:
        instructions(lanes, args.seconds, args.scale)
    elif args.child:
        asyncio.run(child(args.child, args.seconds, args.scale))
    elif args.profile:
        asyncio.run(profile(args.profile, args.seconds, args.scale))
    else:
        asyncio.run(main(lanes, args.seconds, max(1, args.runs), args.scale))
