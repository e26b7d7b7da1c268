"""A ``SessionStore`` on any Redis-protocol server (Redis, Valkey, Redis Cluster), through
redis-py's asyncio client (``pip install 'realtime-resumption[redis]'``).

Per session key two Redis keys, ``<prefix>{<key>}:record`` (a list: the record, then the parts
appended to it; with its time to live) and ``<prefix>{<key>}:lease`` (the lease owner's token, with the lease's): the braces are a
hash tag, so both live in one Cluster slot and the Lua scripts below touch one slot only. The
lease is taken by a Lua script that sets it only when it is free or the caller's (with expiry);
renewing, releasing, saving and appending are Lua scripts that act only when the lease holds the caller's token, so no
process ever extends, frees or writes under a lease it lost. Nothing secret goes into a key
name: the session key is the application's (a room's name), the record's content is the value.

Operations are pipelined: the commands the sessions of a process ask for while a batch is on
its way go out together as the next one (one round trip, one connection), so a worker's many
calls cost the client and the server one exchange per batch, not one per save. A fenced save or
append also renews the writer's lease (``lease_ttl``), so a call that keeps writing needs no
renewal of its own.

Every operation is bounded (twice ``timeout`` from when it is asked for: the batch on its way,
then its own, each within ``timeout``) and every failure is a ``StoreError`` naming the operation, never the record: a
server down, a timeout, a key of another type.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Final

from redis import asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from realtime_resumption.store import StoreError, check_key, check_ttl

DEFAULT_PREFIX: Final = "realtime-resumption:"
DEFAULT_TIMEOUT: Final = 1.0
"""Seconds one store operation may take: a slow Redis must not hold a call's state back for
long (the saver skips a beat and tries again)."""

DEFAULT_MAX_CONNECTIONS: Final = 32
"""Connections a store made from a url opens at most (its batches use one at a time; a client
given to other work too may use more)."""

MAX_BATCH: Final = 1000
"""Commands one pipelined batch carries at most (the rest go in the next)."""

# ARGV[1]: the owner token the write is fenced by ('' for none); ARGV[4]: the lease's new time
# to live in ms when the write renews it ('' for none).
_SAVE: Final = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[1] ~= '' and ARGV[4] ~= '' then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
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
if ARGV[1] ~= '' and ARGV[4] ~= '' then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
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
    responses) or a ``url`` (``redis://host:6379/0``, ``rediss://`` for TLS). ``prefix`` starts
    every key name. ``timeout`` bounds each batch (an operation: twice that). ``close()`` stops the batches and
    closes a client the store made from ``url`` (a given client is the caller's to close).
    A store serves one event loop.
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
        self._queue: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        """Commands asked for and not sent yet, each with the future of its reply."""
        self._sender: asyncio.Task[None] | None = None
        """Sends the queue in batches while it has commands; owned by the store."""
        self._connection: Any = None
        """The connection the batches go on (a single server's), taken from the pool."""
        self.batches = 0
        """Round trips made (pipelined batches sent)."""
        self.commands = 0
        """Commands sent in them."""

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self._prefix!r})"

    def record_key(self, key: str) -> str:
        """The Redis key of ``key``'s record."""
        return f"{self._prefix}{{{check_key(key)}}}:record"

    def lease_key(self, key: str) -> str:
        """The Redis key of ``key``'s lease."""
        return f"{self._prefix}{{{check_key(key)}}}:lease"

    async def close(self) -> None:
        """Stop sending (commands not sent yet fail with ``StoreError``) and close the client
        the store made from ``url``."""
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
        self._fail(self._queue, ConnectionError("the store is closed"))
        self._queue = []
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._client.connection_pool.release(connection)
        if self._owned:
            await self._client.aclose()

    async def load(self, key: str) -> list[bytes] | None:
        """See ``SessionStore.load``."""
        values = await self._run("load", "LRANGE", self.record_key(key), 0, -1)
        if not all(isinstance(value, bytes) for value in values):
            raise StoreError(
                "load: the client decodes responses; make it with decode_responses=False"
            )
        return list(values) or None

    async def save(
        self,
        key: str,
        record: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """See ``SessionStore.save``."""
        return await self._write("save", _SAVE, key, record, ttl, lease, lease_ttl)

    async def append(
        self,
        key: str,
        part: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """See ``SessionStore.append``."""
        return await self._write("append", _APPEND, key, part, ttl, lease, lease_ttl)

    async def _write(
        self,
        operation: str,
        script: str,
        key: str,
        value: bytes,
        ttl: float,
        lease: str | None,
        lease_ttl: float | None,
    ) -> bool:
        renew = _ms(lease_ttl) if lease_ttl is not None else ""
        keys = (self.record_key(key), self.lease_key(key))
        args = (lease or "", value, _ms(ttl), renew)
        return bool(await self._run(operation, "EVAL", script, 2, *keys, *args))

    async def delete(self, key: str, *, lease: str | None = None) -> bool:
        """See ``SessionStore.delete``."""
        keys = (self.record_key(key), self.lease_key(key))
        return bool(await self._run("delete", "EVAL", _DELETE, 2, *keys, lease or ""))

    async def acquire(self, key: str, owner: str, ttl: float) -> bool:
        """See ``SessionStore.acquire``."""
        name = self.lease_key(key)
        return bool(await self._run("acquire", "EVAL", _ACQUIRE, 1, name, owner, _ms(ttl)))

    async def renew(self, key: str, owner: str, ttl: float) -> bool:
        """See ``SessionStore.renew``."""
        name = self.lease_key(key)
        return bool(await self._run("renew", "EVAL", _RENEW, 1, name, owner, _ms(ttl)))

    async def release(self, key: str, owner: str) -> bool:
        """See ``SessionStore.release``."""
        name = self.lease_key(key)
        return bool(await self._run("release", "EVAL", _RELEASE, 1, name, owner))

    async def _run(self, operation: str, *command: Any) -> Any:
        """``command``'s reply, sent in the next batch; ``StoreError`` naming ``operation``.
        The scripts go as ``EVAL`` (the server keeps them compiled by digest): a server that
        restarted empty runs them as well, with no reload."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._queue.append((command, reply))
        if self._sender is None or self._sender.done():
            self._sender = loop.create_task(self._send(), name="redis-store-batches")
        try:
            # The batch on its way first (within ``timeout``), then this one's.
            async with asyncio.timeout(2 * self._timeout):
                # A caller that gives up (timed out, cancelled) cancels its reply: a command
                # not sent yet is then dropped from its batch.
                return await reply
        except TimeoutError:
            raise StoreError(f"redis {operation} timed out after {2 * self._timeout:g} s") from None
        except ResponseError as error:
            if "WRONGTYPE" in str(error):  # a script's error names it after its own prefix
                raise StoreError(
                    f"redis {operation}: a key of this session holds another type "
                    "(not written by this store: check the prefix)"
                ) from None
            raise StoreError(f"redis {operation} failed: {error}") from None
        except (RedisError, OSError) as error:
            raise StoreError(f"redis {operation} failed: {type(error).__name__}: {error}") from None

    async def _send(self) -> None:
        """Send the queue, one pipelined batch at a time, until it is empty: what is asked for
        while a batch is on its way goes in the next."""
        while self._queue:
            batch = [
                (command, reply) for command, reply in self._queue[:MAX_BATCH] if not reply.done()
            ]
            del self._queue[:MAX_BATCH]
            if not batch:
                continue
            try:
                async with asyncio.timeout(self._timeout):
                    replies = await self._exchange([command for command, _ in batch])
            except asyncio.CancelledError:
                self._fail(batch, ConnectionError("the store is closed"))
                raise
            except Exception as error:  # the callers map it (a timeout, a connection lost)
                self._fail(batch, error)
                continue
            self.batches += 1
            self.commands += len(batch)
            for (_, reply), value in zip(batch, replies, strict=True):
                if reply.done():
                    continue
                if isinstance(value, Exception):
                    reply.set_exception(value)
                else:
                    reply.set_result(value)

    async def _exchange(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The replies to ``commands``, sent in one round trip (an error reply as its
        exception). A single server's go on one connection the store keeps (a pipeline
        object and a pool checkout per batch would cost more than the exchange); a
        cluster's through its pipeline, which sends each command to its key's node."""
        if not isinstance(self._client, aioredis.Redis):
            pipeline = self._client.pipeline(transaction=False)
            for command in commands:
                pipeline.execute_command(*command)
            return list(await pipeline.execute(raise_on_error=False))
        if self._connection is None:
            pool: Any = self._client.connection_pool
            self._connection = await pool.get_connection()
        connection = self._connection
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    # Bounded by the batch's timeout, not one per reply.
                    replies.append(await connection.read_response(timeout=math.inf))
                except ResponseError as error:
                    replies.append(error)
            return replies
        except BaseException:
            # Out of step with its replies: the next batch connects anew.
            await connection.disconnect(nowait=True)
            raise

    @staticmethod
    def _fail(batch: list[tuple[tuple[Any, ...], asyncio.Future[Any]]], error: Exception) -> None:
        for _, reply in batch:
            if not reply.done():
                reply.set_exception(error)


def _ms(ttl: float) -> int:
    return max(1, round(check_ttl(ttl) * 1000))
