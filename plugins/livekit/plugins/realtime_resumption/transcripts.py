"""The user's utterances, from the transport's transcription deltas.

Gemini streams the user's words as small deltas, often mid-word, and sends the last of them
after the model began answering. An utterance therefore stays open until the generation it
belongs to ends (as with the Google plugin, whose final transcript comes then too). Its id is
the item id LiveKit files the final transcript under.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from livekit.agents import utils


@dataclass
class Utterance:
    """One user utterance being transcribed."""

    item_id: str = field(default_factory=lambda: utils.shortuuid("GI_"))
    text: str = ""
    started_at: float = field(default_factory=time.time)

    def add(self, delta: str) -> None:
        # Gemini starts with a space, which means nothing at the start of a transcript.
        self.text += delta.lstrip() if not self.text else delta
