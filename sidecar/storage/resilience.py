"""Redis fault tolerance: the one retry policy every Redis command of Skiff goes through.

`ResilientRedis` (the client RedisStore.connect builds; the group store, the broker
registry and the wake-up listener share it) runs each command and each pipeline under
`run()`: connection loss, timeouts, LOADING, BUSY, READONLY, MASTERDOWN, NOSCRIPT, the
Cluster's MOVED/ASK/TRYAGAIN/CLUSTERDOWN, refused writes (OOM, MISCONF, NOREPLICAS),
maxclients, a WAIT unblocked by a failover and a busy pool are retried with exponential
backoff and full jitter (tenacity) until the operation's deadline (`classify` names the
reason), then `RedisUnavailable` is raised, which the Kafka layer turns into retriable
error codes (sidecar/apis/unavailable.py; Produce's per reason: `produce_error`).
Each refusal is logged, at most once per reason every 10 s; an outage once.

`run()` also admits at most --redis-max-connections attempts at once (`_admit`): the
rest wait for a slot, so the shared pools (sized by `pool_size()`) never run out.

A write that may have run is never blindly sent again. The connection classes mark an
attempt as *sent* the moment its bytes go to the socket (connection.py), so a failure
before that (connection refused, a dead pooled connection found by the health check)
is always safe to retry, and a refusal by the server (LOADING, BUSY, READONLY,
MASTERDOWN, NOSCRIPT) means nothing ran. A connection loss or a timeout *after* the
send leaves the outcome unknown: writes that are safe to run twice (reads, HSET of the
same values, the append with its token, lua/brokers.lua, lua/init_producer.lua with
its request token) are retried; a caller whose write is not (lua/group_write.lua: an
old offset commit re-run after a newer one would move the offset back) wraps it in
`no_resend()` and gets `RedisUnavailable(maybe_applied=True)` instead.

Deadlines: a Kafka request's Redis work is bounded by `request_deadline()` (set by the
server for every request, narrowed by Produce to half its timeout_ms), so the client
gets an answer well within its request.timeout.ms; work outside a request (heartbeats,
sweeps) gets `Policy.budget_s` per operation. Every failed attempt and every retry is
counted by reason in fault_stats.STATS, which also says whether Redis is reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MasterDownError,
    MaxConnectionsError,
    MovedError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    wait_random_exponential,
)

from sidecar.storage.fault_stats import STATS
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger("skiff.redis")

T = TypeVar("T")

# Reasons for which the server refused the command (or it never left the sidecar):
# nothing ran, a resend is safe.
REFUSED = frozenset(
    {
        "loading",
        "busy",
        "readonly",
        "masterdown",
        "noscript",
        "tryagain",
        "moved",
        "ask",
        "clusterdown",
        "maxclients",
        "oom",
        "misconf",
        "noreplicas",
        "pool",
    }
)
MIN_ATTEMPT_S = 0.25
# Reasons that do not make Redis count as unreachable (a reload fixes it at once).
BENIGN = frozenset({"noscript"})
# Routine during a resharding or failover: counted, not logged.
ROUTINE = frozenset({"noscript", "moved", "ask"})
# The Kafka error a Produce partition gets when its append gave up for a reason (the
# answer of every other API is in sidecar/apis/unavailable.py). All are retriable:
# REQUEST_TIMED_OUT when the outcome may be unknown (an idempotent producer's resend is
# deduplicated), KAFKA_STORAGE_ERROR when Redis refuses writes for want of memory or a
# failing disk (Kafka's answer for an offline log dir; clients refresh metadata and
# retry), NOT_ENOUGH_REPLICAS when Redis's own min-replicas-to-write refused it.
PRODUCE_ERRORS = {
    "oom": "KAFKA_STORAGE_ERROR",
    "misconf": "KAFKA_STORAGE_ERROR",
    "noreplicas": "NOT_ENOUGH_REPLICAS",
}


def produce_error(reason: str) -> str:
    """The Kafka error name for a Produce partition whose append gave up for `reason`."""
    return PRODUCE_ERRORS.get(reason, "REQUEST_TIMED_OUT")


@dataclass(slots=True)
class Policy:
    timeout_s: float = 2.0  # socket timeout of one command (--redis-timeout-ms)
    budget_s: float = 8.0  # retry time of one operation or request (--redis-retry-ms)
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 1.0
    max_connections: int = 128  # Redis commands in flight at once (--redis-max-connections)


POLICY = Policy()
# The gate admits POLICY.max_connections attempts at once: the rest wait for a free
# slot (within their attempt's bound) instead of asking a pool for more connections
# than it holds (redis-py raises "Too many connections" then).
_gate_loop: asyncio.AbstractEventLoop | None = None
_gate_sem: asyncio.Semaphore | None = None
# Connections a pool holds beyond the gate: the wake-up subscription and the few calls
# that do not go through run() (ROLE probes of a Redis Cluster's nodes).
POOL_SLACK = 16


def configure(timeout_ms: int, retry_ms: int, max_connections: int | None = None) -> None:
    global _gate_sem
    POLICY.timeout_s = max(timeout_ms, 1) / 1000
    POLICY.budget_s = max(retry_ms, 0) / 1000
    if max_connections is not None:
        POLICY.max_connections = max(max_connections, 1)
        _gate_sem = None  # made anew at its next use


def pool_size() -> int:
    """Connections each Redis connection pool (per node on a Redis Cluster) may hold."""
    return POLICY.max_connections + POOL_SLACK


class RedisUnavailable(Exception):
    """Redis did not answer within the operation's deadline (or a write that may have
    run cannot be resent). The Kafka answer is a retriable error code."""

    def __init__(self, reason: str, maybe_applied: bool, detail: str) -> None:
        super().__init__(f"Redis unavailable ({reason}): {detail}")
        self.reason = reason
        self.maybe_applied = maybe_applied


def cluster_classify(exc: BaseException) -> str | None:
    """Redis Cluster faults (storage/cluster_client.py): MOVED/ASK that reached us (the
    append's own routing; redis-py follows them for other commands), CLUSTERDOWN, a slot
    without a primary or no reachable node mid-failover. None of them ran the command:
    it is resent once the slot map is current."""
    if isinstance(exc, MovedError):
        return "moved"
    if isinstance(exc, AskError):  # a slot migrating: resent with backoff until it moved
        return "ask"
    if isinstance(exc, (ClusterDownError, SlotNotCoveredError)):
        return "clusterdown"
    if isinstance(exc, RedisClusterException) and "connect" in str(exc):
        return "connection"  # no seed node answered the topology query
    if isinstance(exc, ClusterError):  # "TTL exhausted": redirected too often
        return "moved"
    return None


# Error replies (by their first word) of a Redis that refuses writes for now: out of
# memory (maxmemory with noeviction), a failing RDB save (stop-writes-on-bgsave-error),
# too few replicas for its min-replicas-to-write.
_REFUSALS = {"MISCONF": "misconf", "NOREPLICAS": "noreplicas", "BUSY": "busy"}


def _response_reason(exc: ResponseError) -> str | None:
    if isinstance(exc, OutOfMemoryError):  # redis-py strips its "OOM" word
        return "oom"
    message = str(exc)
    word = message.split(" ", 1)[0]
    if word in _REFUSALS:
        return _REFUSALS[word]
    # WAIT (behind an append) on a primary that a failover just demoted: the append
    # ran there; resent with its token, the new primary answers the first run's offset.
    if word == "UNBLOCKED" or "WAIT cannot be used with replica" in message:
        return "demoted"
    if "max number of clients reached" in message:
        return "maxclients"
    return None


def classify(exc: BaseException) -> str | None:
    """The fault reason of a Redis error that a retry may cure, else None."""
    if isinstance(exc, RedisUnavailable):
        return exc.reason
    if isinstance(exc, MaxConnectionsError) or (
        isinstance(exc, RedisConnectionError) and "No connection available" in str(exc)
    ):
        return "pool"  # never sent: every connection of the pool was busy
    cluster_reason = cluster_classify(exc)
    if cluster_reason is not None:
        return cluster_reason
    if isinstance(exc, NoScriptError):
        return "noscript"
    if isinstance(exc, ReadOnlyError):
        return "readonly"
    if isinstance(exc, MasterDownError):
        return "masterdown"
    if isinstance(exc, TryAgainError):
        return "tryagain"
    if isinstance(exc, BusyLoadingError):
        return "loading"
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return None
    if isinstance(exc, ResponseError):
        return _response_reason(exc)
    if isinstance(exc, (RedisTimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, RedisConnectionError):
        if "max number of clients reached" in str(exc):
            return "maxclients"  # Redis's maxclients: it closed the new connection
        # redis-py's Sentinel connection turns READONLY from a demoted primary into this.
        return "readonly" if "now a slave" in str(exc) else "connection"
    if isinstance(exc, OSError):
        return "connection"
    return None


# -- per-task context ---------------------------------------------------------------


class _Attempt:
    __slots__ = ("sent", "bound")

    def __init__(self) -> None:
        self.sent = False
        # Seconds the attempt may wait for its reply, when its op bounds that wait itself
        # (run(..., bounded=True)); None: run() bounds it with asyncio.timeout.
        self.bound: float | None = None


_attempt: ContextVar[_Attempt | None] = ContextVar("skiff_redis_attempt", default=None)
# Set while an attempt holds a slot of the gate: a Redis call it makes is not gated again.
_admitted: ContextVar[bool] = ContextVar("skiff_redis_admitted", default=False)
_deadline: ContextVar[float | None] = ContextVar("skiff_redis_deadline", default=None)
_no_resend: ContextVar[bool] = ContextVar("skiff_redis_no_resend", default=False)
_tentative: ContextVar[bool] = ContextVar("skiff_redis_tentative", default=False)


def attempt_bound() -> float | None:
    """The current attempt's bound when its op is to enforce it (run(bounded=True)): a
    wait past it must fail with redis.exceptions.TimeoutError."""
    attempt = _attempt.get()
    return None if attempt is None else attempt.bound


def mark_sent() -> None:
    """Called by the connection classes right before a command's bytes are written."""
    attempt = _attempt.get()
    if attempt is not None:
        attempt.sent = True


class request_deadline:  # noqa: N801 - used as a function: `with request_deadline(s):`
    """Bound the Redis retries of what runs inside (and of tasks it starts) to
    `seconds` from now (an enclosing, earlier deadline stays); None: no bound but the
    per-operation budget. A class, not @contextmanager: every request enters two (its
    generator cost a few microseconds each)."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds

    def __enter__(self) -> None:
        seconds = self._seconds
        if seconds is None:
            self._token = _deadline.set(None)
            return
        deadline = time.monotonic() + (seconds if seconds > 0.0 else 0.0)
        outer = _deadline.get()
        self._token = _deadline.set(deadline if outer is None or deadline < outer else outer)

    def __exit__(self, *exc: object) -> None:
        _deadline.reset(self._token)


def rearm_deadline(seconds: float) -> None:
    """Start a fresh bound in the current task (a long poll's read after its wait)."""
    _deadline.set(time.monotonic() + max(seconds, 0.0))


def remaining() -> float:
    """Seconds of retry time left to the current operation or request."""
    request = _deadline.get()
    return POLICY.budget_s if request is None else max(request - time.monotonic(), 0.0)


@contextlib.contextmanager
def tentative() -> Iterator[None]:
    """Calls inside have an answer to fall back on and wait only briefly (a cached
    lookup): their failures are counted but are no outage to log or to report as
    unready. A loaded sidecar misses such short deadlines while Redis is fine."""
    token = _tentative.set(True)
    try:
        yield
    finally:
        _tentative.reset(token)


@contextlib.contextmanager
def no_resend() -> Iterator[None]:
    """Writes inside are not run twice: once sent, a lost reply or a timeout raises
    RedisUnavailable(maybe_applied=True) instead of a resend."""
    token = _no_resend.set(True)
    try:
        yield
    finally:
        _no_resend.reset(token)


def _gate() -> asyncio.Semaphore:
    """The running loop's gate (tests run several loops in one process)."""
    global _gate_loop, _gate_sem
    loop = asyncio.get_running_loop()
    if _gate_loop is not loop or _gate_sem is None:
        _gate_loop, _gate_sem = loop, asyncio.Semaphore(POLICY.max_connections)
    return _gate_sem


async def _admit(bound: float) -> asyncio.Semaphore:
    """Take one of the gate's slots, waiting at most `bound` seconds for one."""
    gate = _gate()
    if not gate.locked():  # a free slot: taken at once, without arming a timeout
        await gate.acquire()
        return gate
    try:
        async with asyncio.timeout(bound):
            await gate.acquire()
    except TimeoutError:
        raise MaxConnectionsError(
            f"all {POLICY.max_connections} Redis connections busy for {bound:.2f} s "
            "(--redis-max-connections)"
        ) from None
    return gate


# -- reachability, logged once per change ----------------------------------------------

_down_since: float | None = None  # first failure of the current outage
_logged = False  # the outage was logged (so its end is logged too)


# reason -> its line, logged once per FAULT_LOG_INTERVAL_S
_fault_logs: dict[str, RateLimitedLog] = {}
FAULT_LOG_INTERVAL_S = 10.0


def _log_fault(reason: str, what: str, exc: BaseException) -> None:
    """One line per reason per FAULT_LOG_INTERVAL_S: a failover or an overload fails
    many commands at once."""
    line = _fault_logs.get(reason)
    if line is None:
        line = _fault_logs[reason] = RateLimitedLog(log, FAULT_LOG_INTERVAL_S)
    if reason == "pool":
        line.warning("Redis connections all busy (%s): %s; waiting", what, exc)
    else:
        line.warning("Redis error (%s) on %s: %s; retrying", reason, what, exc)


def _failed(reason: str, what: str, exc: BaseException, attempt: int) -> None:
    global _down_since, _logged
    STATS.errors[reason] += 1
    if reason in BENIGN or _tentative.get():
        return
    # Connection loss and timeouts are logged as an outage (below); a refusal by Redis
    # (OOM, READONLY, LOADING, maxclients, ...) or a full pool each get their own line.
    if reason not in ROUTINE and reason not in ("connection", "timeout"):
        _log_fault(reason, what, exc)
    if reason == "pool":
        return  # the sidecar's own queue for a connection, not Redis
    STATS.reachable = False
    if _down_since is None:
        _down_since = time.monotonic()
    # A single failure cured by the next attempt (a pooled connection Redis closed while
    # idle) is no outage worth a line; a second one in a row is.
    if not _logged and attempt >= 2:
        _logged = True
        log.warning("Redis is unavailable (%s: %s: %s); retrying", reason, what, exc)


def _succeeded() -> None:
    global _down_since, _logged
    if not STATS.reachable:
        STATS.reachable = True
    if _down_since is not None:
        if _logged:
            log.warning("Redis is available again after %.1f s", time.monotonic() - _down_since)
        _down_since = None
        _logged = False


# -- the retry loop ---------------------------------------------------------------------

_WAIT = wait_random_exponential(multiplier=0.05, max=1.0)


def _wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if exc is not None and classify(exc) in ("noscript", "moved"):
        return 0.0  # reloaded / slot map updated before the next attempt: no reason to wait
    _WAIT.multiplier = POLICY.backoff_initial_s
    _WAIT.max = POLICY.backoff_max_s
    return float(_WAIT(state))


class _RunState:
    __slots__ = ("sent", "need_reload")

    def __init__(self) -> None:
        self.sent = False  # the last attempt's command may have reached Redis
        self.need_reload = False  # NOSCRIPT: load the script before the next attempt


async def _one_attempt(
    op: Callable[[], Awaitable[T]],
    deadline: float,
    what: str,
    number: int,
    state: _RunState,
    bounded: bool = False,
) -> T:
    marker = _Attempt()
    token = _attempt.set(marker)
    # Half the time left per attempt, so a reply lost without a connection error (a hung
    # peer) still leaves time to resend; at least MIN_ATTEMPT_S, so the last attempt is
    # not cut shorter than a slow but healthy Redis needs.
    bound = max((deadline - time.monotonic()) / 2, MIN_ATTEMPT_S)
    gate = admitted = None
    try:
        if not _admitted.get():  # (a Redis call made inside an admitted one is in)
            # Waiting for a slot and the command each get the bound: both together stay
            # within the time left, and the wait does not cut the command short.
            gate = await _admit(bound)
            admitted = _admitted.set(True)
        if bounded:  # the op enforces the bound itself (append_channel.py)
            marker.bound = bound
            return await op()
        try:
            async with asyncio.timeout(bound):
                return await op()
        except TimeoutError as exc:
            if isinstance(exc, RedisTimeoutError):
                raise
            raise RedisTimeoutError(f"no reply within {bound:.2f} s") from None
    except Exception as exc:
        state.sent = marker.sent
        reason = classify(exc)
        if reason is not None:
            _failed(reason, what, exc, number)
            state.need_reload = reason == "noscript"
        raise
    finally:
        if gate is not None and admitted is not None:
            _admitted.reset(admitted)
            gate.release()
        _attempt.reset(token)


async def run(
    op: Callable[[], Awaitable[T]],
    what: str,
    reload: Callable[[], Awaitable[Any]] | None = None,
    bounded: bool = False,
) -> T:
    """Run `op` (one Redis command or pipeline, or a prepared append) under the retry
    policy. `reload` loads the script again after NOSCRIPT (Redis restarted without
    persistence, failed over, or SCRIPT FLUSH). `bounded`: `op` bounds each attempt's
    wait itself, to attempt_bound() (the append channel, which keeps one timer for all
    its calls: an asyncio.timeout per append cost a timer and a handful of calls)."""
    request = _deadline.get()
    now = time.monotonic()
    deadline = now + POLICY.budget_s if request is None else request
    if deadline <= now:
        # This request already spent its retry time: answer it now.
        raise RedisUnavailable("timeout", False, f"{what}: no retry time left in this request")
    state = _RunState()
    # The first attempt without tenacity: the common case costs a few microseconds.
    try:
        result = await _one_attempt(op, deadline, what, 1, state, bounded)
        _succeeded()
        return result
    except Exception as exc:
        first = exc
    once = _no_resend.get()

    def retriable(exc: BaseException) -> bool:
        reason = classify(exc)
        if reason is None:
            return False
        if once and state.sent and reason not in REFUSED:
            return False
        return time.monotonic() < deadline

    if not retriable(first):
        _give_up(first, what, state)

    def stop(retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return time.monotonic() + upcoming >= deadline

    def before_sleep(retry_state: RetryCallState) -> None:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if exc is not None:
            STATS.retries[classify(exc) or "other"] += 1

    STATS.retries[classify(first) or "other"] += 1
    if not state.need_reload:
        await asyncio.sleep(random.uniform(0, POLICY.backoff_initial_s))
    retrying = AsyncRetrying(
        retry=retry_if_exception(retriable),
        wait=_wait,
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                if state.need_reload and reload is not None:
                    state.need_reload = False
                    await reload()
                number = attempt.retry_state.attempt_number + 1
                result = await _one_attempt(op, deadline, what, number, state, bounded)
                _succeeded()
                return result
    except Exception as exc:
        _give_up(exc, what, state)
    raise AssertionError("unreachable")


def _give_up(exc: Exception, what: str, state: _RunState) -> NoReturn:
    reason = classify(exc)
    if reason is None or isinstance(exc, RedisUnavailable):
        raise exc
    maybe = state.sent and reason not in REFUSED
    _failed(reason, what, exc, 2)  # gave up: an outage, logged once
    STATS.errors[reason] -= 1  # counted when the attempt failed
    raise RedisUnavailable(reason, maybe, f"{what}: {exc}") from exc


# -- the client -------------------------------------------------------------------------

# sha -> source of every script Skiff uses, so a NOSCRIPT can be cured here.
SCRIPTS: dict[str, str] = {}


def register_script(sha: str, source: str) -> None:
    SCRIPTS[sha] = source


class ResilientRedis(Redis):
    """redis.asyncio.Redis whose commands and pipelines go through run()."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        reload = None
        if isinstance(name, (str, bytes)) and str(name).upper() in ("EVALSHA", "EVALSHA_RO"):
            source = SCRIPTS.get(args[1] if isinstance(args[1], str) else args[1].decode())
            if source is not None:

                async def reload() -> None:
                    await Redis.execute_command(self, "SCRIPT", "LOAD", source)

        return await run(
            lambda: Redis.execute_command(self, *args, **options),
            str(name),
            reload,
        )

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return ResilientPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )


class ResilientPipeline(Pipeline):
    """A pipeline whose execute() runs under run(); each attempt sends the whole stack."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = list(self.command_stack)

        async def attempt() -> list[Any]:
            self.command_stack = list(stack)
            return await Pipeline.execute(self, raise_on_error)

        return await run(attempt, "MULTI" if self.is_transaction else "PIPELINE")
