"""A local Gemini Live server for tests, the demo and users' own tests.

The unmodified google-genai SDK connects to it over TLS; it answers deterministically, keeps
sessions across connections with resumption handles, injects scripted faults, and records
everything in a ledger::

    async with Emulator(EmulatorConfig(profile="vertex", time_scale=0.1)) as emu:
        client = emu.client(vertex=True)
        async with client.aio.live.connect(model="gemini-live", config=...) as session:
            ...
        print(emu.ledger.summary())
"""

from __future__ import annotations

from .answers import answer_text_ids, called_functions
from .audio import answer_chunk_id, answer_chunk_ids, user_audio, user_audio_seqs
from .config import KIND_SERVICE, EmulatorConfig
from .faults import Applied, Faults
from .ledger import Ledger, LedgerSummary, SessionSummary, TurnSummary
from .models import Profile
from .server import Emulator

__all__ = [
    "KIND_SERVICE",
    "Applied",
    "Emulator",
    "EmulatorConfig",
    "Faults",
    "Ledger",
    "LedgerSummary",
    "Profile",
    "SessionSummary",
    "TurnSummary",
    "answer_chunk_id",
    "answer_chunk_ids",
    "answer_text_ids",
    "called_functions",
    "user_audio",
    "user_audio_seqs",
]
