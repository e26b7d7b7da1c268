"""A worker process for the SIGKILL tests: it takes a call keeping its state in Redis (a bare
transport, a real Pipecat pipeline around our service, or a real LiveKit AgentSession with our
model), has one answer (the service issues a connection's first handle after its first answer,
so the call is resumable from then on), streams the user's speech, says
each speech chunk it sent (``sent SEQ``), and then idles until it is killed. ``drain``: a bare
transport that hands its call over on SIGTERM (``hand_over_on``), saying only the chunks the
transport accepted. ``told``: a bare transport saying only the chunks it accepted, and each
error and close it reports (``error TYPE RECOVERABLE``, ``closed CODE``).

    python -m tests.store.worker transport|drain|told|pipecat|livekit BASE_URL CA_FILE REDIS_URL KEY COUNT
"""

from __future__ import annotations

import asyncio
import signal
import ssl
import sys

from google import genai
from google.genai import types

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import hand_over_on
from realtime_resumption.testing.emulator import user_audio
from realtime_resumption.transport import ContentTurn, NotConnectedError, TransportErrorEvent

from ..transport.transport_helpers import GRACE, MODEL
from .takeover_helpers import CHUNK, OPTIONS


def http_options(base_url: str, ca_file: str) -> types.HttpOptions:
    return types.HttpOptions(
        base_url=base_url, async_client_args={"ssl": ssl.create_default_context(cafile=ca_file)}
    )


async def transport_call(
    options: types.HttpOptions,
    store: RedisStore,
    key: str,
    count: int,
    *,
    drain: bool = False,
    told: bool = False,
) -> None:
    transport = GeminiLiveTransport(
        client=genai.Client(api_key="emulator-key", http_options=options),
        model=MODEL,
        tool_call_grace=GRACE,
        store=store,
        session_key=key,
        store_options=OPTIONS,
    )
    handle = asyncio.Event()

    def update(new: str | None, resumable: bool, index: int | None) -> None:
        if new and resumable:
            handle.set()

    def error(event: TransportErrorEvent) -> None:
        print(f"error {type(event.error).__name__} {event.recoverable}", flush=True)

    def closed(code: int | None, reason: str | None) -> None:
        print(f"closed {code}", flush=True)

    transport.on_resumption_update = update
    if told:
        transport.on_error, transport.on_close = error, closed
    if drain:
        hand_over_on(signal.SIGTERM, transport)
    await transport.connect()
    transport.send_content([ContentTurn("user", "hello there")])
    await asyncio.wait_for(handle.wait(), 10)
    for seq in range(1, count + 1):
        try:
            transport.send_audio(user_audio(seq, speech=True))
        except NotConnectedError:
            break  # handed over (or taken over): the next process takes the user's audio
        print(f"sent {seq}", flush=True)
        await asyncio.sleep(CHUNK)
    await asyncio.Event().wait()  # a call in progress, until the process is killed


async def pipecat_call(options: types.HttpOptions, store: RedisStore, key: str, count: int) -> None:
    from pipecat.frames.frames import InputAudioRawFrame

    from realtime_resumption.frames import SessionResumptionUpdateFrame
    from realtime_resumption.pipecat import GeminiLiveLLMService

    from ..pipecat.rig import Rig

    service = GeminiLiveLLMService(
        api_key="emulator-key",
        http_options=options,
        settings=GeminiLiveLLMService.Settings(model=MODEL),
        system_instruction="You are a helpful assistant.",  # an initial answer: a first handle
        store=store,
        session_key=key,
        store_options=OPTIONS,
    )
    async with Rig([service]) as rig:
        await rig.context()  # the bot's first answer, and the handle after it
        await rig.wait(
            lambda: any(f.handle and f.resumable for f in rig.of(SessionResumptionUpdateFrame))
        )
        for seq in range(1, count + 1):
            audio = user_audio(seq, speech=True)
            await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1))
            print(f"sent {seq}", flush=True)
            await asyncio.sleep(CHUNK)
        await asyncio.Event().wait()  # a call in progress, until the process is killed


async def livekit_call(options: types.HttpOptions, store: RedisStore, key: str, count: int) -> None:
    from livekit.agents import Agent, AgentSession
    from livekit.plugins import realtime_resumption as rr

    from ..livekit.lk_helpers import Microphone, Speaker

    mic = Microphone(pace=1.0)
    model = rr.RealtimeModel(
        api_key="emulator-key",
        http_options=options,
        store=store,
        session_key=key,
        store_options=OPTIONS,
    )
    session = AgentSession(llm=model, aec_warmup_duration=None)
    session.input.audio = mic
    session.output.audio = Speaker()
    agent = Agent(instructions="Be brief.")
    await session.start(agent)
    await session.generate_reply(instructions="Greet the caller.")
    async with asyncio.timeout(10):
        while agent.realtime_llm_session._transport.resumption_handle is None:  # noqa: ASYNC110
            await asyncio.sleep(CHUNK)
    mic.say(["hello"], speech_chunks=count)
    told = 0
    while True:  # a call in progress, until the process is killed
        # The microphone's frames reach the session as they are captured.
        for seq in mic.spoken[told:]:
            print(f"sent {seq}", flush=True)
        told = len(mic.spoken)
        await asyncio.sleep(CHUNK / 2)


async def main(
    mode: str, base_url: str, ca_file: str, redis_url: str, key: str, count: int
) -> None:
    options, store = http_options(base_url, ca_file), RedisStore(url=redis_url)
    if mode in ("transport", "drain", "told"):
        await transport_call(options, store, key, count, drain=mode == "drain", told=mode == "told")
    elif mode == "pipecat":
        await pipecat_call(options, store, key, count)
    else:
        await livekit_call(options, store, key, count)


if __name__ == "__main__":
    mode, base_url, ca_file, redis_url, key, count = sys.argv[1:]
    asyncio.run(main(mode, base_url, ca_file, redis_url, key, int(count)))
