"""The wire floor the benchmarks set beside the transport: the least a Python client does per
20 ms chunk through websockets' public API. Each chunk is base64-encoded into a fixed JSON
text and awaited on the SDK's own WebSocket over TLS (google-genai's session's private ``_ws``,
a benchmark's reach; the ``openai`` SDK's raw calls); every server message is read and
dropped. No models, no accounting, no checks."""

from __future__ import annotations

import base64
from typing import Any, Final

from realtime_resumption.gemini.messages import INPUT_AUDIO_MIME

_PREFIX: Final = '{"realtimeInput":{"audio":{"data":"'
_SUFFIX: Final = f'","mimeType":"{INPUT_AUDIO_MIME}"}}}}}}'


async def send(session: Any, pcm: bytes) -> None:
    """Send one chunk of 16 kHz PCM16 on ``session``'s WebSocket."""
    await session._ws.send(_PREFIX + base64.b64encode(pcm).decode("ascii") + _SUFFIX)


async def drain(session: Any) -> None:
    """Read and drop every server message on ``session``'s WebSocket until it closes."""
    async for _ in session._ws:
        pass


# OpenAI Realtime: the same floor on the ``openai`` SDK's realtime connection, through its
# public raw calls (``send_raw``, ``recv_bytes``).
_APPEND_PREFIX: Final = '{"type":"input_audio_buffer.append","audio":"'


async def send_openai(connection: Any, pcm: bytes) -> None:
    """Append one chunk of 24 kHz PCM16 on the SDK's realtime ``connection``."""
    await connection.send_raw(_APPEND_PREFIX + base64.b64encode(pcm).decode("ascii") + '"}')


async def drain_openai(connection: Any) -> None:
    """Read and drop every server event on the SDK's realtime ``connection`` until it closes."""
    while True:
        await connection.recv_bytes()
