"""What the server holds, as a LiveKit chat context with the ids LiveKit gives those items.

AgentActivity builds every chat-context update on ``session.chat_ctx`` and sends only the
difference, so the mirror must hold exactly what the server has, under the ids AgentActivity
uses: user transcripts under their item ids, answers under their message ids, function calls
under the items the function stream carried. Gemini cannot remove or edit what it holds, so
the mirror only grows; a removal or an edit asked for is logged and left as it is.

The conversions are the Google plugin's own (``to_provider_format("google")``,
``get_tool_results_for_realtime``), so turns and tool results read as they do with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from google.genai import types
from livekit.agents import llm
from livekit.agents.types import NotGivenOr
from livekit.plugins.google.utils import get_tool_results_for_realtime

from realtime_resumption.transport import ContentTurn, ToolResult, ToolResultScheduling

from ..log import logger

_SCHEDULING: dict[types.FunctionResponseScheduling, ToolResultScheduling] = {
    types.FunctionResponseScheduling.INTERRUPT: "interrupt",
    types.FunctionResponseScheduling.WHEN_IDLE: "when_idle",
    types.FunctionResponseScheduling.SILENT: "silent",
}


@dataclass(frozen=True)
class Outgoing:
    """What a chat-context update asks to send, in order: text turns, then tool results."""

    turns: tuple[ContentTurn, ...] = ()
    results: tuple[ToolResult, ...] = ()
    user_text: tuple[str, ...] = ()
    """The text of the new user turns (the live-text path sends these)."""


class ChatMirror:
    """The chat context the server holds; see the module documentation."""

    def __init__(self) -> None:
        self._ctx = llm.ChatContext.empty()
        self._warned_removal = False

    def copy(self) -> llm.ChatContext:
        """A copy of what the server holds."""
        return self._ctx.copy()

    def update(
        self,
        chat_ctx: llm.ChatContext,
        *,
        vertexai: bool,
        scheduling: NotGivenOr[types.FunctionResponseScheduling],
        silent_scheduling: bool,
    ) -> Outgoing:
        """Adopt the items of ``chat_ctx`` the server lacks and say what to send for them."""
        dropped = sum(1 for m in chat_ctx.messages() if m.role in ("system", "developer"))
        if dropped:
            logger.warning(
                "Gemini Live takes no system or developer messages in the conversation; "
                "dropped (use update_instructions)",
                extra={"dropped": dropped},
            )
        wanted = chat_ctx.copy(
            exclude_handoff=True,
            exclude_instructions=True,
            exclude_empty_message=True,
            exclude_config_update=True,
        )
        diff = llm.utils.compute_chat_ctx_diff(self._ctx, wanted)
        if diff.to_remove and not self._warned_removal:
            self._warned_removal = True
            logger.warning("Gemini Live cannot remove conversation items; they stay on the server")
        created = [
            item
            for _, item_id in diff.to_create
            if (item := wanted.get_by_id(item_id)) is not None
            and not (item.type == "message" and item.role in ("system", "developer"))
        ]
        if not created:
            return Outgoing()
        self._ctx.items.extend(created)
        fresh = llm.ChatContext(created)
        turns_dict, _ = fresh.copy(exclude_function_call=True).to_provider_format(
            format="google", inject_dummy_user_message=False
        )
        turns: list[ContentTurn] = []
        for turn in turns_dict:
            content = types.Content.model_validate(turn)
            text = "".join(part.text for part in content.parts or () if part.text)
            if text:
                turns.append(ContentTurn(_role(content.role), text))
        responses = get_tool_results_for_realtime(
            fresh,
            vertexai=vertexai,
            tool_response_scheduling=scheduling,
            supports_silent_scheduling=silent_scheduling,
        )
        results = tuple(
            ToolResult(
                id=response.id or "",
                name=response.name or "",
                response=dict(response.response or {}),
                scheduling=_SCHEDULING.get(response.scheduling) if response.scheduling else None,
            )
            for response in (responses.function_responses or () if responses else ())
        )
        user_text = tuple(t.text for t in turns if t.role == "user")
        return Outgoing(tuple(turns), results, user_text)

    def add(self, item: llm.ChatItem) -> None:
        """The server now holds ``item`` (a transcript, an answer, a function call)."""
        if self._ctx.get_by_id(item.id) is None:
            self._ctx.items.append(item)


def _role(role: str | None) -> Literal["user", "model"]:
    return "model" if role == "model" else "user"
