"""Client CPU per second of call, for each stack of ``make demo`` on the same script.

Each stack runs the same call in turn: a caller streaming 20 ms microphone chunks in real
time, a question every few seconds (one of them calls the tool), its answers played in real
time, and the emulator rotating the connection (goAway with notice) twice. The emulator runs
in a process of its own (``python -m realtime_resumption.testing.emulator``), so the figure is
this process's CPU time alone (``time.process_time``: every thread, a framework's native ones
included) over the call's wall time, beside the answer chunks the caller heard (a stack that
loses part of the call at a move delivers less, and so spends less). Each lane runs
``--runs`` times, the rounds interleaved, and its best run counts. Printed, not asserted;
ours over stock should be <= 1.05x.

    .venv/bin/python tests/benchmarks/bench_stacks.py [--seconds 40] [--runs 3]
        [--profile pipecat-ours]   # cProfile of one lane's call (its event loop thread's CPU)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import logging
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import profiling
from google.genai import types
from loguru import logger

# The demo's stacks live in examples/ at the repository root (not an installed package).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.demo.call import FINAL, HELLO, WEATHER_Q, CallRecord, Ear, Microphone
from examples.demo.lanes import all_lanes
from examples.demo.stacks import Lane, StackContext
from realtime_resumption.testing.emulator.caller import ScriptedCaller

ROTATE_EVERY = 15.0
NOTICE = 5.0
ASK_EVERY = 4.0
SETTLE = 2.0
"""Seconds after the stack starts before the measured call begins (connect, greeting)."""


@contextlib.asynccontextmanager
async def emulator_process() -> AsyncIterator[types.HttpOptions]:
    """The emulator in a child process, rotating connections; yields the SDK options."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "realtime_resumption.testing.emulator",
        "--rotate-every",
        str(ROTATE_EVERY),
        "--notice",
        str(NOTICE),
        "--answer-chunks",
        "50",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            base_url = (await process.stdout.readline()).decode().split()[-1]
            ca_file = (await process.stdout.readline()).decode().split()[-1]
        context = ssl.create_default_context(cafile=ca_file)
        yield types.HttpOptions(base_url=base_url, async_client_args={"ssl": context})
    finally:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def measure(
    lane: Lane,
    http_options: types.HttpOptions,
    seconds: float,
    profiler: cProfile.Profile | None = None,
) -> tuple[float, int]:
    """CPU seconds per second of call on ``lane``'s stack, and the answer chunks the caller
    heard meanwhile (the work the stack delivered: one that loses part of the call at a move
    does less); ``profiler`` runs over the measured call."""
    loop = asyncio.get_running_loop()
    started = loop.time()

    def clock() -> float:
        return loop.time() - started

    record = CallRecord()
    ear = Ear(clock)
    context = StackContext(http_options, ear, record, clock, lambda kind, text: None)
    stack = lane.factory(context)
    questions = (HELLO, WEATHER_Q, FINAL)
    try:
        await stack.start()
        async with ScriptedCaller(Microphone(stack), turn_silence=0.0) as caller:
            caller.start_microphone()
            await asyncio.sleep(SETTLE)
            if profiler is not None:
                profiler.enable()
            cpu, wall, heard = time.process_time(), loop.time(), len(ear.chunks)
            asked = 0
            while loop.time() - wall < seconds:
                question = questions[asked % len(questions)]
                caller.say(question.words, speech_chunks=40)
                asked += 1
                await asyncio.sleep(ASK_EVERY)
            cpu, wall = time.process_time() - cpu, loop.time() - wall
            heard = len(ear.chunks) - heard
            if profiler is not None:
                profiler.disable()
            await caller.stop_microphone()
    finally:
        await stack.stop()
    if record.errors or record.closed:
        print(f"  {lane.title}: {len(record.errors)} error(s), closed: {record.closed}")
    return cpu / wall, heard


async def profile(key: str, seconds: float) -> None:
    """Profile one lane's call: the top entries by own and by cumulative time of its event
    loop thread's CPU (not the wall clock, which another process's turn would inflate)."""
    lane = next(lane for lane in all_lanes() if lane.key == key)
    profiler = cProfile.Profile(time.thread_time)
    async with emulator_process() as http_options:
        figure, heard = await measure(lane, http_options, seconds, profiler)
    profiling.report(profiler, f"bench_stacks_{key}.prof")
    print(f"{lane.title}: {figure * 1000:.1f} ms CPU per s of call (profiled), heard {heard}")


async def main(seconds: float, runs: int) -> None:
    lanes = all_lanes()
    results: dict[str, list[tuple[float, int]]] = {lane.key: [] for lane in lanes}
    # Rounds interleave the lanes, so a burst of load elsewhere falls on all of them; the
    # best run of each lane counts (load on a shared machine only adds time).
    for round_ in range(runs):
        for lane in lanes:
            async with emulator_process() as http_options:
                results[lane.key].append(await measure(lane, http_options, seconds))
            figure, heard = results[lane.key][-1]
            print(
                f"round {round_ + 1}: {lane.title:40} {figure * 1000:7.1f} ms CPU per s of call, "
                f"{heard} answer chunks heard"
            )
    best = {key: min(runs_) for key, runs_ in results.items()}
    print()
    for lane in lanes:
        figure, heard = best[lane.key]
        print(
            f"{lane.title:40} {figure * 1000:7.1f} ms CPU per s of call (best of {runs}), "
            f"{heard} answer chunks heard"
        )
    for lane in (lane for lane in lanes if lane.ours):
        stock = [o for o in lanes if not o.ours and o.framework == lane.framework]
        for other in stock:
            ratio = best[lane.key][0] / best[other.key][0]
            work = best[lane.key][1] / max(1, best[other.key][1])
            print(
                f"{lane.title} / {other.title}: {ratio:.2f}x (goal <= 1.05x), "
                f"having delivered {work:.2f}x the answer audio"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="measured call length")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds; the best counts")
    parser.add_argument(
        "--profile", choices=[lane.key for lane in all_lanes()], help="profile one lane's call"
    )
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("LOGURU_LEVEL", "ERROR"))
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(
        profile(args.profile, args.seconds)
        if args.profile
        else main(args.seconds, max(1, args.runs))
    )
