"""Client CPU per second of call audio: the bare google-genai SDK, the wire floor (``floor``:
fixed JSON text per chunk on the SDK's WebSocket), our transport, and each framework's stock
Gemini service against ours, on the same call, in one run (no rotation unless
``--rotate-every``).

The call: 20 ms chunks of 16 kHz PCM16 streamed at the call's pace, a second of speech every
ten seconds of audio, and the emulator's answers (50 chunks of 40 ms at 24 kHz) received and
delivered. The emulator runs in a process of its own with ``time_scale`` (default 0.1: a minute
of call takes six seconds), and the client paces its chunks on the same scale, so the chunk
and answer counts are a real call's while the wall clock runs faster. The figure is this
process's CPU (``time.process_time``: every thread, a framework's native ones included) per
second of call audio; each stack runs ``--runs`` times, interleaved, and the best run counts
(load on a shared machine only adds time). Ratios are printed from the same run.

The call and its counting are ``paced_call``'s (shared with ``bench_openai_cpu``), which says
how the time scale weighs work done per second of wall clock rather than per chunk.

    .venv/bin/python tests/benchmarks/bench_cpu.py [--seconds 60] [--runs 3]
        [--stacks sdk,floor,transport,pipecat-stock,pipecat-ours,livekit-stock,livekit-ours]
        [--profile transport]   # cProfile of one stack's call: the top by own and cumulative time
        [--callgrind --scale 3 --seconds 10]   # instructions instead of CPU time (repeatable)
        [--sessions 10 --scale 1 --stacks sdk,transport]   # many calls in one process
        [--rotate-every 15]   # the emulator moves each connection (goAway 5 s before)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import callgrind
import paced_call
import profiling
import wire_floor
from emulator_process import EmulatorProcess
from google import genai
from google.genai import types
from loguru import logger
from paced_call import Call

from realtime_resumption.testing.emulator import EmulatorConfig, user_audio

MODEL = "gemini-live-2.5-flash-preview"
ANSWER_CHUNKS = 50
NOTICE = 5.0
"""goAway ``timeLeft`` (call seconds) before each rotation, with ``--rotate-every``."""

_SPEECH_PCM = user_audio(0, speech=True)
_SILENCE_PCM = user_audio(0, speech=False)


# --- stacks ------------------------------------------------------------------------------------


async def sdk(call: Call, http_options: types.HttpOptions) -> float:
    client = genai.Client(api_key="bench", http_options=http_options)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    async with client.aio.live.connect(model=MODEL, config=config) as session:

        async def receive() -> None:
            while True:
                async for message in session.receive():
                    content = message.server_content
                    if content and content.model_turn:
                        for part in content.model_turn.parts or ():
                            if part.inline_data and part.inline_data.data:
                                call.answers += 1

        async def send(pcm: bytes) -> None:
            await session.send_realtime_input(
                audio=types.Blob(data=pcm, mime_type="audio/pcm;rate=16000")
            )

        receiving = asyncio.create_task(receive())
        try:
            return await call.stream(send)
        finally:
            receiving.cancel()


async def floor(call: Call, http_options: types.HttpOptions) -> float:
    """The wire floor (``wire_floor``) on the SDK's connection."""
    client = genai.Client(api_key="bench", http_options=http_options)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    async with client.aio.live.connect(model=MODEL, config=config) as session:

        async def send(pcm: bytes) -> None:
            await wire_floor.send(session, pcm)

        receiving = asyncio.create_task(wire_floor.drain(session))
        try:
            return await call.stream(send)
        finally:
            receiving.cancel()


async def transport(call: Call, http_options: types.HttpOptions) -> float:
    from realtime_resumption.gemini import GeminiLiveTransport

    ours = GeminiLiveTransport(api_key="bench", http_options=http_options, model=MODEL)

    def answered(_pcm: bytes) -> None:
        call.answers += 1

    ours.on_audio_output = answered
    await ours.connect()
    try:
        return await call.stream(ours.send_audio)
    finally:
        await ours.disconnect()


def _pipecat(kind: str) -> Callable[[Call, types.HttpOptions], Awaitable[float]]:
    async def run(call: Call, http_options: types.HttpOptions) -> float:
        from pipecat.frames.frames import (
            Frame,
            InputAudioRawFrame,
            LLMContextFrame,
            TTSAudioRawFrame,
        )
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineWorker
        from pipecat.processors.aggregators.llm_context import LLMContext
        from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
        from pipecat.workers.runner import WorkerRunner

        service: Any
        if kind == "stock":
            from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as Stock

            service = Stock(
                api_key="bench", http_options=http_options, settings=Stock.Settings(model=MODEL)
            )
        else:
            from realtime_resumption.pipecat import GeminiLiveLLMService as Ours

            service = Ours(
                api_key="bench", http_options=http_options, settings=Ours.Settings(model=MODEL)
            )

        class Sink(FrameProcessor):
            async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
                await super().process_frame(frame, direction)
                if isinstance(frame, TTSAudioRawFrame):
                    call.answers += 1
                await self.push_frame(frame, direction)

        worker = PipelineWorker(
            Pipeline([service, Sink()]), cancel_on_idle_timeout=False, enable_rtvi=False
        )
        started = asyncio.Event()

        @worker.event_handler("on_pipeline_started")
        async def _started(worker: Any, frame: Frame) -> None:
            started.set()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        try:
            await asyncio.wait_for(started.wait(), 30)
            await worker.queue_frame(LLMContextFrame(LLMContext()))

            async def send(pcm: bytes) -> None:
                frame = InputAudioRawFrame(audio=pcm, sample_rate=16_000, num_channels=1)
                await worker.queue_frame(frame)

            return await call.stream(send)
        finally:
            await worker.cancel()
            await asyncio.wait_for(running, 30)

    return run


def _livekit(kind: str) -> Callable[[Call, types.HttpOptions], Awaitable[float]]:
    async def run(call: Call, http_options: types.HttpOptions) -> float:
        from livekit import rtc
        from livekit.agents import Agent, AgentSession, llm
        from livekit.agents.voice.io import AudioInput

        model: llm.RealtimeModel
        if kind == "stock":
            from livekit.plugins import google

            model = google.realtime.RealtimeModel(api_key="bench", http_options=http_options)
        else:
            from livekit.plugins import realtime_resumption as rr

            model = rr.RealtimeModel(api_key="bench", http_options=http_options)

        frames: asyncio.Queue[rtc.AudioFrame] = asyncio.Queue()

        class Microphone(AudioInput):
            def __init__(self) -> None:
                super().__init__(label="bench-microphone")

            async def __anext__(self) -> rtc.AudioFrame:
                return await frames.get()

        session = AgentSession(llm=model, aec_warmup_duration=None)
        session.input.audio = Microphone()
        await session.start(Agent(instructions="Listen."))

        def send(pcm: bytes) -> None:
            frames.put_nowait(rtc.AudioFrame(pcm, 16_000, 1, len(pcm) // 2))

        try:
            return await call.stream(send)
        finally:
            await session.aclose()

    return run


STACKS: dict[str, Callable[[Call, types.HttpOptions], Awaitable[float]]] = {
    "sdk": sdk,
    "floor": floor,
    "transport": transport,
    "pipecat-stock": _pipecat("stock"),
    "pipecat-ours": _pipecat("ours"),
    "livekit-stock": _livekit("stock"),
    "livekit-ours": _livekit("ours"),
}
RATIOS = (
    ("transport", "sdk", "<= 1.1x; <= 1.25x with many sessions"),
    ("transport", "floor", "none: the floor is the least a client does per chunk"),
    ("pipecat-ours", "pipecat-stock", "<= 1.0x"),
    ("livekit-ours", "livekit-stock", "<= 1.0x"),
)


async def measure(
    name: str,
    seconds: float,
    scale: float,
    profile: bool,
    sessions: int = 1,
    rotate_every: float | None = None,
) -> tuple[float, int]:
    """(CPU ms per second of call audio and session, answer chunks seen) of ``sessions``
    calls at once on ``name``, in this process; with ``rotate_every``, the emulator rotates
    each connection at that age (call seconds), goAway ``NOTICE`` before."""
    calls = [Call(seconds, scale, _SPEECH_PCM, _SILENCE_PCM) for _ in range(sessions)]
    # Prompt pongs: the service's late ones (8-30 s, scaled) outlast the SDK's keepalive
    # timeout, which would close the stock stacks' connections mid-call (ours waits longer).
    config = EmulatorConfig(
        time_scale=scale,
        answer_chunks=ANSWER_CHUNKS,
        pong_latency=0.0,
        rotate_every=rotate_every,
        notice=NOTICE,
    )
    async with EmulatorProcess(config) as server:
        assert server.http_options is not None
        options = server.http_options
        # The event loop thread's CPU time, not the wall clock: on a shared machine another
        # process's turn would count against whatever function it interrupted.
        profiler = cProfile.Profile(time.thread_time) if profile else None
        paced_call.profile(profiler)
        # The calls stream over the same stretch of time: each measures the process's CPU
        # over it, so their mean is the CPU of all of them.
        cpus = await asyncio.gather(*(STACKS[name](call, options) for call in calls))
        if profiler is not None:
            paced_call.profile(None)
            profiling.report(profiler, f"bench_cpu_{name}.prof")
    cpu = statistics.mean(cpus) / sessions
    late = max(call.late for call in calls)
    if late > 0.1:
        print(f"  {name}: fell behind the call's pace by up to {late:.2f} s of call")
    return cpu * 1000 / calls[0].seconds, sum(call.answers for call in calls)


def instructions(
    name: str,
    seconds: float,
    scale: float,
    sessions: int = 1,
    rotate_every: float | None = None,
) -> float:
    """Millions of instructions per second of call and session on ``name``, counted by callgrind in a
    child process (this script, one run of one stack, collecting during the call only):
    unlike CPU time, the count repeats on a shared machine. The scale must leave room for
    valgrind's slowdown (3: a 20 ms chunk every 60 ms)."""
    arguments = [
        f"--seconds={seconds}",
        f"--scale={scale}",
        "--runs=1",
        f"--stacks={name}",
        f"--sessions={sessions}",
        *([f"--rotate-every={rotate_every}"] if rotate_every is not None else []),
    ]
    instructions, output = callgrind.count(__file__, arguments, name)
    for line in output.splitlines():
        if "fell behind" in line:
            print(line)
    return instructions / 1e6 / seconds / sessions


async def main(args: argparse.Namespace) -> None:
    names = args.stacks.split(",")
    unknown = set(names) - set(STACKS)
    if unknown:
        raise SystemExit(f"unknown stacks: {', '.join(sorted(unknown))}")
    if args.callgrind:
        counts = {
            name: instructions(name, args.seconds, args.scale, args.sessions, args.rotate_every)
            for name in names
        }
        print(
            f"Instructions per second of call audio (callgrind, {args.seconds:.0f} s of 20 ms "
            f"chunks, time scale {args.scale}, {args.sessions} session(s) at once, per session)"
        )
        for name in names:
            print(f"  {name:14} {counts[name]:7.1f} M")
        for ours, theirs, goal in RATIOS:
            if ours in counts and theirs in counts:
                print(f"  {ours} / {theirs}: {counts[ours] / counts[theirs]:.2f}x (goal {goal})")
        return
    if args.profile:
        figure, answers = await measure(
            args.profile, args.seconds, args.scale, True, args.sessions, args.rotate_every
        )
        print(f"{args.profile}: {figure:.2f} ms CPU per s of call (profiled), {answers} answers")
        return
    figures: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.runs):
        for name in names:
            figure, answers = await measure(
                name, args.seconds, args.scale, False, args.sessions, args.rotate_every
            )
            figures[name].append(figure)
            print(f"  {name:14} {figure:6.2f} ms CPU per s of call ({answers} answer chunks)")
    print(
        f"\nCPU per second of call audio ({args.seconds:.0f} s of 20 ms chunks, time scale "
        f"{args.scale}, {args.sessions} session(s) at once, per session), best of {args.runs} "
        "interleaved runs"
    )
    for name in names:
        samples = figures[name]
        print(f"  {name:14} {min(samples):6.2f} ms (median {statistics.median(samples):6.2f})")
    for ours, theirs, goal in RATIOS:
        if ours in figures and theirs in figures:
            ratio = min(figures[ours]) / min(figures[theirs])
            print(f"  {ours} / {theirs}: {ratio:.2f}x (goal {goal})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="call audio per run")
    parser.add_argument("--scale", type=float, default=0.1, help="the emulator's time scale")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--sessions", type=int, default=1, help="calls at once in this process (use --scale 1)"
    )
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument(
        "--rotate-every",
        type=float,
        default=None,
        help="the emulator rotates each connection at this age (call seconds; default: never)",
    )
    parser.add_argument("--profile", choices=sorted(STACKS), help="profile one stack's call")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions under valgrind instead (use --scale 3 --seconds 10)",
    )
    logger.remove()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(main(parser.parse_args()))
