"""A real Pipecat pipeline around the processors under test, recording every frame that reaches
either end, with bounded waits on what was recorded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    DataFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMRunFrame,
    StartFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import EmulatorConfig, user_audio

MODEL = "gemini-live-2.5-flash-preview"
TIME_SCALE = 0.05
FAST = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1), attempt_timeout=2.0)
WAIT = 10.0


def emulator_config(profile: str = "gemini", **overrides: Any) -> EmulatorConfig:
    overrides.setdefault("time_scale", TIME_SCALE)
    return EmulatorConfig(profile=profile, **overrides)  # type: ignore[arg-type]


class Marker(DataFrame):  # type: ignore[misc]
    """A data frame the services pass on: once it is downstream of them, they have processed
    every data frame queued before it (data frames are processed in order; system frames such
    as user audio overtake them)."""


class Recorder(FrameProcessor):
    """Records the frames that reach it in ``direction`` and passes everything on."""

    def __init__(self, direction: FrameDirection, changed: asyncio.Event) -> None:
        super().__init__()
        self._direction = direction
        self._changed = changed
        self.frames: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is self._direction and not isinstance(frame, StartFrame):
            self.frames.append(frame)
            self._changed.set()
        await self.push_frame(frame, direction)


class Rig:
    """``Pipeline([up recorder, *processors, down recorder])`` in a PipelineWorker run by a
    WorkerRunner."""

    def __init__(
        self,
        processors: Sequence[FrameProcessor],
        *,
        metrics: bool = False,
        tracing: bool = False,
        observers: Sequence[Any] = (),
    ) -> None:
        self._changed = asyncio.Event()
        self.up = Recorder(FrameDirection.UPSTREAM, self._changed)
        self.down = Recorder(FrameDirection.DOWNSTREAM, self._changed)
        self.pipeline = Pipeline([self.up, *processors, self.down])
        self.worker = PipelineWorker(
            self.pipeline,
            params=PipelineParams(enable_metrics=metrics, enable_usage_metrics=metrics),
            cancel_on_idle_timeout=False,
            enable_rtvi=False,
            enable_tracing=tracing,
            observers=list(observers),
        )
        self._started = asyncio.Event()

        @self.worker.event_handler("on_pipeline_started")
        async def _started(worker: Any, frame: Frame) -> None:
            self._started.set()

        self._runner = WorkerRunner(handle_sigint=False)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Rig:
        await self._runner.add_workers(self.worker)
        self._task = asyncio.create_task(self._runner.run())
        async with asyncio.timeout(WAIT):
            await self._started.wait()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.end()
        else:
            await self.cancel()

    async def queue(self, *frames: Frame) -> None:
        for frame in frames:
            await self.worker.queue_frame(frame)

    async def context(self, context: LLMContext | None = None) -> None:
        """The first context (none: without messages), processed: from now on the services
        send the user's audio, as a pipeline's does once its aggregator sent the context."""
        await self.processed(LLMContextFrame(context or LLMContext()))

    async def run_bot(self) -> None:
        """An ``LLMRunFrame``, processed: as a bot starts, its aggregator sends the context to
        the service (the pipeline's own context aggregators, unlike ``context``)."""
        await self.processed(LLMRunFrame())

    async def processed(self, *frames: Frame) -> None:
        """Queue ``frames`` and wait until they have gone through the pipeline."""
        marker = Marker()
        await self.queue(*frames, marker)
        await self.wait(lambda: any(f is marker for f in self.down.frames))

    async def wait(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def of(self, kind: type[Frame] | tuple[type[Frame], ...], up: bool = False) -> list[Any]:
        frames = self.up.frames if up else self.down.frames
        return [f for f in frames if isinstance(f, kind)]

    def count(self, kind: type[Frame] | tuple[type[Frame], ...], up: bool = False) -> int:
        return len(self.of(kind, up))

    async def end(self, frame: EndFrame | None = None) -> None:
        """End the pipeline with ``frame`` (a plain ``EndFrame`` by default)."""
        await self._finish(frame if frame is not None else EndFrame())

    async def cancel(self) -> None:
        await self._finish(CancelFrame())

    async def _finish(self, frame: Frame) -> None:
        task = self._task
        if task is None or task.done():
            return
        if isinstance(frame, EndFrame):
            await self.worker.queue_frame(frame)
        else:
            await self.worker.cancel()
        try:
            async with asyncio.timeout(WAIT * 4):
                await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class PushLog(BaseObserver):
    """Every frame ``source`` pushed, in push order (what an observer sees)."""

    def __init__(self) -> None:
        super().__init__()
        self.source: FrameProcessor | None = None
        self.pushed: list[tuple[Frame, FrameDirection]] = []

    async def on_push_frame(self, data: FramePushed) -> None:
        if data.source is self.source:
            self.pushed.append((data.frame, data.direction))

    def frames(self, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> list[Frame]:
        return [f for f, d in self.pushed if d is direction]

    def count(self, kind: type[Frame] | tuple[type[Frame], ...]) -> int:
        return sum(1 for f in self.frames() if isinstance(f, kind))


async def stream_audio(
    rig: Rig, first: int, count: int, *, speech: bool, word: str | None = None
) -> None:
    """``count`` numbered 20 ms chunks of user audio into the pipeline, at the emulator's pace."""
    for seq in range(first, first + count):
        audio = user_audio(seq, speech=speech, word=word)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1))
        await asyncio.sleep(0.02 * TIME_SCALE)


async def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll ``predicate`` (state outside the pipeline, e.g. the ledger) within ``timeout``."""
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
