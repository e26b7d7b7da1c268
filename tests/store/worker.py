"""A worker process for the SIGKILL test: it takes a call (a transport on the emulator keeping
its state in Redis), streams the user's speech, says each chunk it sent, and then idles until
it is killed.

    python -m tests.store.worker BASE_URL CA_FILE REDIS_URL KEY COUNT
"""

from __future__ import annotations

import asyncio
import ssl
import sys

from google import genai
from google.genai import types

from realtime_resumption.emulator import user_audio
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.redis_store import RedisStore

from ..transport.transport_helpers import GRACE, MODEL
from .takeover_helpers import CHUNK, OPTIONS


async def main(base_url: str, ca_file: str, redis_url: str, key: str, count: int) -> None:
    client = genai.Client(
        api_key="emulator-key",
        http_options=types.HttpOptions(
            base_url=base_url,
            async_client_args={"ssl": ssl.create_default_context(cafile=ca_file)},
        ),
    )
    transport = GeminiLiveTransport(
        client=client,
        model=MODEL,
        tool_call_grace=GRACE,
        store=RedisStore(url=redis_url),
        session_key=key,
        store_options=OPTIONS,
    )
    handle = asyncio.Event()
    transport.on_resumption_update = lambda *_: handle.set()
    await transport.connect()
    await asyncio.wait_for(handle.wait(), 10)
    for seq in range(1, count + 1):
        transport.send_audio(user_audio(seq, speech=True))
        print(f"sent {seq}", flush=True)
        await asyncio.sleep(CHUNK)
    await asyncio.Event().wait()  # a call in progress, until the process is killed


if __name__ == "__main__":
    base_url, ca_file, redis_url, key, count = sys.argv[1:]
    asyncio.run(main(base_url, ca_file, redis_url, key, int(count)))
