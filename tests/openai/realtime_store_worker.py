"""A worker process for the OpenAI SIGKILL test: it takes a call keeping its state in Redis,
says a word and has it answered, asks for a function it never answers (``tool CALL_ID``), then
starts a question it never finishes (``sent SEQ`` per speech chunk: the server's VAD heard
speech start, nothing is committed), says ``saved`` once the record in Redis holds what it sent, and
idles until it is killed.

    python -m tests.openai.realtime_store_worker BASE_URL WS_URL CA_FILE REDIS_URL KEY
"""

from __future__ import annotations

import asyncio
import ssl
import sys

import openai

from realtime_resumption.openai import OpenAIRealtimeOptions, OpenAIRealtimeTransport
from realtime_resumption.openai.realtime_record import RealtimeRecordCodec
from realtime_resumption.redis_store import RedisStore
from tests.openai.transport_helpers import Recorder
from tests.openai_emulator.oai_helpers import speech

from .realtime_store_helpers import ASKED, CONFIG, OPTIONS, WAIT


async def call(base_url: str, ws_url: str, ca_file: str, redis_url: str, key: str) -> None:
    client = openai.AsyncOpenAI(
        api_key="emulator-key", base_url=base_url, websocket_base_url=ws_url
    )
    tls = ssl.create_default_context(cafile=ca_file)
    store = RedisStore(url=redis_url)
    transport = OpenAIRealtimeTransport(
        client,
        CONFIG,
        OpenAIRealtimeOptions(websocket_options={"ssl": tls}),
        store=store,
        session_key=key,
        store_options=OPTIONS,
    )
    rec = Recorder(transport)
    await transport.connect()
    for chunk in speech(0, 5, ["pineapple"]):
        transport.send_audio(chunk)
    await rec.ended(1, timeout=WAIT)
    for chunk in speech(20, 3, ["lookup"]):
        transport.send_audio(chunk)
    await rec.until(lambda r: bool(r.tool_calls), timeout=WAIT)
    # The answer that asked for it is done (the service's response.done).
    await rec.until(lambda r: bool(r.named("on_turn_complete")[1:]), timeout=WAIT)
    print(f"tool {rec.tool_calls[0].id}", flush=True)
    first, count, words = ASKED
    for seq, chunk in enumerate(speech(first, count, words, silence=0), first):
        transport.send_audio(chunk)
        print(f"sent {seq}", flush=True)
    # The service heard the question start (the third turn's speech).
    await rec.until(lambda r: len(r.named("on_speech_started")) >= 3, timeout=WAIT)
    # Saved: the record in Redis holds the open call and ends with the last chunk sent.
    codec = RealtimeRecordCodec(session_key=key)
    async with asyncio.timeout(WAIT):
        while True:
            stored = await store.load(key)
            record = codec.decode(stored) if stored is not None else None
            if record is not None and record.tool_calls and record.audio.endswith(chunk):
                break
            await asyncio.sleep(OPTIONS.write_interval / 5)
    print("saved", flush=True)
    await asyncio.Event().wait()  # a call in progress, until the process is killed


if __name__ == "__main__":
    asyncio.run(call(*sys.argv[1:6]))
