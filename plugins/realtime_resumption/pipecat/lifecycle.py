"""``GenerationLifecycleProcessor``: paired generation frames behind any realtime LLM service.

Place it right after a realtime service (the stock Gemini Live service, OpenAI Realtime, ...)
whose answers it should bracket. It reads the service's downstream response frames and, with
the transport's own rules (``realtime_resumption.generation.GenerationTracker``), pushes:

- ``GenerationStartedFrame`` before the first frame of an answer (its first output, or the
  function-call frames of a tool call that opens it);
- ``GenerationEndedFrame`` exactly once per start: ``tool_call_grace`` seconds after the
  service's ``LLMFullResponseEndFrame`` when no tool call is pending (a tool call in that window
  belongs to the same answer), after an ``InterruptionFrame`` (``interrupted``), and before a
  ``CancelFrame`` (``cancelled``) or ``EndFrame`` (``disconnected``), so an answer a service
  leaves open (the stock services do across a reconnect) still ends.

Every other frame passes through unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    FunctionCallCancelFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMTextFrame,
    LLMThoughtTextFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.generation import (
    TOOL_CALL_GRACE,
    Effect,
    GenerationEnded,
    GenerationStarted,
    GenerationTracker,
)
from realtime_resumption.transport import GenerationEndReason


class GenerationLifecycleProcessor(FrameProcessor):  # type: ignore[misc]
    """Derives ``GenerationStarted/EndedFrame`` from a realtime service's response frames
    (see the module documentation)."""

    def __init__(self, *, tool_call_grace: float = TOOL_CALL_GRACE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tracker = GenerationTracker(tool_call_grace=tool_call_grace)
        self._pending_calls: set[str] = set()
        self._timer: asyncio.Task[None] | None = None
        self._timer_at: float | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Bracket the answers; pass every frame on."""
        await super().process_frame(frame, direction)
        if direction is not FrameDirection.DOWNSTREAM:
            await self.push_frame(frame, direction)
            return
        now = asyncio.get_running_loop().time()
        tracker = self._tracker
        if isinstance(frame, (EndFrame, CancelFrame)):
            reason = (
                GenerationEndReason.CANCELLED
                if isinstance(frame, CancelFrame)
                else GenerationEndReason.DISCONNECTED
            )
            await self._push_effects(tracker.connection_lost(now, reason))
            await self._stop_timer()
            await self.push_frame(frame, direction)
            return
        if isinstance(frame, InterruptionFrame):
            await self.push_frame(frame, direction)
            await self._push_effects(tracker.interrupted(now))
        elif isinstance(frame, LLMFullResponseEndFrame):
            await self.push_frame(frame, direction)
            await self._push_effects(
                tracker.turn_complete(now, tools_pending=bool(self._pending_calls))
            )
        else:
            effects = self._before(frame, now)
            await self._push_effects(effects)
            await self.push_frame(frame, direction)
        await self._schedule()

    def _before(self, frame: Frame, now: float) -> list[Effect]:
        """What ``frame`` tells the tracker, for the frames that open or continue an answer."""
        tracker = self._tracker
        if isinstance(frame, TTSAudioRawFrame):
            return tracker.model_output(now, "audio")
        if isinstance(frame, TTSTextFrame):
            return tracker.model_output(now, "transcript")
        if isinstance(frame, LLMThoughtTextFrame):
            return tracker.model_output(now, "thought")
        if isinstance(frame, LLMTextFrame):
            # An audio answer's text is its transcript (not for the context); else it is text.
            return tracker.model_output(now, "text" if frame.append_to_context else "transcript")
        if isinstance(frame, FunctionCallsStartedFrame):
            ids = [call.tool_call_id for call in frame.function_calls]
            self._pending_calls.update(ids)
            return tracker.tool_calls(now, ids)
        if isinstance(frame, FunctionCallInProgressFrame):
            self._pending_calls.add(frame.tool_call_id)
            return tracker.tool_calls(now, [frame.tool_call_id])
        if isinstance(frame, FunctionCallResultFrame):
            self._pending_calls.discard(frame.tool_call_id)
            return tracker.tick(now)
        if isinstance(frame, FunctionCallCancelFrame):
            self._pending_calls.discard(frame.tool_call_id)
            return tracker.tool_calls_cancelled(now, tools_pending=bool(self._pending_calls))
        return tracker.tick(now)

    async def _push_effects(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, GenerationStarted):
                await self.push_frame(GenerationStartedFrame(generation_id=effect.generation_id))
            elif isinstance(effect, GenerationEnded):
                await self.push_frame(
                    GenerationEndedFrame(generation_id=effect.generation_id, reason=effect.reason)
                )

    async def _schedule(self) -> None:
        deadline = self._tracker.next_deadline
        if deadline == self._timer_at:
            return
        await self._stop_timer()
        if deadline is not None:
            self._timer_at = deadline
            self._timer = self.create_task(self._fire_at(deadline), "generation-grace")

    async def _fire_at(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, deadline - loop.time()))
        self._timer = None
        self._timer_at = None
        await self._push_effects(self._tracker.tick(loop.time()))
        await self._schedule()

    async def _stop_timer(self) -> None:
        timer, self._timer, self._timer_at = self._timer, None, None
        if timer is not None and timer is not asyncio.current_task():
            await self.cancel_task(timer)

    async def cleanup(self) -> None:
        """Stop the grace timer."""
        await super().cleanup()  # type: ignore[no-untyped-call]
        await self._stop_timer()
