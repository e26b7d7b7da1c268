"""The transport's answers as LiveKit generations: message and function streams, closed in time.

One transport generation (an answer) is one LiveKit generation, except around a tool call:
LiveKit runs the tools only once the generation that asked for them has closed, and takes the
model's answer to their results as a generation of its own. So a tool call closes the LiveKit
generation it belongs to, and the output that follows (same transport generation) opens a new
one. As with the Google plugin, the LiveKit generation for an answer opens when the user
starts speaking (the first sign of their turn), not when the answer starts; the answer then
fills it. Media streams close at the provider's ``generationComplete`` (its ``turnComplete``
waits for the estimated playback end); the generation closes at ``turnComplete``, as the Google
plugin closes it, so the agent stops speaking when the answer's output is over (the transport's
answer may stay open a grace window longer, for a tool call that finishes it: that call opens a
continuation); one opened for speech that no answer takes closes there too. Every stream
closes, at the latest, when the transport ends the answer — also when a move or a close ends
it, so no stream is ever left open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from livekit import rtc
from livekit.agents import llm, utils

from realtime_resumption.transport import GenerationEndReason, ToolCall

from .log import logger

OUTPUT_SAMPLE_RATE = 24_000


@dataclass
class Generation:
    """One LiveKit generation and its open streams."""

    response_id: str
    continuation: bool
    """It carries the answer to tool results of the same transport generation."""
    audio_output: bool
    user_initiated: bool = False
    """It answers ``generate_reply``."""
    answered: bool = False
    """An answer of the transport runs in it (False: opened for the user's speech, waiting)."""
    created_at: float = field(default_factory=time.time)
    message_ch: utils.aio.Chan[llm.MessageGeneration] = field(default_factory=utils.aio.Chan)
    function_ch: utils.aio.Chan[llm.FunctionCall] = field(default_factory=utils.aio.Chan)
    text_ch: utils.aio.Chan[str] = field(default_factory=utils.aio.Chan)
    audio_ch: utils.aio.Chan[rtc.AudioFrame] = field(default_factory=utils.aio.Chan)
    output_text: str = ""
    function_calls: list[llm.FunctionCall] = field(default_factory=list)
    requested_at: float | None = None
    """When the user's turn ended or the reply was asked for (None: unknown)."""
    first_audio_at: float | None = None
    completed_at: float | None = None
    end_reason: GenerationEndReason | None = None

    def __post_init__(self) -> None:
        modalities: asyncio.Future[list[Literal["text", "audio"]]] = asyncio.Future()
        modalities.set_result(["audio", "text"] if self.audio_output else ["text"])
        if not self.audio_output:
            self.audio_ch.close()
        self.message_ch.send_nowait(
            llm.MessageGeneration(
                message_id=self.response_id,
                text_stream=self.text_ch,
                audio_stream=self.audio_ch,
                modalities=modalities,
            )
        )

    @property
    def done(self) -> bool:
        """Both streams closed: LiveKit sees the generation as ended."""
        return self.message_ch.closed

    def event(self, *, user_initiated: bool) -> llm.GenerationCreatedEvent:
        """The ``generation_created`` event for it."""
        return llm.GenerationCreatedEvent(
            message_stream=self.message_ch,
            function_stream=self.function_ch,
            user_initiated=user_initiated,
            response_id=self.response_id,
        )

    def chat_items(self) -> list[llm.ChatItem]:
        """What it added to the conversation: its function calls, then the text it said."""
        items: list[llm.ChatItem] = list(self.function_calls)
        if self.output_text:
            items.append(
                llm.ChatMessage(role="assistant", content=[self.output_text], id=self.response_id)
            )
        return items

    def push_audio(self, data: bytes) -> None:
        if self.audio_ch.closed:
            logger.debug("audio after the end of the answer's media dropped")
            return
        if self.first_audio_at is None:
            self.first_audio_at = time.time()
        self.audio_ch.send_nowait(
            rtc.AudioFrame(
                data=data,
                sample_rate=OUTPUT_SAMPLE_RATE,
                num_channels=1,
                samples_per_channel=len(data) // 2,
            )
        )

    def push_text(self, text: str) -> None:
        if self.text_ch.closed:
            logger.debug("text after the end of the answer's media dropped")
            return
        if self.first_audio_at is None and not self.audio_output:
            self.first_audio_at = time.time()
        self.output_text += text
        self.text_ch.send_nowait(text)

    def close_media(self) -> None:
        """The answer's audio and text are complete."""
        if self.completed_at is None:
            self.completed_at = time.time()
        if not self.text_ch.closed:
            if not self.output_text:
                # LiveKit's transcription synchroniser waits for a first text, even an empty one.
                self.text_ch.send_nowait("")
            self.text_ch.close()
        if not self.audio_ch.closed:
            self.audio_ch.close()

    def close(self) -> None:
        self.close_media()
        self.function_ch.close()
        self.message_ch.close()


class GenerationStreams:
    """Opens and closes LiveKit generations from the transport's answer lifecycle.

    ``on_open(generation)`` is called for each new generation before anything is pushed into
    it (the session emits ``generation_created`` there); ``on_close(generation)`` just before
    its streams close.
    """

    def __init__(
        self,
        *,
        audio_output: bool,
        on_open: Callable[[Generation], None],
        on_close: Callable[[Generation], None],
    ) -> None:
        self._audio_output = audio_output
        self._on_open = on_open
        self._on_close = on_close
        self._answer: str | None = None
        self._current: Generation | None = None
        self._turn_over = False
        """The provider's turn of the open answer completed: a transcript trailing it opens
        no generation."""

    @property
    def answering(self) -> bool:
        """The transport has an answer open."""
        return self._answer is not None

    @property
    def current(self) -> Generation | None:
        """The open LiveKit generation, if any."""
        return self._current

    def user_speech(self) -> None:
        """The user began a turn: open its generation now, unless one is open or an answer is
        in progress (the Google plugin opens it at the first input transcription)."""
        if self._current is None and self._answer is None:
            self._open(continuation=False, answered=False)

    def answer_started(self, generation_id: str) -> None:
        self._answer = generation_id
        self._turn_over = False
        current = self._current
        if current is not None and not current.answered:
            current.answered = True
            return
        self._close(None)
        self._open(continuation=False)

    def turn_complete(self) -> None:
        """The provider's turn completed: the open generation is complete, as the Google
        plugin ends it there (one opened for the user's speech that no answer took too; the
        transport's answer may still go on: a tool call that finishes it after
        ``turnComplete`` opens a continuation)."""
        self._turn_over = True
        self._close(None)

    def answer_ended(self, generation_id: str, reason: GenerationEndReason) -> None:
        if generation_id != self._answer:
            return
        self._answer = None
        self._close(reason)

    def audio(self, data: bytes) -> None:
        self._turn_over = False
        generation = self._ensure()
        if generation is not None:
            generation.push_audio(data)

    def text(self, text: str) -> None:
        if self._current is None and self._turn_over:
            logger.debug("a transcript trailing the answer's turn dropped")
            return
        generation = self._ensure()
        if generation is not None and text:
            generation.push_text(text)

    def media_done(self) -> None:
        if self._current is not None:
            self._current.close_media()

    def tool_calls(self, calls: Sequence[ToolCall], *, answer_goes_on: bool = False) -> None:
        """The model calls ``calls``. ``answer_goes_on``: every one is non-blocking, so the
        model talks on: the generation stays open for the rest of the answer (a new one
        would be a server-initiated reply, which interrupts the speech whose tools run)."""
        self._turn_over = False
        generation = self._ensure()
        if generation is None:
            logger.warning("tool calls outside an answer ignored", extra={"calls": len(calls)})
            return
        for call in calls:
            function_call = llm.FunctionCall(
                call_id=call.id, name=call.name, arguments=json.dumps(call.args)
            )
            generation.function_calls.append(function_call)
            generation.function_ch.send_nowait(function_call)
        if not answer_goes_on:
            # LiveKit sends the tools' results once this generation is over.
            self._close(None)

    def close(self) -> None:
        """The session closed: end whatever is open."""
        self._answer = None
        self._close(GenerationEndReason.DISCONNECTED)

    def _ensure(self) -> Generation | None:
        if self._current is None and self._answer is not None:
            self._open(continuation=True)
        return self._current

    def _open(self, *, continuation: bool, answered: bool = True) -> None:
        generation = Generation(
            response_id=utils.shortuuid("GR_"),
            continuation=continuation,
            audio_output=self._audio_output,
            answered=answered,
        )
        self._current = generation
        self._on_open(generation)

    def _close(self, reason: GenerationEndReason | None) -> None:
        generation, self._current = self._current, None
        if generation is None:
            return
        generation.end_reason = reason
        # As the Google plugin does: the speech stop, the final transcript and the history
        # before the streams end, so LiveKit files the user's words before the answer.
        self._on_close(generation)
        generation.close()
