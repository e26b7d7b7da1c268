"""A local OpenAI Realtime server for tests, the demo and users' own tests.

The unmodified ``openai`` SDK, Pipecat's ``OpenAIRealtimeLLMService`` and LiveKit's
``openai.realtime.RealtimeModel`` connect to it over TLS; it speaks the GA protocol (and the
beta spelling where a client asks for it), detects speech in the caller's audio, answers
deterministically from what the conversation holds, at playback pace, closes each session at
the service's cap, injects scripted faults and records every session's conversation in a
ledger::

    async with OpenAIEmulator(OpenAIEmulatorConfig(time_scale=0.01)) as emu:
        client = emu.client()
        async with client.realtime.connect(
            model="gpt-realtime", websocket_connection_options=emu.websocket_options()
        ) as connection:
            ...
        print(emu.ledger.summary())
"""

from __future__ import annotations

from ..emulator.answers import answer_text_ids
from ..emulator.audio import answer_chunk_id, answer_chunk_ids, user_audio, user_audio_seqs
from .conversation_ledger import AnswerRecord, ItemRecord, Ledger, LedgerSummary, SessionRecord
from .realtime_server import OpenAIEmulator
from .replies import reply
from .scripted_faults import REFUSALS, Faults
from .service_config import (
    CAP_CLOSE_CODE,
    KIND_SERVICE,
    SESSION_CAP,
    OpenAIEmulatorConfig,
    cap_reason,
)

__all__ = [
    "CAP_CLOSE_CODE",
    "KIND_SERVICE",
    "REFUSALS",
    "SESSION_CAP",
    "AnswerRecord",
    "Faults",
    "ItemRecord",
    "Ledger",
    "LedgerSummary",
    "OpenAIEmulator",
    "OpenAIEmulatorConfig",
    "SessionRecord",
    "answer_chunk_id",
    "answer_chunk_ids",
    "answer_text_ids",
    "cap_reason",
    "reply",
    "user_audio",
    "user_audio_seqs",
]
