"""Frame-order parity: the stock Pipecat service and ours on the same emulator script, in the
same test, without rotation. The two runs' frame sequences are compared (our own lifecycle
frames set aside); a tool call after turnComplete stays in its answer's generation, while the
response frames end at turnComplete, as stock's do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMServiceMetadataFrame,
    LLMTextFrame,
    MetricsFrame,
    StartFrame,
    TTSStartedFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.google.gemini_live.llm import GeminiModalities

import realtime_resumption.frames as lifecycle
from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.testing.emulator import Emulator

from . import services
from .rig import PushLog, Rig, emulator_config, stream_audio

_OURS = tuple(
    kind
    for kind in (getattr(lifecycle, name) for name in lifecycle.__all__)
    if isinstance(kind, type)
)  # frames only our service pushes (the module also names constants)
_IGNORED = (*_OURS, InputAudioRawFrame, LLMServiceMetadataFrame, StartFrame, EndFrame)

Script = Callable[[Rig, PushLog], Awaitable[None]]


def _context(text: str) -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))


async def _run(service: Any, script: Script) -> tuple[list[str], list[Frame]]:
    log = PushLog()
    log.source = service
    async with Rig([service], observers=[log]) as rig:
        await script(rig, log)
    names = [type(f).__name__ for f in log.frames() if not isinstance(f, _IGNORED)]
    return names, log.frames()


def _ends(n: int) -> Callable[[PushLog], bool]:
    return lambda log: log.count(LLMFullResponseEndFrame) >= n


async def _ask(rig: Rig, log: PushLog, text: str = "hello there", answers: int = 1) -> None:
    await rig.queue(_context(text))
    await rig.wait(lambda: _ends(answers)(log))


async def _barge_in(rig: Rig, log: PushLog) -> None:
    await rig.queue(_context("hello there"))
    await rig.wait(lambda: any(type(f).__name__ == "TTSAudioRawFrame" for f in log.frames()))
    await stream_audio(rig, 1, 5, speech=True)
    await stream_audio(rig, 6, 5, speech=False)
    await rig.wait(lambda: _ends(2)(log))


async def _both(
    emu: Emulator, script: Script, **options: Any
) -> tuple[list[str], list[str], list[Frame]]:
    stock_names, _ = await _run(services.stock(emu, **options), script)
    our_names, our_frames = await _run(services.ours(emu, **options), script)
    return stock_names, our_names, our_frames


def _assert_paired(frames: list[Frame]) -> None:
    started = [f.generation_id for f in frames if isinstance(f, lifecycle.GenerationStartedFrame)]
    ended = [f.generation_id for f in frames if isinstance(f, lifecycle.GenerationEndedFrame)]
    assert started and started == ended


async def test_audio_answer_frames_match_stock() -> None:
    async with Emulator(emulator_config()) as emu:
        stock_names, our_names, frames = await _both(emu, _ask)
    assert our_names == stock_names
    assert stock_names[:2] == ["TTSStartedFrame", "LLMFullResponseStartFrame"]
    assert stock_names[-2:] == ["TTSStoppedFrame", "LLMFullResponseEndFrame"]
    assert stock_names.count("TTSAudioRawFrame") == 10
    _assert_paired(frames)
    # Our frames bracket the answer: started before its first frame, ended after its last.
    kinds = [type(f) for f in frames]
    assert kinds.index(lifecycle.GenerationStartedFrame) < kinds.index(TTSStartedFrame)
    assert kinds.index(lifecycle.GenerationEndedFrame) > kinds.index(LLMFullResponseEndFrame)


async def test_text_answer_frames_match_stock() -> None:
    async with Emulator(emulator_config()) as emu:
        stock_names, our_names, frames = await _both(
            emu, _ask, settings={"modalities": GeminiModalities.TEXT}
        )
    assert our_names == stock_names
    assert stock_names[0] == "LLMFullResponseStartFrame"
    assert stock_names.count("LLMTextFrame") == 10
    assert "TTSStartedFrame" not in stock_names
    texts = [f for f in frames if isinstance(f, LLMTextFrame)]
    assert all(f.append_to_context for f in texts)
    _assert_paired(frames)


def _collapsed(names: list[str]) -> list[str]:
    """Runs of answer output as one ``<output>``: how much of an answer plays before a
    barge-in reaches the server depends on timing, not on the service."""
    out: list[str] = []
    for name in names:
        if name in ("TTSAudioRawFrame", "LLMTextFrame", "TTSTextFrame"):
            name = "<output>"
            if out and out[-1] == name:
                continue
        out.append(name)
    return out


async def test_server_interruption_frames_match_stock() -> None:
    async with Emulator(emulator_config(answer_chunks=40)) as emu:
        stock_names, our_names, frames = await _both(emu, _barge_in)
    assert _collapsed(our_names) == _collapsed(stock_names)
    assert _collapsed(stock_names)[:4] == [
        "TTSStartedFrame",
        "LLMFullResponseStartFrame",
        "<output>",
        "InterruptionFrame",
    ]
    ends = [f for f in frames if isinstance(f, lifecycle.GenerationEndedFrame)]
    assert [e.reason.value for e in ends] == ["interrupted", "generation_complete"]
    interruptions = [f for f in frames if isinstance(f, InterruptionFrame)]
    assert len(interruptions) == 1
    _assert_paired(frames)


async def test_tool_call_frames_match_stock() -> None:
    async def script(rig: Rig, log: PushLog) -> None:
        await _ask(rig, log, "please lookup flights")

    async with Emulator(emulator_config()) as emu:
        stock_names, our_names, frames = await _both(emu, script, tools=True)
    assert our_names == stock_names
    calls = stock_names.index("FunctionCallsStartedFrame")
    assert (
        calls
        < stock_names.index("FunctionCallResultFrame")
        < stock_names.index("LLMFullResponseStartFrame")
    )
    _assert_paired(frames)
    assert sum(isinstance(f, lifecycle.GenerationStartedFrame) for f in frames) == 1


async def test_tool_call_after_turn_complete_stays_in_the_answers_generation() -> None:
    async def script(rig: Rig, log: PushLog) -> None:
        # The response ends at the first turnComplete, a second follows the result.
        await _ask(rig, log, "please lookup flights", answers=2)

    async with Emulator(emulator_config(tool_call_after_turn_complete=True)) as emu:
        stock_names, our_names, frames = await _both(emu, script, tools=True)
    # The response frames are stock's: the end of speech comes at turnComplete, not after a
    # grace window for a tool call that may follow it.
    first_end = stock_names.index("LLMFullResponseEndFrame")
    assert stock_names[first_end - 1 : first_end + 1] == [
        "TTSStoppedFrame",
        "LLMFullResponseEndFrame",
    ]
    assert stock_names.index("FunctionCallsStartedFrame") > first_end
    assert our_names == stock_names
    # One generation brackets the answer, the call and the response to its result.
    _assert_paired(frames)
    assert sum(isinstance(f, lifecycle.GenerationStartedFrame) for f in frames) == 1
    kinds = [type(f) for f in frames]
    assert kinds.index(lifecycle.GenerationEndedFrame) > len(kinds) - 1 - kinds[::-1].index(
        LLMFullResponseEndFrame
    )


class _TimedLog(PushLog):
    """``PushLog`` that also notes when each frame was pushed (the event loop's clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    async def on_push_frame(self, data: Any) -> None:
        if data.source is self.source:
            self.times.append(asyncio.get_running_loop().time())
        await super().on_push_frame(data)


async def _end_of_speech_delay(service: Any) -> float:
    """Seconds from the answer's last audio frame to its ``TTSStoppedFrame``."""
    log = _TimedLog()
    log.source = service
    async with Rig([service], observers=[log]) as rig:
        await _ask(rig, log)
    kinds = [type(frame).__name__ for frame, _ in log.pushed]
    last_audio = len(kinds) - 1 - kinds[::-1].index("TTSAudioRawFrame")
    stopped = kinds.index("TTSStoppedFrame", last_audio)
    return log.times[stopped] - log.times[last_audio]


async def test_the_end_of_speech_comes_with_the_answers_turn_complete_as_with_stock() -> None:
    # With a function declared the answer stays open for a tool call that may still finish
    # it: that must not delay what the pipeline sees of the end of speech.
    async with Emulator(emulator_config()) as emu:
        stock = await _end_of_speech_delay(services.stock(emu, tools=True))
        ours = await _end_of_speech_delay(services.ours(emu, tools=True))
    assert ours < stock + TOOL_CALL_GRACE / 3


def _with_metrics(frames: list[Frame]) -> list[str]:
    names = []
    for frame in frames:
        if isinstance(frame, MetricsFrame):
            names.extend(type(d).__name__ for d in frame.data)
        elif not isinstance(frame, _IGNORED):
            names.append(type(frame).__name__)
    return [n for n in names if n not in ("TTSAudioRawFrame", "LLMTextFrame", "TTSTextFrame")]


async def test_ttfb_and_usage_metrics_come_as_with_stock() -> None:
    async def run(service: Any) -> list[str]:
        log = PushLog()
        log.source = service
        async with Rig([service], observers=[log], metrics=True) as rig:
            await _ask(rig, log)
        return _with_metrics(log.frames())

    async with Emulator(emulator_config()) as emu:
        stock_names = await run(services.stock(emu))
        our_names = await run(services.ours(emu))
    assert our_names == stock_names
    assert "TTFBMetricsData" in stock_names and "LLMUsageMetricsData" in stock_names
    assert stock_names.index("LLMUsageMetricsData") > stock_names.index("LLMFullResponseEndFrame")
