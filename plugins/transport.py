"""The provider-connection interface (``LLMTransport``) and its value types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """The framework's answer to one ``ToolCall``, matched by ``id``."""

    id: str
    name: str
    response: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayItem:
    """One completed conversation item, replayed as quiet context into a fresh session.

    Exactly one of ``text``, ``tool_call`` and ``tool_result`` is set.
    """

    role: Literal["user", "model"]
    text: str | None = None
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None
