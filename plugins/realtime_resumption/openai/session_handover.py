"""What a new OpenAI Realtime session is given to carry a call on from an old one.

OpenAI Realtime has no resumption: a new session is empty. :func:`plan_handover` reads the old
session's :class:`~realtime_resumption.openai.conversation_state.ConversationState` (and what
the transport sent that the old session never confirmed) and returns a :class:`Handover`:

- the **seed**: the conversation as ``conversation.item.create`` events
  (:func:`~realtime_resumption.openai.conversation_seed.build_seed`, bounded by a token budget);
- the **input no committed item holds** (``uncommitted_audio``), appended to the new session
  after the seed, so a question spoken across the end is heard once, whole;
- the **items the client created that no echo confirmed** (a function's output, a typed turn
  sent just before the end), sent again after the seed: the old session may never have had
  them, and the seed cannot hold them;
- whether the new session must be **asked for an answer** (``response.create``): an answer
  the end cut (its words cut where the audio the user received ends: a cut the client knows
  of that no server confirms), a committed turn the old session owed an answer, or a
  ``response.create`` the old session never acknowledged. Never while a function call waits
  for its output: the output asks for the answer when it comes.

Pure: the old session has ended (or stops taking input at the switch), so cutting its answer
in its state changes nothing anyone else reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from realtime_resumption.openai.conversation_seed import DEFAULT_BUDGET_TOKENS, Seed, build_seed
from realtime_resumption.openai.conversation_state import ConversationState
from realtime_resumption.openai.session_config import PCM16_24K, AudioFormat, Flavour


@dataclass(frozen=True)
class Handover:
    """What the new session is given, in this order: see the module documentation."""

    seed: Seed
    audio: bytes = field(repr=False)
    """Input to append (the old session's input format)."""
    resend: tuple[dict[str, Any], ...] = field(repr=False)
    """``conversation.item.create`` events to send again, oldest first."""
    answer: bool
    """Ask the new session for an answer once it has all of the above."""
    cut: tuple[str, ...]
    """Ids of the answers the end cut (their items; the response's id when it had none yet)."""


def plan_handover(
    state: ConversationState,
    *,
    unconfirmed: Sequence[dict[str, Any]] = (),
    response_requested: bool = False,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    input_format: AudioFormat = PCM16_24K,
    flavour: Flavour = "ga",
) -> Handover:
    """The handover from the session ``state`` follows (see the module documentation).

    ``unconfirmed``: the ``conversation.item.create`` events the client sent that no echo
    confirmed; ``response_requested``: a ``response.create`` was sent and no
    ``response.created`` came.
    """
    cut = _cut_answers(state)
    seed = build_seed(
        state.items,
        budget_tokens=budget_tokens,
        input_format=input_format,
        flavour=flavour,
    )
    confirmed = {item.id for item in state.items}
    resend = tuple(e for e in unconfirmed if e.get("item", {}).get("id") not in confirmed)
    owed = bool(cut) or state.awaiting_response or response_requested
    return Handover(
        seed=seed,
        audio=state.uncommitted_audio(),
        resend=resend,
        answer=owed and not state.calls_awaiting_output(),
        cut=cut,
    )


def _cut_answers(state: ConversationState) -> tuple[str, ...]:
    """Cut the answer under way where its received audio ends; the ids of its items."""
    response = state.response_in_progress
    if response is None:
        return ()
    cut = []
    for item in state.items:
        if item.response_id == response and item.kind == "assistant":
            state.truncate(item.id, item.audio_ms)
            cut.append(item.id)
    return tuple(cut) or (response,)
