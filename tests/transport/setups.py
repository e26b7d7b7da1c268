"""The setup messages the emulator receives, as the client wrote them.

The ledger records what a setup asked for but not its ``contextWindowCompression``: until it
does, :func:`received_setups` reads the raw setups as the emulator parses them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from realtime_resumption.testing.emulator import wire


def received_setups(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every setup message emulators receive from now on (in this test): the ``setup``
    object of each, in order."""
    setups: list[dict[str, Any]] = []
    parse = wire.parse_client_message

    def parse_and_keep(raw: str | bytes) -> wire.ClientMessage:
        message = parse(raw)
        if isinstance(message, wire.Setup):
            setups.append(json.loads(raw)["setup"])
        return message

    monkeypatch.setattr(wire, "parse_client_message", parse_and_keep)
    return setups


def compression(setup: dict[str, Any]) -> Any:
    """The setup's context-window compression with camelCase keys at every level (the SDK
    writes nested keys in snake_case), None when it has none."""
    return _camel(setup.get("contextWindowCompression", setup.get("context_window_compression")))


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            "".join(
                part if i == 0 else part.capitalize() for i, part in enumerate(key.split("_"))
            ): _camel(item)
            for key, item in value.items()
        }
    return value
