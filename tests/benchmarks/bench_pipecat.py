"""CPU time per 20 ms input frame and per output chunk through a whole Pipecat pipeline: our
``GeminiLiveLLMService`` against the stock one, in the same pipeline, on the same emulator.

The emulator runs on its own thread (``bench_transport``'s), so the figures are the pipeline
thread's CPU time (``time.thread_time``): Pipecat's frame processing, the service, google-genai,
websockets and TLS. Goal: ours ≤ 1.0× stock. Nothing is asserted; the figures are printed.

    .venv/bin/python tests/benchmarks/bench_pipecat.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench_transport import until
from emulator_thread import EmulatorThread
from google.genai import types
from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    InputTextRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockService
from pipecat.workers.runner import WorkerRunner

from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.testing.emulator import EmulatorConfig, user_audio

MODEL = "gemini-live-2.5-flash-preview"
INPUT_FRAMES = 2000
OUTPUT_CHUNKS = 1000
RUNS = 5
SILENCE = user_audio(1, speech=False)


class _Sink(FrameProcessor):
    """Counts what reaches the end of the pipeline."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs = 0
        self.chunks = 0
        self.ends = 0
        self.changed = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            self.inputs += 1
        elif isinstance(frame, TTSAudioRawFrame):
            self.chunks += 1
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.ends += 1
            self.changed.set()
        await self.push_frame(frame, direction)


async def _pipeline(service: Any, work: Callable[[PipelineWorker, _Sink], Any]) -> float:
    sink = _Sink()
    worker = PipelineWorker(
        Pipeline([service, sink]), cancel_on_idle_timeout=False, enable_rtvi=False
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(worker: Any, frame: Frame) -> None:
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), 30)
    # Both services take input once they have a context (stock: only then).
    await worker.queue_frame(LLMContextFrame(LLMContext()))
    figure: float = await work(worker, sink)
    await worker.stop_when_done()
    await asyncio.wait_for(running, 30)
    return figure


def _input_work(service: Any) -> Callable[[PipelineWorker, _Sink], Any]:
    async def work(worker: PipelineWorker, sink: _Sink) -> float:
        await asyncio.sleep(0.5)  # the connection is up
        start = time.thread_time()
        for first in range(0, INPUT_FRAMES, 50):
            for _ in range(min(50, INPUT_FRAMES - first)):
                frame = InputAudioRawFrame(audio=SILENCE, sample_rate=16_000, num_channels=1)
                await worker.queue_frame(frame)
            await asyncio.sleep(0)
        await until(lambda: sink.inputs >= INPUT_FRAMES)
        if isinstance(service, GeminiLiveLLMService):
            diagnostics = service.transport.get_diagnostics
            await until(lambda: diagnostics().total_sends["audio"].sent >= INPUT_FRAMES)
        return (time.thread_time() - start) * 1e6 / INPUT_FRAMES

    return work


async def _output_work(worker: PipelineWorker, sink: _Sink) -> float:
    await asyncio.sleep(0.5)
    start = time.thread_time()
    await worker.queue_frame(InputTextRawFrame("hello"))
    await until(lambda: sink.ends >= 1)
    return (time.thread_time() - start) * 1e6 / max(1, sink.chunks)


def _ours(http_options: types.HttpOptions) -> GeminiLiveLLMService:
    return GeminiLiveLLMService(
        api_key="bench",
        http_options=http_options,
        settings=GeminiLiveLLMService.Settings(model=MODEL),
    )


def _stock(http_options: types.HttpOptions) -> StockService:
    return StockService(
        api_key="bench",
        http_options=http_options,
        settings=StockService.Settings(model=MODEL),
    )


def _figure(samples: list[float]) -> str:
    # The minimum estimates the intrinsic cost on a shared machine; the median shows the spread.
    return f"{min(samples):7.1f} (median {statistics.median(samples):6.1f})"


async def main() -> None:
    print(f"CPU microseconds per frame (pipeline thread), best of {RUNS} interleaved runs")
    results: dict[str, list[float]] = {"stock": [], "ours": []}
    with EmulatorThread(EmulatorConfig(vad_silence=3600.0)) as server:
        http_options = server.http_options
        for _ in range(RUNS):
            service = _stock(http_options)
            results["stock"].append(await _pipeline(service, _input_work(service)))
            service = _ours(http_options)
            results["ours"].append(await _pipeline(service, _input_work(service)))
    print(f"input  ({INPUT_FRAMES} x 20 ms InputAudioRawFrame, until written to the socket)")
    print(f"  stock GeminiLiveLLMService {_figure(results['stock'])}")
    print(f"  ours  GeminiLiveLLMService {_figure(results['ours'])}")
    print(f"  ours / stock               {min(results['ours']) / min(results['stock']):7.2f}x")

    results = {"stock": [], "ours": []}
    config = EmulatorConfig(answer_chunks=OUTPUT_CHUNKS, chunk_interval=0.0)
    with EmulatorThread(config) as server:
        http_options = server.http_options
        for _ in range(RUNS):
            results["stock"].append(await _pipeline(_stock(http_options), _output_work))
            results["ours"].append(await _pipeline(_ours(http_options), _output_work))
    print(f"output ({OUTPUT_CHUNKS} x 40 ms answer chunks, to TTSAudioRawFrame at the sink)")
    print(f"  stock GeminiLiveLLMService {_figure(results['stock'])}")
    print(f"  ours  GeminiLiveLLMService {_figure(results['ours'])}")
    print(f"  ours / stock               {min(results['ours']) / min(results['stock']):7.2f}x")


if __name__ == "__main__":
    from loguru import logger

    logger.remove()  # the figures, not the pipeline's debug log
    asyncio.run(main())
