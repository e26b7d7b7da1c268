"""What the transport assumes of a live model that the service does not say: how it runs
function calls, and whether it takes setup changes and history in the middle of a session.

The service announces none of this: each trait comes from the model's documentation (the
sources are in ``gemini-live-facts``, *Late 2026*), keyed by the model's version as its id
spells it, and each can be overridden where the transport is constructed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from google.genai import types

_VERSION: Final = re.compile(r"gemini(?:-[a-z]+)*-(\d+)(?:\.(\d+))?")


def model_version(model: str) -> tuple[int, int] | None:
    """The (major, minor) version in a model id (``models/gemini-3.8-live`` is (3, 8),
    ``gemini-live-2.5-flash-preview`` (2, 5)); None when the id carries none."""
    match = _VERSION.search(model)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


@dataclass(frozen=True)
class ModelTraits:
    """How a live model behaves where the service leaves a client to know it."""

    non_blocking_calls: bool = False
    """A function call whose declaration does not say ``behavior=BLOCKING`` lets the model
    go on answering while it runs (gemini-3.8-live: non-blocking by default). False: only
    calls declared ``NON_BLOCKING`` do."""
    in_session_updates: bool = False
    """The model takes a new system instruction and tool list in the session
    (``contextUpdate``; gemini-3.8-live on Vertex AI). False: a setup change needs a new
    connection."""
    mid_session_client_content: bool = False
    """A session seeding its history through ``client_content`` (``historyConfig``) takes
    content turns with roles for the whole session (gemini-3.8-live), not only before its
    first realtime input (gemini-3.1-flash-live-preview)."""


def traits(
    model: str,
    *,
    vertex: bool,
    in_session_updates: bool | None = None,
    mid_session_client_content: bool | None = None,
) -> ModelTraits:
    """The traits of ``model`` as documented: the 3.8 family's on 3.8 and later, the earlier
    models' (every trait off) otherwise and for an id without a version; ``in_session_updates``
    and ``mid_session_client_content`` override the documented ones (None: as documented)."""
    version = model_version(model)
    documented = version is not None and version >= (3, 8)
    return ModelTraits(
        non_blocking_calls=documented,
        in_session_updates=(
            documented and vertex if in_session_updates is None else in_session_updates
        ),
        mid_session_client_content=(
            documented if mid_session_client_content is None else mid_session_client_content
        ),
    )


def non_blocking_functions(tools: Iterable[types.Tool], *, by_default: bool) -> frozenset[str]:
    """The declared functions whose calls do not hold the answer: those declared
    ``NON_BLOCKING``, and with ``by_default`` (``ModelTraits.non_blocking_calls``) every one
    not declared ``BLOCKING``."""
    names: set[str] = set()
    for tool in tools:
        for declaration in tool.function_declarations or ():
            behavior = declaration.behavior
            if declaration.name and (
                behavior == types.Behavior.NON_BLOCKING
                or (by_default and behavior != types.Behavior.BLOCKING)
            ):
                names.add(declaration.name)
    return frozenset(names)
