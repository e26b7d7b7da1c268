"""The OpenAI Realtime emulator's ledger, read for ``--takeover --openai``.

OpenAI Realtime keeps nothing of a session: each worker that takes the call over opens a new
one and gives it the call as items (the conversation, the open function call, the speech no
item held yet). So each session's conversation holds what the sessions before it held, and
the ledger is read across them: the user's speech is kept when an item of any session holds
it, a function output is an answer in the first session that holds it and carried in the
sessions after, and the next question's answer says what the session was given (the
emulator's ``recall`` rule).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from realtime_resumption.testing.openai_emulator import AnswerRecord, OpenAIEmulator

from .openai_call import answer_words
from .takeover_figures import LedgerFigures

_CHUNK_ID = re.compile(r"\[\d+\.\d+\]")
"""The id each answer chunk's transcript starts with (``answer_text_ids``)."""


class OpenAILedger:
    """The OpenAI emulator's ledger, read for the lane."""

    def __init__(self, emulator: OpenAIEmulator) -> None:
        self._emulator = emulator

    def _answer_text(self, answer: AnswerRecord) -> str:
        for session in self._emulator.ledger.sessions:
            item = session.item(answer.item_id) if answer.item_id else None
            if item is not None:
                return item.text
        return ""

    def _complete(self) -> list[tuple[int, AnswerRecord]]:
        """Every complete answer, with the index of its session."""
        return [
            (session.index, answer)
            for session in self._emulator.ledger.sessions
            for answer in session.answers
            if answer.outcome == "complete"
        ]

    def tool_answered(self) -> bool:
        """An answer made from the tool's result is complete."""
        return any("result " in self._answer_text(a) for _, a in self._complete())

    def _answer_to(self, question: Sequence[str]) -> AnswerRecord | None:
        """The last complete answer to ``question``, heard whole in one turn."""
        words = list(question)
        found = [a for _, a in self._complete() if answer_words(self._answer_text(a)) == words]
        return found[-1] if found else None

    def answered(self, question: Sequence[str]) -> bool:
        """``question``, heard whole in one turn, has a complete answer."""
        return self._answer_to(question) is not None

    def figures(self, last_question: Sequence[str]) -> LedgerFigures:
        sessions = self._emulator.ledger.sessions
        summary = self._emulator.ledger.summary()
        issued = {call for s in sessions for a in s.answers for call in a.calls}
        responses, stray = 0, 0
        held: Counter[str] = Counter()
        for session in sessions:
            outputs = Counter(
                item.call_id or ""
                for item in session.items
                if item.type == "function_call_output" and not item.deleted
            )
            # What the session before held and gave this one is carried, not answered again.
            new = outputs - held
            responses += sum(n for call, n in new.items() if call in issued)
            stray += sum(n for call, n in new.items() if call not in issued)
            held = outputs
        resent = 0
        for session in sessions:
            heard = False
            for item in session.items:
                heard = heard or item.source == "speech"
                resent += heard and item.source == "client" and item.role == "user"
        last = self._answer_to(last_question)
        context: tuple[str, ...] = ()
        recalled: str | None = None
        if last is not None:
            session = next(s for s in sessions if s.item(last.item_id or "") is not None)
            answered = [i.id for i in session.items].index(last.item_id or "")
            # The user's turns before the question answered: typed, given or spoken.
            context = tuple(
                item.text
                for item in session.items[:answered]
                if item.role == "user" and not item.deleted and item.text
            )[:-1]
            recalled = recalled_words(self._answer_text(last))
        return LedgerFigures(
            kept=frozenset(summary.speech_committed),
            sessions=summary.sessions,
            connections=len(sessions),
            answers=tuple(a.outcome for s in sessions for a in s.answers),
            tool_calls_issued=len(issued),
            tool_responses=responses,
            tool_responses_stray=stray,
            next_answered=last is not None,
            context=context,
            recalled=recalled,
            resent=resent,
            heard_twice=len(summary.speech_heard_twice),
        )


def recalled_words(answer: str) -> str:
    """The earlier user turns an answer says again after its ``recall`` ("" if none)."""
    _, found, rest = _CHUNK_ID.sub("", answer).partition(", recall ")
    return " ".join(rest.split(", result ", 1)[0].split()) if found else ""
