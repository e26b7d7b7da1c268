"""``GenerationLifecycleProcessor`` behind Pipecat's OpenAI Realtime service (README, Pipecat:
"Behind another realtime service (the stock one, OpenAI Realtime) ... derives the same paired
generation frames").

No OpenAI Realtime server can run here, so the real ``OpenAIRealtimeLLMService`` (pipecat-ai
1.14) talks over a real WebSocket to a scripted endpoint on 127.0.0.1: it answers the service's
``session.update`` and sends, when a test says so, the server events of OpenAI's Realtime API
(https://platform.openai.com/docs/api-reference/realtime-server-events) in the order the service
expects them (read from ``pipecat.services.openai.realtime.llm``: ``response.created``, then
``conversation.item.added``, the output deltas, ``response.done``). Everything from the service
on is real: its event handling, the frames it pushes, the pipeline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from pipecat.frames.frames import (
    Frame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from websockets.asyncio.server import Server, ServerConnection, serve

from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.pipecat import GenerationLifecycleProcessor
from realtime_resumption.transport import GenerationEndReason

from .rig import PushLog, Rig, until

GRACE = 0.05
"""The processor's tool-call grace, short so an answer's end follows its last frame soon."""
AUDIO = base64.b64encode(b"\1\0" * 480).decode()
"""20 ms of 24 kHz PCM16, as the service expects output audio."""


class OpenAIRealtimeScript:
    """A bare OpenAI Realtime endpoint: ``session.created`` on connect, ``session.updated`` for
    each ``session.update``; it records every client event and sends what a test scripts."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._server: Server | None = None
        self._ws: ServerConnection | None = None
        self._serial = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/v1/realtime"

    def types(self) -> list[str]:
        return [event["type"] for event in self.received]

    async def start(self) -> None:
        self._server = await serve(self._handle, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, ws: ServerConnection) -> None:
        self._ws = ws
        await self.send({"type": "session.created", "session": {"type": "realtime"}})
        async for raw in ws:
            event = json.loads(raw)
            self.received.append(event)
            if event["type"] == "session.update":
                await self.send({"type": "session.updated", "session": {"type": "realtime"}})

    async def send(self, *events: dict[str, Any]) -> None:
        assert self._ws is not None
        for event in events:
            self._serial += 1
            await self._ws.send(json.dumps({"event_id": f"evt_{self._serial}", **event}))

    async def audio_answer(self, response: str, item: str, *, chunks: int = 3) -> None:
        """A spoken answer: its message item, audio and transcript deltas, and its end."""
        await self.answer_begins(response, item, chunks=chunks)
        await self.answer_ends(response)

    async def answer_begins(self, response: str, item: str, *, chunks: int = 3) -> None:
        delta = {"response_id": response, "item_id": item, "output_index": 0, "content_index": 0}
        await self.send(
            {"type": "response.created", "response": {"id": response, "status": "in_progress"}},
            {
                "type": "conversation.item.added",
                "item": {"id": item, "type": "message", "role": "assistant", "content": []},
            },
            *(
                {"type": "response.output_audio.delta", **delta, "delta": AUDIO}
                for _ in range(chunks)
            ),
            {"type": "response.output_audio_transcript.delta", **delta, "delta": "Hello."},
        )

    async def answer_ends(self, response: str, status: str = "completed") -> None:
        await self.send({"type": "response.done", "response": {"id": response, "status": status}})


@dataclass
class Call:
    """A pipeline as Pipecat's OpenAI Realtime examples build it, with the processor right
    after the service; ``pushed`` is what the processor pushed downstream."""

    rig: Rig
    script: OpenAIRealtimeScript
    log: PushLog

    def pushed(self) -> list[Frame]:
        return self.log.frames()

    def count(self, kind: type[Frame]) -> int:
        return self.log.count(kind)

    def of(self, kind: type[Frame]) -> list[Any]:
        return [f for f in self.pushed() if isinstance(f, kind)]

    async def wait(self, predicate: Callable[[], bool]) -> None:
        await until(predicate)


@contextlib.asynccontextmanager
async def openai_call(**functions: Any) -> AsyncIterator[Call]:
    """The service, the processor and the context aggregators in a real pipeline, with the
    service's session set up."""
    script = OpenAIRealtimeScript()
    await script.start()
    try:
        service = OpenAIRealtimeLLMService(api_key="test-key", base_url=script.url)
        for name, handler in functions.items():
            service.register_function(name, handler)
        lifecycle = GenerationLifecycleProcessor(tool_call_grace=GRACE)
        log = PushLog()
        log.source = lifecycle
        pair = LLMContextAggregatorPair(LLMContext())
        processors = [pair.user(), service, lifecycle, pair.assistant()]
        async with Rig(processors, observers=[log]) as rig:
            await until(lambda: "session.update" in script.types())
            yield Call(rig, script, log)
    finally:
        await script.stop()


def _pairs(frames: list[Frame]) -> list[tuple[str, str]]:
    return [
        (type(f).__name__, f.generation_id)
        for f in frames
        if isinstance(f, (GenerationStartedFrame, GenerationEndedFrame))
    ]


async def test_a_spoken_answer_is_one_generation() -> None:
    async with openai_call() as call:
        await call.script.audio_answer("resp_1", "item_1")
        await call.wait(lambda: call.count(GenerationEndedFrame) >= 1)
        await call.script.audio_answer("resp_2", "item_2")
        await call.wait(lambda: call.count(GenerationEndedFrame) >= 2)

    assert _pairs(call.pushed()) == [
        ("GenerationStartedFrame", "gen_1"),
        ("GenerationEndedFrame", "gen_1"),
        ("GenerationStartedFrame", "gen_2"),
        ("GenerationEndedFrame", "gen_2"),
    ]
    assert [f.reason for f in call.of(GenerationEndedFrame)] == [
        GenerationEndReason.GENERATION_COMPLETE
    ] * 2
    kinds = [type(f) for f in call.pushed()]
    first_audio = kinds.index(TTSAudioRawFrame)
    assert kinds.index(GenerationStartedFrame) < first_audio
    assert kinds.index(LLMFullResponseEndFrame) < kinds.index(GenerationEndedFrame)


async def test_a_tool_call_and_the_answer_to_its_result_are_one_generation() -> None:
    """The function still runs when the response that called it is done: the generation waits
    for the answer to its result however long that takes (no grace timer ends it)."""
    release = asyncio.Event()

    async def lookup(params: FunctionCallParams) -> None:
        await release.wait()
        await params.result_callback({"flight": "LH 123"})

    async with openai_call(lookup=lookup) as call:
        item = {"id": "item_c", "type": "function_call", "call_id": "call_1", "name": "lookup"}
        await call.script.send(
            {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
            {"type": "conversation.item.added", "item": {**item, "arguments": ""}},
            {
                "type": "response.function_call_arguments.done",
                "response_id": "resp_1",
                "item_id": "item_c",
                "output_index": 0,
                "call_id": "call_1",
                "arguments": "{}",
            },
            {
                "type": "response.done",
                "response": {"id": "resp_1", "status": "completed", "output": [item]},
            },
        )
        await call.wait(lambda: call.count(LLMFullResponseEndFrame) >= 1)
        await asyncio.sleep(GRACE * 4)
        release.set()
        # The service sends the result to the API and asks for the answer to it.
        await call.wait(lambda: "response.create" in call.script.types())
        await asyncio.sleep(GRACE * 4)
        assert call.count(GenerationEndedFrame) == 0
        await call.script.audio_answer("resp_2", "item_2")
        await call.wait(lambda: call.count(GenerationEndedFrame) >= 1)
        # Past the grace: no second generation, no late end.
        await asyncio.sleep(GRACE * 4)

    items = [e["item"] for e in call.script.received if e["type"] == "conversation.item.create"]
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert [(i["call_id"], json.loads(i["output"])) for i in outputs] == [
        ("call_1", {"flight": "LH 123"})
    ]
    assert _pairs(call.pushed()) == [
        ("GenerationStartedFrame", "gen_1"),
        ("GenerationEndedFrame", "gen_1"),
    ]
    (ended,) = call.of(GenerationEndedFrame)
    assert ended.reason is GenerationEndReason.GENERATION_COMPLETE
    kinds = [type(f) for f in call.pushed()]
    assert kinds.index(GenerationStartedFrame) < kinds.index(FunctionCallsStartedFrame)
    assert kinds.index(FunctionCallResultFrame) < kinds.index(TTSAudioRawFrame)
    assert kinds.index(TTSAudioRawFrame) < kinds.index(GenerationEndedFrame)


async def test_an_interrupted_answer_ends_once_as_interrupted() -> None:
    async with openai_call() as call:
        await call.script.answer_begins("resp_1", "item_1")
        await call.wait(lambda: call.count(TTSAudioRawFrame) >= 3)
        # The user's turn begins: Pipecat broadcasts an interruption through the pipeline.
        await call.rig.queue(InterruptionFrame())
        await call.wait(lambda: call.count(GenerationEndedFrame) >= 1)
        # The API then reports the response it cut as cancelled.
        await call.script.answer_ends("resp_1", status="cancelled")
        await call.wait(lambda: call.count(LLMFullResponseEndFrame) >= 2)
        await asyncio.sleep(GRACE * 4)

    assert _pairs(call.pushed()) == [
        ("GenerationStartedFrame", "gen_1"),
        ("GenerationEndedFrame", "gen_1"),
    ]
    (ended,) = call.of(GenerationEndedFrame)
    assert ended.reason is GenerationEndReason.INTERRUPTED
