"""The wire floor the benchmarks set beside the transport: the least a Python client does per
20 ms chunk through websockets' public API. Each chunk is base64-encoded into a fixed JSON
text and awaited on the SDK session's own WebSocket (its private ``_ws``: a benchmark's reach)
over TLS; every server message is read and dropped. No models, no accounting, no checks."""

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
