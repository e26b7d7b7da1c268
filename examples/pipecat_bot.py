"""A Pipecat Gemini Live bot whose session survives connection rotation.

The stock bot's shape (context and aggregator pair, a tool, the LLMRunFrame greeting,
PipelineWorker and WorkerRunner) with one changed import. The caller types its questions
(``InputTextRawFrame``) and a sink counts the bot's audio, so it runs anywhere:

    python -m examples.pipecat_bot     # offline, on the bundled emulator, which rotates the
                                       # connection every few seconds
    GOOGLE_API_KEY=... python -m examples.pipecat_bot   # the real Gemini Live service
"""

from __future__ import annotations

import asyncio
import os

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    Frame,
    FunctionCallResultFrame,
    InputTextRawFrame,
    LLMRunFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams
from pipecat.workers.runner import WorkerRunner

from realtime_resumption.frames import (
    GenerationEndedFrame,
    GoAwayFrame,
    SessionMovedFrame,
)
from realtime_resumption.pipecat import GeminiLiveLLMService  # the one changed import
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

QUESTIONS = ["hello", "what is the weather in Paris", "thank you"]
ANSWER_TIMEOUT = 30.0
PAUSE = 1.5
"""Seconds the caller takes between an answer and the next question. A session moves at such
pauses: while the caller talks it stays on the old connection (until the connection's deadline)."""


async def get_weather(params: FunctionCallParams) -> None:
    await params.result_callback({"city": params.arguments.get("city", "Paris"), "sky": "sunny"})


WEATHER = ToolsSchema(
    standard_tools=[
        FunctionSchema(
            name="weather",
            description="The weather in a city.",
            properties={"city": {"type": "string"}},
            required=[],
        )
    ]
)


class Console(FrameProcessor):
    """Prints what the session does and counts the bot's audio."""

    def __init__(self, show: list[str]) -> None:
        super().__init__()
        self._lines = show
        self.audio_bytes = 0
        self.answered = asyncio.Event()

    def show(self, line: str) -> None:
        self._lines.append(line)
        print(line, flush=True)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio_bytes += len(frame.audio)
        elif isinstance(frame, FunctionCallResultFrame):
            self.show(f"tool {frame.function_name}: {frame.result}")
        elif isinstance(frame, GoAwayFrame):
            self.show("service: goAway")
        elif isinstance(frame, SessionMovedFrame) and frame.report is not None:
            report = frame.report
            self.show(f"move {report.number}: {report.outcome.value}, gap {report.gap_ms:.0f} ms")
        elif isinstance(frame, GenerationEndedFrame):
            self.show(f"bot answered ({frame.reason.value})")
            self.answered.set()
        await self.push_frame(frame, direction)


async def main(emulator: Emulator | None = None) -> list[str]:
    """Runs the bot through its questions; returns the lines it printed."""
    lines: list[str] = []
    api_key = os.environ.get("GOOGLE_API_KEY")
    options = {} if api_key else {"http_options": emulator.http_options()} if emulator else {}
    llm = GeminiLiveLLMService(
        api_key=api_key or "emulator-key",
        system_instruction="You are a friendly assistant. Keep answers short.",
        tools=WEATHER,
        **options,
    )
    llm.register_function("weather", get_weather)
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(context)
    console = Console(lines)
    pipeline = Pipeline([aggregators.user(), llm, console, aggregators.assistant()])
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        cancel_on_idle_timeout=False,
    )

    async def converse() -> None:
        await worker.queue_frame(LLMRunFrame())  # the greeting
        await _answer(console)
        for question in QUESTIONS:
            await asyncio.sleep(PAUSE)
            console.show(f"user: {question}")
            await worker.queue_frame(InputTextRawFrame(question))
            await _answer(console)
        await worker.stop_when_done()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), converse())
    console.show(f"bot audio: {console.audio_bytes / 48_000:.1f} s")
    return lines


async def _answer(console: Console) -> None:
    console.answered.clear()
    async with asyncio.timeout(ANSWER_TIMEOUT):
        await console.answered.wait()


async def _offline() -> None:
    # Connections rotate every 3 s (goAway 2 s before): every question lands near a move.
    config = EmulatorConfig(rotate_every=3.0, notice=2.0, answer_chunks=10)
    async with Emulator(config) as emulator:
        await main(emulator)


if __name__ == "__main__":
    asyncio.run(main() if os.environ.get("GOOGLE_API_KEY") else _offline())
