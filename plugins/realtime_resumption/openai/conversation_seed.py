"""The client events that give a new OpenAI Realtime session the conversation so far.

OpenAI Realtime has no resumption: a session that moves on is a new, empty one, and the
conversation reaches it only as ``conversation.item.create`` events (``openai`` SDK 3.63,
``openai/types/realtime/conversation_item_create_event_param.py``). :func:`build_seed` turns
the items a :class:`~realtime_resumption.openai.conversation_state.ConversationState` holds
(or, after a takeover, the provider-neutral
:class:`~realtime_resumption.transport.ReplayItem` values a store kept:
:func:`items_from_replay`) into those events:

- a user turn as its words (``input_text``); a user turn whose transcript never came as its
  audio (``input_audio``, base64 in the session's input format); typed text as text;
- an answer as the words the user heard (a truncated one cut where the user stopped hearing
  it), as text: the API cannot create assistant audio ("it cannot populate assistant audio
  messages"); GA spells that part ``output_text``
  (``realtime_conversation_item_assistant_message_param.py``), beta ``text``
  (``beta/realtime/conversation_item_content_param.py``);
- function calls and their outputs as ``function_call`` / ``function_call_output`` items, a
  call and its output kept or dropped together (an output whose call is missing is refused
  with ``invalid_tool_call_id``, "Tool call ID '...' not found in conversation.":
  livekit/agents issue 3344). A call still
  waiting for its output is kept, so the output can follow in the new session.

**Bounded by a token budget**, estimated as OpenAI's guide "Managing costs" (Realtime API)
counts: text at about four characters a token, user audio at one token per 100 ms, and a
couple of special tokens per item ("a user message with 10 text tokens of content may count
as 12 tokens"). The oldest items go first; the newest is always kept, however large.

**Item ids**: an item keeps its id in the new session (``item.id`` "may be provided by the
client", ``RealtimeConversationItemUserMessageParam.id``), so a later truncate or delete of
it needs no translation; an id longer than :data:`MAX_ITEM_ID` gets a stable derived one, and
:attr:`Seed.ids` maps every kept id. The items are chained from ``root``
(``previous_item_id``: "If set to `root`, the new item will be added to the beginning"), so
they stay before anything the new session commits meanwhile.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from realtime_resumption.openai.conversation_state import HeldItem, ItemKind
from realtime_resumption.openai.session_config import PCM16_24K, AudioFormat, Flavour
from realtime_resumption.transport import ReplayItem

CHARS_PER_TOKEN = 4
"""Text estimate (OpenAI: "one token generally corresponds to ~4 characters of text")."""
USER_AUDIO_MS_PER_TOKEN = 100
"""User audio: one token per 100 ms (OpenAI guide "Managing costs", Realtime API)."""
ITEM_OVERHEAD_TOKENS = 2
"""Special tokens each message adds (the same guide: 10 tokens of content count as 12)."""
MAX_ITEM_ID = 32
"""The longest client item id kept as it is (the bundled emulator refuses longer ones,
``realtime_session._create_item``); longer ids are replaced, see :func:`build_seed`."""
DEFAULT_BUDGET_TOKENS = 16_000
"""Half of a 32k context: ``gpt-realtime`` holds 28,224 tokens of context with 4,096 output
(``RealtimeTruncationParam``'s docstring), and the instructions, the tools and the call's
future turns need the rest."""


def estimate_tokens(item: HeldItem, input_format: AudioFormat = PCM16_24K) -> int:
    """The tokens ``item`` costs as seeded (see the module documentation)."""
    if _as_audio(item):
        ms = len(item.audio) / input_format.bytes_per_ms
        return math.ceil(ms / USER_AUDIO_MS_PER_TOKEN) + ITEM_OVERHEAD_TOKENS
    chars = len(item.text)
    if item.kind == "function_call":
        chars = len(item.name or "") + len(item.arguments or "")
    return math.ceil(chars / CHARS_PER_TOKEN) + ITEM_OVERHEAD_TOKENS


def _as_audio(item: HeldItem) -> bool:
    """A user turn seeded as its speech: its transcript never came, its audio was kept."""
    return item.kind == "user" and item.transcript_pending and bool(item.audio)


@dataclass(frozen=True)
class Seed:
    """What :func:`build_seed` made: the events to send in order, and what they hold."""

    events: tuple[dict[str, Any], ...] = field(repr=False)
    """``conversation.item.create`` client events, oldest item first."""
    items: tuple[HeldItem, ...] = field(repr=False)
    """The items seeded, under their ids in the new session (give them to the new session's
    :class:`~realtime_resumption.openai.conversation_state.ConversationState`)."""
    ids: Mapping[str, str]
    """Each seeded item's id in the old session to its id in the new one."""
    dropped: tuple[str, ...]
    """Ids of the items left out: over the budget, or nothing to seed them with (a user turn
    with neither words nor audio, an answer the user heard none of, an output whose call is
    gone, a call cut with its answer, an item type the API cannot create)."""
    tokens: int
    """The estimate of what the seeded items cost."""
    awaits_answer: bool
    """The newest item seeded is the user's turn or a function's output: the model's turn is
    due, and the new session answers only when asked (``response.create``). A turn whose
    answer the end cut before the user heard a word is such a turn (the empty answer is
    dropped)."""

    def new_id(self, old_id: str) -> str | None:
        """Where a truncate or delete of ``old_id`` goes now; None when it was not seeded."""
        return self.ids.get(old_id)


def build_seed(
    items: Sequence[HeldItem],
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    input_format: AudioFormat = PCM16_24K,
    flavour: Flavour = "ga",
) -> Seed:
    """The seed of ``items`` (a conversation in order) within ``budget_tokens``."""
    if budget_tokens < 1:
        raise ValueError("budget_tokens must be >= 1")
    if flavour not in ("ga", "beta"):
        raise ValueError(f"flavour must be 'ga' or 'beta', not {flavour!r}")
    seedable = _seedable(items)
    kept = _within_budget(seedable, budget_tokens, input_format)
    ids: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    seeded: list[HeldItem] = []
    previous = "root"
    for item in seedable:
        if item.id not in kept:
            continue
        new_id = _new_id(item.id, ids.values())
        ids[item.id] = new_id
        events.append(
            {
                "type": "conversation.item.create",
                "previous_item_id": previous,
                "item": _wire(item, new_id, flavour),
            }
        )
        # As the new session holds it: a spoken turn seeded as its words is a text item there.
        spoken = _as_audio(item)
        seeded.append(replace(item, id=new_id, has_audio=spoken, transcript_pending=spoken))
        previous = new_id
    return Seed(
        events=tuple(events),
        items=tuple(seeded),
        ids=ids,
        dropped=tuple(i.id for i in items if i.id not in ids),
        tokens=sum(estimate_tokens(i, input_format) for i in seeded),
        awaits_answer=bool(seeded) and seeded[-1].kind in ("user", "function_call_output"),
    )


def items_from_replay(replay: Sequence[ReplayItem]) -> tuple[HeldItem, ...]:
    """Provider-neutral replay items (a stored record's conversation) as items to seed, with
    ids of their own (``replay_<n>``): a tool call's arguments and a result's response as
    JSON text."""
    items: list[HeldItem] = []
    for n, entry in enumerate(replay):
        item_id = f"replay_{n}"
        if entry.tool_call is not None:
            call = entry.tool_call
            items.append(
                HeldItem(
                    item_id,
                    "function_call",
                    call_id=call.id,
                    name=call.name,
                    arguments=json.dumps(call.args, default=str),
                    status="completed",
                )
            )
        elif entry.tool_result is not None:
            result = entry.tool_result
            output = json.dumps(result.response, default=str)
            items.append(HeldItem(item_id, "function_call_output", text=output, call_id=result.id))
        else:
            kind: ItemKind = "user" if entry.role == "user" else "assistant"
            items.append(HeldItem(item_id, kind, text=entry.text or ""))
    return tuple(items)


# --- internals ------------------------------------------------------------------------------


def _seedable(items: Sequence[HeldItem]) -> list[HeldItem]:
    """The items a ``conversation.item.create`` can carry (see :attr:`Seed.dropped`)."""
    calls = {i.call_id for i in items if i.kind == "function_call" and i.status != "incomplete"}
    out = []
    for item in items:
        if item.kind == "user":
            ok = bool(item.text) or _as_audio(item)
        elif item.kind in ("assistant", "system"):
            ok = bool(item.text)
        elif item.kind == "function_call":
            ok = item.call_id in calls and item.name is not None
        elif item.kind == "function_call_output":
            ok = item.call_id in calls
        else:
            ok = False
        if ok:
            out.append(item)
    return out


def _within_budget(items: list[HeldItem], budget: int, input_format: AudioFormat) -> set[str]:
    """Ids of the newest items that fit ``budget``, a call and its output counted and kept
    together; the newest item is kept whatever it costs."""
    by_call: dict[str, list[HeldItem]] = {}
    for item in items:
        if item.call_id is not None:
            by_call.setdefault(item.call_id, []).append(item)
    kept: set[str] = set()
    spent = 0
    for item in reversed(items):
        if item.id in kept:
            continue
        unit = by_call[item.call_id] if item.call_id is not None else [item]
        cost = sum(estimate_tokens(i, input_format) for i in unit)
        if kept and spent + cost > budget:
            break
        kept.update(i.id for i in unit)
        spent += cost
    return kept


def _new_id(old_id: str, taken: Collection[str]) -> str:
    if len(old_id) <= MAX_ITEM_ID:
        return old_id
    # Stable, so the same conversation seeds the same ids, and short enough to be accepted.
    new_id = "seed_" + hashlib.sha256(old_id.encode()).hexdigest()[: MAX_ITEM_ID - 5]
    if new_id in taken:
        raise ValueError(f"two item ids derive the same seed id {new_id!r}")
    return new_id


def _wire(item: HeldItem, item_id: str, flavour: Flavour) -> dict[str, Any]:
    if item.kind == "function_call":
        return {
            "id": item_id,
            "type": "function_call",
            "call_id": item.call_id,
            "name": item.name,
            "arguments": item.arguments or "{}",
        }
    if item.kind == "function_call_output":
        return {
            "id": item_id,
            "type": "function_call_output",
            "call_id": item.call_id,
            "output": item.text,
        }
    if item.kind == "assistant":
        part = "output_text" if flavour == "ga" else "text"
        content = [{"type": part, "text": item.text}]
    elif _as_audio(item):
        # The speech alone: a partial transcript beside it would say its words twice.
        content = [{"type": "input_audio", "audio": base64.b64encode(item.audio).decode()}]
    else:
        content = [{"type": "input_text", "text": item.text}]
    return {"id": item_id, "type": "message", "role": item.kind, "content": content}
