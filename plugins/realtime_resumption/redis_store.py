"""A ``SessionStore`` on any Redis-protocol server (Redis, Valkey, Redis Cluster), through
redis-py's asyncio client (``pip install 'realtime-resumption[redis]'``).

Per session key two Redis keys, ``<prefix>{<key>}:record`` (a list: the record, then the parts
appended to it; with its time to live) and ``<prefix>{<key>}:lease`` (the lease owner's token, with the lease's): the braces are a
hash tag, so both live in one Cluster slot and the Lua scripts below touch one slot only. The
lease is taken by a Lua script that sets it only when it is free or the caller's (with expiry);
renewing, releasing, saving and appending are Lua scripts that act only when the lease holds the caller's token, so no
process ever extends, frees or writes under a lease it lost. Nothing secret goes into a key
name: the session key is the application's (a room's name), the record's content is the value.

Every operation is bounded (``timeout``) and every failure is a ``StoreError`` naming the
operation, never the record: a server down, a timeout, a key of another type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from redis import asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from realtime_resumption.store import StoreError, check_key, check_ttl

DEFAULT_PREFIX: Final = "realtime-resumption:"
DEFAULT_TIMEOUT: Final = 1.0
"""Seconds one store operation may take: a slow Redis must not hold a call's state back for
long (the saver skips a beat and tries again)."""

DEFAULT_MAX_CONNECTIONS: Final = 32
"""Connections a store made from a url opens at most: the sessions of a worker share them, and
a save waits (within ``timeout``) for a free one rather than opening ever more."""

_T = TypeVar("_T")

# ARGV[1]: the owner token the write is fenced by ('' for none).
_SAVE: Final = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
_APPEND: Final = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
_DELETE: Final = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
"""
_ACQUIRE: Final = """
local held = redis.call('GET', KEYS[1])
if held == false or held == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
_RENEW: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisStore:
    """A ``SessionStore`` on a Redis-protocol server; see the module documentation.

    Pass a ready ``client`` (``redis.asyncio.Redis`` or ``RedisCluster``; it must not decode
    responses) or a ``url`` (``redis://host:6379/0``, ``rediss://`` for TLS; the store then
    shares at most ``max_connections`` among its sessions). ``prefix`` starts every key name.
    ``timeout`` bounds each operation. ``close()`` closes a client the store
    made from ``url`` (a given client is the caller's to close).
    """

    def __init__(
        self,
        client: Any | None = None,
        *,
        url: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if (client is None) == (url is None):
            raise ValueError("pass either a redis client or a url, not both nor neither")
        self._timeout = check_ttl(timeout)
        self._owned = client is None
        self._client: Any = (
            client
            if client is not None
            else aioredis.Redis(
                connection_pool=aioredis.BlockingConnectionPool.from_url(
                    str(url),
                    max_connections=max_connections,
                    timeout=timeout,
                    socket_timeout=timeout,
                    socket_connect_timeout=timeout,
                )
            )
        )
        self._prefix = prefix
        self._save = self._client.register_script(_SAVE)
        self._append = self._client.register_script(_APPEND)
        self._delete = self._client.register_script(_DELETE)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._renew = self._client.register_script(_RENEW)
        self._release = self._client.register_script(_RELEASE)

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self._prefix!r})"

    def record_key(self, key: str) -> str:
        """The Redis key of ``key``'s record."""
        return f"{self._prefix}{{{check_key(key)}}}:record"

    def lease_key(self, key: str) -> str:
        """The Redis key of ``key``'s lease."""
        return f"{self._prefix}{{{check_key(key)}}}:lease"

    async def close(self) -> None:
        """Close the client the store made from ``url``."""
        if self._owned:
            await self._client.aclose()

    async def load(self, key: str) -> list[bytes] | None:
        """See ``SessionStore.load``."""
        name = self.record_key(key)
        values = await self._run("load", lambda: self._client.lrange(name, 0, -1))
        if not all(isinstance(value, bytes) for value in values):
            raise StoreError(
                "load: the client decodes responses; make it with decode_responses=False"
            )
        return list(values) or None

    async def save(self, key: str, record: bytes, ttl: float, *, lease: str | None = None) -> bool:
        """See ``SessionStore.save``."""
        keys = [self.record_key(key), self.lease_key(key)]
        args: list[bytes | str | int] = [lease or "", record, _ms(ttl)]
        return bool(await self._run("save", lambda: self._save(keys=keys, args=args)))

    async def append(self, key: str, part: bytes, ttl: float, *, lease: str | None = None) -> bool:
        """See ``SessionStore.append``."""
        keys = [self.record_key(key), self.lease_key(key)]
        args: list[bytes | str | int] = [lease or "", part, _ms(ttl)]
        return bool(await self._run("append", lambda: self._append(keys=keys, args=args)))

    async def delete(self, key: str, *, lease: str | None = None) -> bool:
        """See ``SessionStore.delete``."""
        keys = [self.record_key(key), self.lease_key(key)]
        args = [lease or ""]
        return bool(await self._run("delete", lambda: self._delete(keys=keys, args=args)))

    async def acquire(self, key: str, owner: str, ttl: float) -> bool:
        """See ``SessionStore.acquire``."""
        keys = [self.lease_key(key)]
        ms = _ms(ttl)
        return bool(await self._run("acquire", lambda: self._acquire(keys=keys, args=[owner, ms])))

    async def renew(self, key: str, owner: str, ttl: float) -> bool:
        """See ``SessionStore.renew``."""
        keys = [self.lease_key(key)]
        ms = _ms(ttl)
        return bool(await self._run("renew", lambda: self._renew(keys=keys, args=[owner, ms])))

    async def release(self, key: str, owner: str) -> bool:
        """See ``SessionStore.release``."""
        keys = [self.lease_key(key)]
        return bool(await self._run("release", lambda: self._release(keys=keys, args=[owner])))

    async def _run(self, operation: str, call: Callable[[], Awaitable[_T]]) -> _T:
        try:
            async with asyncio.timeout(self._timeout):
                return await call()
        except TimeoutError:
            raise StoreError(f"redis {operation} timed out after {self._timeout:g} s") from None
        except ResponseError as error:
            if str(error).startswith("WRONGTYPE"):
                raise StoreError(
                    f"redis {operation}: a key of this session holds another type "
                    "(not written by this store: check the prefix)"
                ) from None
            raise StoreError(f"redis {operation} failed: {error}") from None
        except (RedisError, OSError) as error:
            raise StoreError(f"redis {operation} failed: {type(error).__name__}: {error}") from None


def _ms(ttl: float) -> int:
    return max(1, round(check_ttl(ttl) * 1000))
