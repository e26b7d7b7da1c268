"""A Pipecat pipeline around a realtime service, as Pipecat's own examples build it.

``transport.input() -> user aggregator -> llm -> transport.output() -> assistant aggregator``
in a ``PipelineWorker`` under a ``WorkerRunner``; the transport is a fake one: its input
streams the caller's microphone, its output plays the answer audio in real time. The service
is a parameter: the stock ``GeminiLiveLLMService`` and ours take the same constructor
(``gemini_service``), as do the stock ``OpenAIRealtimeLLMService`` and ours
(``openai_lanes.openai_service``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterruptionFrame,
    LLMRunFrame,
    OutputAudioRawFrame,
    StartFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallParams
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.workers.runner import WorkerRunner

from realtime_resumption.testing.emulator.audio import USER_RATE

from .call import INSTRUCTIONS, Ear, weather
from .playback import ANSWER_RATE
from .stacks import EMULATOR_KEY, StackContext

_STOP_TIMEOUT = 10.0


class _MicrophoneInput(BaseInputTransport):
    """Streams the caller's microphone chunks into the pipeline as they come."""

    def __init__(self, params: TransportParams, rate: int) -> None:
        super().__init__(params)
        self._rate = rate
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._feeder: asyncio.Task[None] | None = None

    def put(self, pcm: bytes) -> None:
        self._chunks.put_nowait(pcm)

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)
        if self._feeder is None:
            self._feeder = self.create_task(self._feed(), "demo-microphone")

    async def _feed(self) -> None:
        while True:
            pcm = await self._chunks.get()
            await self.push_audio_frame(InputAudioRawFrame(pcm, self._rate, 1))

    async def cleanup(self) -> None:
        if self._feeder is not None:
            await self.cancel_task(self._feeder)
            self._feeder = None
        await super().cleanup()


class _Loudspeaker(BaseOutputTransport):
    """Plays each audio frame in real time into the caller's ear."""

    def __init__(self, params: TransportParams, ear: Ear) -> None:
        super().__init__(params)
        self._ear = ear
        self._next_at: float | None = None

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
        if isinstance(frame, InterruptionFrame):
            self._ear.interrupted()
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = now if self._next_at is None or self._next_at < now else self._next_at
        self._next_at = start + self._ear.play(frame.audio, frame.sample_rate)
        await asyncio.sleep(self._next_at - now)
        return True


def gemini_service(ctx: StackContext, service_cls: Any) -> Any:
    """``service_cls`` (a ``GeminiLiveLLMService``) as Pipecat's examples build it, on the
    call's emulator."""
    return service_cls(
        api_key=EMULATOR_KEY,
        settings=service_cls.Settings(system_instruction=INSTRUCTIONS),
        tools=WEATHER_TOOLS,
        http_options=ctx.http_options,
    )


class PipecatStack:
    """A Pipecat pipeline with ``llm`` (a realtime service) as its LLM; ``rate`` is the
    microphone's, ``context`` the aggregators' (a service that takes its tools from the
    context gets them there)."""

    def __init__(
        self,
        ctx: StackContext,
        llm: Any,
        *,
        rate: int = USER_RATE,
        context: LLMContext | None = None,
    ) -> None:
        self._ctx = ctx
        params = TransportParams(
            audio_in_enabled=True,
            audio_in_sample_rate=rate,
            audio_out_enabled=True,
            audio_out_sample_rate=ANSWER_RATE,
        )
        self._input = _MicrophoneInput(params, rate)
        output = _Loudspeaker(params, ctx.ear)
        self._llm = llm
        self._llm.register_function("get_weather", _get_weather)
        context = context if context is not None else LLMContext()
        aggregators = LLMContextAggregatorPair(context)
        pipeline = Pipeline(
            [self._input, aggregators.user(), self._llm, output, aggregators.assistant()]
        )
        self._worker = PipelineWorker(
            pipeline,
            params=PipelineParams(audio_in_sample_rate=rate),
            enable_rtvi=False,
            cancel_on_idle_timeout=False,
        )
        self._runner = WorkerRunner(handle_sigint=False)
        self._running: asyncio.Task[None] | None = None

        @self._worker.event_handler("on_pipeline_started")
        async def _started(worker: PipelineWorker, frame: StartFrame) -> None:
            # As Pipecat's examples do: let the model speak first.
            await worker.queue_frame(LLMRunFrame())

        @self._worker.event_handler("on_pipeline_error")
        async def _error(worker: PipelineWorker, frame: Any) -> None:
            ctx.error(str(getattr(frame, "error", frame)))
            if getattr(frame, "fatal", False):
                ctx.closed("fatal ErrorFrame")

        @self._worker.event_handler("on_pipeline_finished")
        async def _finished(worker: PipelineWorker, frame: Any) -> None:
            if not self._stopping:
                ctx.closed(f"pipeline finished ({type(frame).__name__})")

        self._stopping = False

    async def start(self) -> None:
        await self._runner.add_workers(self._worker)
        self._running = asyncio.get_running_loop().create_task(
            self._runner.run(), name="demo-pipecat-runner"
        )

    def push_audio(self, pcm: bytes) -> None:
        self._input.put(pcm)

    async def stop(self) -> None:
        self._stopping = True
        if self._running is None:
            return
        await self._worker.cancel()
        try:
            await asyncio.wait_for(self._running, _STOP_TIMEOUT)
        except TimeoutError:
            self._running.cancel()
            await asyncio.gather(self._running, return_exceptions=True)


WEATHER_TOOLS = ToolsSchema(
    standard_tools=[
        FunctionSchema(
            name="get_weather",
            description="The weather in a city.",
            properties={"city": {"type": "string"}},
            required=[],
        )
    ]
)


async def _get_weather(params: FunctionCallParams) -> None:
    # A tool takes a moment, as a real lookup would.
    await asyncio.sleep(0.2)
    city = params.arguments.get("city")
    await params.result_callback(weather(city if isinstance(city, str) else None))
