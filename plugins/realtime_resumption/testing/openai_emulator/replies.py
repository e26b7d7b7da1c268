"""The deterministic model: what an answer says, and which functions a turn calls.

An answer depends only on what the conversation holds, so a test can tell what reached a
session: it says ``heard <the last user turn's words>``; when that turn holds the word
``recall``, it adds ``recall <the words of every earlier user turn>`` (a word said in one
session and given to a later one as an item comes back); after function outputs, it adds
``result <each output>``. The tool rule is the Gemini emulator's (``called_functions``): a
declared function is called when its name is a word of the user's turn, unless the turn was
already answered with calls.

The words are spoken in the first audio chunk's transcript, after its id: chunk ``k`` of answer
``t`` reads ``"[t.k] "`` (``answer_text_ids`` finds them in a joined transcript).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..emulator.answers import answer_text


def reply(user_text: str, earlier: Sequence[str], outputs: Sequence[str]) -> str:
    """What the answer to ``user_text`` says, given the earlier user turns and the function
    outputs given since it."""
    parts = [f"heard {user_text}" if user_text.strip() else "heard nothing"]
    if "recall" in re.findall(r"\w+", user_text.lower()):
        parts.append("recall " + " ".join(t for t in earlier if t.strip()))
    if outputs:
        parts.append("result " + "; ".join(outputs))
    return ", ".join(parts)


def chunk_transcript(turn: int, chunk: int, words: str) -> str:
    """The transcript of chunk ``chunk`` of answer ``turn`` (the first carries ``words``)."""
    text = answer_text(turn, chunk)
    return f"{text}{words} " if chunk == 0 and words else text
