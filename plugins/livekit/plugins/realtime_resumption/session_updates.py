"""The session updates a session keeps while its first connection is dialled (that dial may
have been set up without them: they are applied once it is up), merged into one."""

from __future__ import annotations

from dataclasses import fields, replace

from realtime_resumption.transport import SessionUpdate


def merged(first: SessionUpdate | None, second: SessionUpdate) -> SessionUpdate:
    """``second`` over ``first``: each setting ``second`` leaves None keeps ``first``'s (of
    the generation settings, each one)."""
    if first is None:
        return second
    given = {f.name: getattr(second, f.name) for f in fields(SessionUpdate)}
    update = replace(first, **{name: value for name, value in given.items() if value is not None})
    if first.generation is not None and second.generation is not None:
        update = replace(update, generation=first.generation.merged(second.generation))
    return update
