"""The deterministic model: which tools a turn calls, what each answer chunk says, token usage.

Tool rule: a declared function is called when its name appears in the user's turn (typed text,
or the words of an audio turn) as a whole word, ignoring case. Every such function is called,
in declaration order, in one toolCall; the answer follows once every call has its response.

Answer text: chunk ``k`` of answer turn ``t`` reads ``"[t.k] "`` (text parts with the TEXT
modality, output transcription with audio), so a client can tell which chunks it received.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ANSWER_TEXT = re.compile(r"\[(\d+)\.(\d+)\]")


def called_functions(user_text: str, functions: Sequence[str]) -> list[str]:
    """The declared functions the user's turn asks for (see the module's tool rule)."""
    words = set(re.findall(r"\w+", user_text.lower()))
    return [name for name in dict.fromkeys(functions) if name.lower() in words]


def answer_text(turn: int, chunk: int) -> str:
    """What chunk ``chunk`` of answer turn ``turn`` says."""
    return f"[{turn}.{chunk}] "


def answer_text_ids(text: str) -> list[tuple[int, int]]:
    """Every (turn, chunk) found in answer text, e.g. a transcript the client joined."""
    return [(int(t), int(c)) for t, c in _ANSWER_TEXT.findall(text)]


def usage(user_text: str, produced: int, *, vertex_api: bool) -> dict[str, int]:
    """Token usage of a turn, spelt as the API the client dialled does (Vertex AI:
    ``candidatesTokenCount``; the Gemini API: ``responseTokenCount``)."""
    prompt = len(user_text.split()) + 1
    response_key = "candidatesTokenCount" if vertex_api else "responseTokenCount"
    return {
        "promptTokenCount": prompt,
        response_key: produced,
        "totalTokenCount": prompt + produced,
    }
