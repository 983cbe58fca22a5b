"""``Sender``: a producer's send attempts: the retry loop, retry classification and latency fault
bookkeeping, shared by :meth:`Producer.send <pocketmq.client.producer.producer.Producer.send>`
(and ``send_batch``) and ``send_async``. It also owns the producer's publish table (topic →
:class:`TopicPublishInfo`) and resolves routes and broker addresses for the attempts.

Rules (Java ``DefaultMQProducerImpl.sendDefaultImpl``):

* an attempt picks a queue (round robin avoiding the broker of the previous failed attempt, or
  the latency fault strategy when enabled) and sends SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE);
* a failed attempt is retried on the next queue, up to ``times`` attempts in all, when the error
  is a transport failure (:data:`RETRY_ON`) or a :class:`ResponseError` whose ``retriable`` flag
  is set (``refresh_route`` also refreshes the route first); any other error is raised at once;
* a reply other than SEND_OK is retried on another broker only with
  ``retry_another_broker_when_not_store_ok``;
* the budget bounds the whole send, retries included; every failure is kept and listed by the
  final :class:`SendFailedError`.

``send_async``'s common case (route and connection ready, no fault strategy, no VIP channel) is
:meth:`Sender.send_first`: the first attempt is written before ``send_async`` returns and its
reply is handed by the connection to the attempt itself (:class:`_Attempt`, in the place of a
reply future: no task, no callback, no loop turn between the request and the user's callback; a
plain message's attempt is its request too, :class:`_FirstSend`);
a failed first attempt continues in :meth:`Sender.send` with what is known so far (start time,
error, broker to avoid), so both paths follow the same rules.

The common send (route cached, no hooks) is one coroutine from :meth:`Sender.send` to the reply
future: no per-attempt coroutine layers, no enum-member lookups (slow on CPython 3.11).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

from pocketmq.client.api import MQClientAPI, SendRequest, send_request
from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import (
    BrokerNotFoundError,
    ClientClosedError,
    RemotingConnectError,
    RemotingTimeoutError,
    ResponseError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.message import MessageQueue, SendResult, SendStatus
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.prepare import MessagePreparer, Prepared
from pocketmq.client.route import TopicPublishInfo
from pocketmq.remoting.common.clock import Clock
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.topics import MASTER_ID

logger = logging.getLogger(__name__)

#: Failures of an attempt that are always retried on another queue (transport, unknown broker).
RETRY_ON = (RemotingConnectError, RemotingTimeoutError, BrokerNotFoundError)
#: Route refresh failures that leave the cached route in place.
_REFRESH_FAILURES = (TopicRouteNotFoundError, RemotingConnectError, RemotingTimeoutError)

# Enum member bound to a module name: on CPython 3.11 ``Enum.MEMBER`` costs ~80 ns (a metaclass
# attribute lookup) against ~20 ns for a global, and the send path reads it every time.
_SEND_OK = SendStatus.SEND_OK
_process_send_response = MQClientAPI.process_send_response
# A MessageQueue (a NamedTuple: topic, broker_name, queue_id) is read by name on the hot path:
# CPython 3.11 specializes neither read, but a subscript of a tuple subclass is the generic
# BINARY_SUBSCR (PyObject_GetItem, the index's conversion), ~0.13k instructions more than the
# _tuplegetter descriptor (callgrind: mq[2] 355, mq.queue_id 222 a read; a plain tuple's 13).

# asyncio.Future's own methods called unbound on a SendFuture: the C Future has an instance dict
# slot, so ``out.done()`` stays an unspecialized method load; a method descriptor call does not
_future_done = asyncio.Future.done
_future_set_result = asyncio.Future.set_result


def budget_start(born: int, budget: float) -> float:
    """The start of a send's ``budget`` on the monotonic clock, from the wall-clock ms its first
    attempt was born at (the send path reads one clock; only a retry reads both). To the ms; a
    wall-clock step between the two reads counts as no time (back) or at most the whole budget."""
    return time.monotonic() - min(max(0.0, time.time() - born / 1000), budget)


def is_retriable(exc: BaseException) -> bool:
    """Whether a failed attempt may be retried on another queue (the one classification)."""
    return isinstance(exc, RETRY_ON) or (isinstance(exc, ResponseError) and exc.retriable)


class Sender:
    """The send attempts of one producer.

    Args:
        config: the producer's (frozen) configuration.
        prep: encodes messages and the per-attempt request header fields.
        closed_error: builds the :class:`ClientClosedError` raised when :attr:`instance` is unset.
        clock: time source of the latency fault strategy.
    """

    def __init__(
        self,
        config: ProducerConfig,
        prep: MessagePreparer,
        closed_error: Callable[[], ClientClosedError],
        clock: Clock,
    ) -> None:
        self.config = config
        self.prep = prep
        self.fault = MQFaultStrategy(config.send_latency_fault_enable, clock)
        #: topic → publish info, updated by the client instance's route refreshes
        self.publish: dict[str, TopicPublishInfo] = {}
        #: the client instance while the producer runs; ``None`` before start and after shutdown
        self.instance: MQClientInstance | None = None
        #: the loop the producer started in (its instance's): send_first's futures are made
        #: with it, because a Future made without ``loop`` looks the running loop up, and
        #: CPython 3.11's lookup makes a getpid syscall each time (one per send_async)
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the producer's awaited sends (:meth:`send`'s first attempts) written, not answered
        self.awaiting = 0
        self._closed_error = closed_error
        # Hot-path copies of the config: read on every send.
        self.attempts = 1 + config.retry_times_when_send_failed
        self.attempts_async = 1 + config.retry_times_when_send_async_failed
        self._vip = config.vip_channel_enabled
        self.retry_not_stored = config.retry_another_broker_when_not_store_ok

    def running_instance(self) -> MQClientInstance:
        """The client instance. Raises ClientClosedError when the producer is not running."""
        inst = self.instance
        if inst is None:
            raise self._closed_error()
        return inst

    # ------------------------------------------------------------------------------ routes
    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """``topic``'s writable queues; an unknown topic gets the template's (``create_topic_key``)
        queues, and the broker creates the topic on the first send.

        Raises:
            TopicRouteNotFoundError: neither the topic nor its template has a writable route.
        """
        info = self.publish.get(topic)
        if info is not None and info.ok:
            return info
        inst = self.running_instance()
        self.publish.setdefault(topic, TopicPublishInfo())
        try:
            await inst.update_topic_route(topic)
        except TopicRouteNotFoundError:
            pass
        info = self.publish[topic]
        if info.ok:
            return info
        try:
            await inst.update_topic_route(
                topic,
                default_topic=self.config.create_topic_key,
                default_queue_nums=self.config.default_topic_queue_nums,
            )
        except TopicRouteNotFoundError as exc:
            raise TopicRouteNotFoundError(topic, "neither the topic nor its template route exists") from exc
        info = self.publish[topic]
        if not info.ok:
            raise TopicRouteNotFoundError(topic, "route has no writable queue")
        return info

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker (route refreshed once if unknown; the VIP port,
        2 below, with ``vip_channel_enabled``). Raises BrokerNotFoundError."""
        inst = self.running_instance()
        addr = inst.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            try:
                await inst.update_topic_route(mq.topic)
            except TopicRouteNotFoundError:
                pass
            addr = inst.find_broker_addr_in_publish(mq.broker_name)
            if addr is None:
                raise BrokerNotFoundError(mq.broker_name)
        if self._vip:
            host, _, port = addr.rpartition(":")
            addr = f"{host}:{int(port) - 2}"
        return addr

    async def _refresh(self, inst: MQClientInstance, topic: str, info: TopicPublishInfo) -> TopicPublishInfo:
        try:
            await inst.update_topic_route(topic)
        except _REFRESH_FAILURES:
            pass
        return self.publish.get(topic) or info

    # ---------------------------------------------------------------------------- attempts
    def command(
        self, api: MQClientAPI, p: Prepared, mq: MessageQueue, born: int = 0, own: bool = False
    ) -> RemotingCommand:
        """One attempt's request. A plain message's header comes from its queue's template (no
        extFields dict, no JSON dump) unless RPC hooks run. ``born``: its born timestamp (ms;
        0: now). ``own``: ``mq`` is one of ``p.topic``'s queues (an untagged message's template
        is then read by the queue alone, :attr:`MessagePreparer.untagged`)."""
        tags = p.plain_tags
        if tags is not None:
            remoting = api.remoting
            if not (remoting.hooks or remoting.before_hooks):  # hooks would see no ext_fields
                prep = self.prep
                # the cached template first (inline of MessagePreparer.head)
                tpl = (
                    prep.untagged.get(mq)
                    if own and not tags
                    else prep.heads.get((p.topic, mq.queue_id, mq.broker_name, tags))
                ) or prep.head(p, mq)
                if tpl is not None:
                    # inline of pocketmq.client.api.plain_request (one call less per send)
                    cmd: SendRequest = SendRequest()
                    cmd.opaque, cmd.body, cmd.tpl, cmd.uniq = 0, p.body, tpl, p.msg_id
                    cmd.born = born or time.time_ns() // 1_000_000
                    return cmd
        return send_request(self.prep.ext(p, mq), p.body, p.batch)

    def request(
        self, api: MQClientAPI, addr: str, p: Prepared, mq: MessageQueue, timeout: float
    ) -> Awaitable[RemotingCommand]:
        """Write one attempt's request (:meth:`command`); returns the reply's awaitable."""
        return api.remoting.invoke(addr, self.command(api, p, mq), timeout)

    async def send_to(self, p: Prepared, mq: MessageQueue, timeout: float) -> SendResult:
        """One attempt on ``mq``, no retry (explicit queues and selectors keep their order)."""
        inst = self.running_instance()
        addr = inst.find_broker_addr_in_publish(mq.broker_name)
        if addr is None or self._vip:
            addr = await self.broker_addr(mq)
        api = inst.api
        response = await self.request(api, addr, p, mq, timeout)
        return api.process_send_response(mq, response, p.msg_id, addr)

    async def send(
        self, p: Prepared, budget: float, times: int, *, begin: float | None = None,
        errors: list[BaseException] | None = None, last_broker: str | None = None,
        refresh: bool = False,
    ) -> SendResult:  # fmt: skip
        """Up to ``times`` attempts within ``budget`` seconds (the rules in the module docstring).

        ``begin``, ``errors``, ``last_broker`` and ``refresh`` continue a send whose first
        attempt :meth:`send_first` made.

        Raises:
            ClientClosedError; ResponseError (not retriable); SendFailedError (every attempt failed).
        """
        # The hot path of every send: one coroutine from here to the reply's future (the route
        # and broker address come from caches; the request is written and its future awaited
        # directly), so a send costs as few Python layers as possible.
        if begin is None and not self.fault.enabled and not self._vip:
            # The first attempt of the common case (route cached, broker address known, no
            # latency fault strategy) without the retry loop's bookkeeping; a failure continues
            # in the loop below with what is known, as send_first's does for send_async.
            info = self.publish.get(p.topic)
            inst = self.instance
            if info is not None and inst is not None and info.message_queues:
                # inline of pocketmq.client.route.TopicPublishInfo.select_one
                queues = info.message_queues
                info.index += 1
                mq = queues[info.index % len(queues)]
                # inline of MQClientInstance.find_broker_addr_in_publish
                addrs = inst.broker_addrs.get(mq.broker_name)
                addr = addrs.get(MASTER_ID) if addrs else None
                if addr is not None:
                    # the born timestamp is also the budget's start: the ms its UNIQ_KEY was
                    # made (as send_async's: no clock read here; 0, not a plain message: now)
                    born = p.born or time.time_ns() // 1_000_000
                    api = inst.api
                    remoting = api.remoting
                    self.awaiting += 1
                    try:
                        request = self.command(api, p, mq, born, True)  # (mq: p.topic's)
                        loop = self.loop
                        # the producer's only awaited send (one in flight): written alone, so
                        # that no batch opens and no _flush turn (a callback and an epoll_wait)
                        # follows it; with others in flight it joins or opens the turn's batch
                        if self.awaiting == 1 and loop is not None:
                            reply = loop.create_future()
                            if remoting.invoke_into(addr, request, budget, reply, True):
                                response = await reply
                            else:
                                response = await remoting.invoke(addr, request, budget)
                        else:
                            response = await remoting.invoke(addr, request, budget)
                        result = api.process_send_response(mq, response, p.msg_id, addr)
                    except RETRY_ON as exc:
                        logger.info("send to %s failed (attempt 1): %s", mq, exc)
                        errors = [exc]
                    except ResponseError as exc:
                        if not exc.retriable:
                            raise
                        errors, refresh = [exc], exc.refresh_route
                    else:
                        if result.send_status is _SEND_OK or not self.retry_not_stored or times <= 1:
                            return result
                        errors = []
                    finally:
                        self.awaiting -= 1
                    if times <= 1:
                        raise SendFailedError(p.topic, errors) from (errors[-1] if errors else None)
                    return await self.send(
                        p, budget, times - 1, begin=budget_start(born, budget), errors=errors,
                        last_broker=mq.broker_name,
                        refresh=refresh,
                    )  # fmt: skip
        resumed = begin is not None
        info = self.publish.get(p.topic)
        if info is None or not info.message_queues:
            info = await self.publish_info(p.topic)
        inst = self.instance
        if inst is None:
            raise self._closed_error()
        api = inst.api
        fault = self.fault
        if begin is None:
            begin = time.monotonic()
        if errors is None:
            errors = []
        if refresh:
            info = await self._refresh(inst, p.topic, info)
        remaining = budget
        for attempt in range(times):
            if attempt or resumed:
                inst = self.instance
                if inst is None:
                    raise self._closed_error()
                api = inst.api
                remaining = budget - (time.monotonic() - begin)
                if remaining <= 0:
                    errors.append(RemotingTimeoutError(f"send to {p.topic} timed out after {budget:.3f}s"))
                    break
            if last_broker is None and not fault.enabled:
                # The first attempt without latency fault tolerance: plain round robin.
                # inline of pocketmq.client.route.TopicPublishInfo.select_one
                queues = info.message_queues
                info.index += 1
                mq = queues[info.index % len(queues)]
            else:
                mq = fault.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            t0 = time.monotonic() if fault.enabled else 0.0
            try:
                addr = inst.find_broker_addr_in_publish(last_broker)
                if addr is None or self._vip:
                    addr = await self.broker_addr(mq)
                response = await self.request(api, addr, p, mq, remaining)
                result = api.process_send_response(mq, response, p.msg_id, addr)
            except RETRY_ON as exc:
                self.record_latency(mq, t0, failed=True)
                logger.info("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                errors.append(exc)
                continue
            except ResponseError as exc:
                self.record_latency(mq, t0, failed=True)
                if not exc.retriable:
                    raise
                errors.append(exc)
                if exc.refresh_route:
                    info = await self._refresh(inst, p.topic, info)
                continue
            if fault.enabled:
                self.record_latency(mq, t0, failed=False)
            if result.send_status is not _SEND_OK and self.retry_not_stored and attempt + 1 < times:
                continue
            return result
        raise SendFailedError(p.topic, errors) from (errors[-1] if errors else None)

    def record_latency(self, mq: MessageQueue, t0: float, *, failed: bool) -> None:
        """Fault bookkeeping of one attempt (a no-op unless ``send_latency_fault_enable``)."""
        if self.fault.enabled:
            self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), failed)

    def send_first(
        self, p: Prepared, budget: float, done: SendDone | None = None, born: int = 0
    ) -> SendFuture | None:
        """send_async's common case (route and connection ready, no fault strategy): write the
        first attempt now; its reply goes straight to an :class:`_Attempt` (no reply future,
        no callback through the loop); a failed attempt continues in :meth:`send`. ``None``:
        take the general path (:meth:`send` in a task).

        ``done(future)`` runs once the future is done, as a done callback would, but called
        directly when the reply completes it (no loop turn, no handle); a future cancelled by
        its owner or finished by a retry runs it as a done callback.

        ``born``: the attempt's born timestamp (ms; 0: now), also the start of the send's budget
        (read again only if the send is retried: one clock read per send, not three)."""
        info = self.publish.get(p.topic)
        inst = self.instance
        if info is None or not info.message_queues or self.fault.enabled or self._vip or inst is None:
            return None
        queues = info.message_queues
        # inline of pocketmq.client.route.TopicPublishInfo.select_one (index advanced once written)
        mq = queues[(info.index + 1) % len(queues)]
        # inline of MQClientInstance.find_broker_addr_in_publish (the broker's name read once)
        broker = mq.broker_name
        addrs = inst.broker_addrs.get(broker)
        addr = addrs.get(MASTER_ID) if addrs else None
        if addr is None:
            return None
        api = inst.api
        if not born:
            born = time.time_ns() // 1_000_000
        out = SendFuture(loop=self.loop)
        remoting = api.remoting
        tags = p.plain_tags
        tpl = None
        if tags is not None and not (remoting.hooks or remoting.before_hooks):
            # inline of command's template lookup; an untagged message's by its queue alone
            # (mq is one of p.topic's queues: MessagePreparer.untagged)
            prep = self.prep
            tpl = (
                prep.untagged.get(mq) if not tags else prep.heads.get((p.topic, mq.queue_id, broker, tags))
            ) or prep.head(p, mq)
        attempt: _Attempt
        if tpl is not None:
            # the request and its reply's waiter in one (plain_request's slots, then the attempt's)
            first: _FirstSend = _FirstSend()
            first.opaque, first.body, first.tpl, first.born, first.uniq = 0, p.body, tpl, born, p.msg_id
            request: RemotingCommand = first
            attempt = first
        else:
            # slots filled directly: no __init__ (cheaper than object.__new__ of a class that has one)
            attempt = _FirstAttempt()
            attempt.born = born
            request = self.command(api, p, mq, born)
        attempt.sender, attempt.out, attempt.p, attempt.budget, attempt.mq = self, out, p, budget, mq
        attempt.addr = addr
        try:
            if not remoting.invoke_into(addr, request, budget, attempt):
                return None  # no open connection (or RPC hooks): nothing was written
        except Exception:
            return None  # e.g. too many requests pending: the general path reports it in the future
        info.index += 1
        out.on_done = done
        return out

    def retry_after_first(
        self, out: SendFuture, p: Prepared, budget: float, born: int,
        mq: MessageQueue, exc: BaseException | None,
    ) -> None:  # fmt: skip
        """Continue a send_async whose first attempt on ``mq`` (born at ``born``, wall-clock ms)
        failed with ``exc`` (or was not stored): the remaining attempts in :meth:`send`,
        delivered into ``out``."""
        if self.attempts_async <= 1:
            failed = SendFailedError(p.topic, [exc] if exc else [])
            failed.__cause__ = exc
            out.set_exception(failed)
            out.finished()
            return
        done, out.on_done = out.on_done, None
        if done is not None:
            out.add_done_callback(done)
        if exc is not None and not isinstance(exc, ResponseError):
            logger.info("send to %s failed (attempt 1): %s", mq, exc)
        task = asyncio.ensure_future(
            self.send(
                p, budget, self.attempts_async - 1, begin=budget_start(born, budget),
                errors=[] if exc is None else [exc],
                last_broker=mq.broker_name, refresh=isinstance(exc, ResponseError) and exc.refresh_route,
            )
        )  # fmt: skip
        task.add_done_callback(partial(copy_outcome, out=out))


class SendDone(Protocol):
    """A send_async's done work: a done callback of its future that also takes the result
    when the caller has it at hand (not read back from the future)."""

    def __call__(self, f: SendFuture, result: SendResult | None = None, /) -> None: ...


class SendFuture(asyncio.Future[SendResult]):
    """send_first's future: ``on_done``, the owner's done callback, is called directly by the
    reply callback that completes the future (one loop handle less per send); once the future
    is cancelled, or handed to a retry, it becomes an ordinary done callback."""

    __slots__ = ("callback", "on_done")
    on_done: SendDone | None
    #: the owner's callback for ``on_done`` to run (send_async's ``callback``, set by it as
    #: send_first returns: ``on_done`` is then one partial per producer, not one per send)
    callback: Callable[[SendResult | None, BaseException | None], None] | None

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        done, self.on_done = self.on_done, None
        if done is not None:
            self.add_done_callback(done)
        return True

    def finished(self) -> None:
        """Completed by its reply callback: run ``on_done`` now."""
        done, self.on_done = self.on_done, None
        if done is not None:
            done(self)


class _Attempt:
    """The first attempt of a send_async in the connection's pending table
    (:meth:`RemotingClient.invoke_into`): the connection hands it the reply or the failure
    (timeout, connection lost) directly, and it delivers, raises or retries by the send rules.
    Two layouts: :class:`_FirstSend`, a plain message's, is its own request as well; a
    :class:`_FirstAttempt` goes with a request of its own."""

    __slots__ = ()
    sender: Sender
    out: SendFuture
    p: Prepared
    budget: float
    #: the attempt's born timestamp (wall-clock ms), the start of the send's budget
    born: int
    mq: MessageQueue
    addr: str

    def done(self) -> bool:
        """Nothing to deliver any more: the send's future was cancelled by its owner."""
        return self.out.done()

    def set_result(self, reply: RemotingCommand) -> None:
        """The reply: the send's result, or a failure of this attempt."""
        out = self.out
        if _future_done(out):  # cancelled by the caller: nothing to deliver
            return
        try:
            result = _process_send_response(self.mq, reply, self.p.msg_id, self.addr)
        except Exception as err:
            self.set_exception(err)
            return
        sender = self.sender
        if result.send_status is _SEND_OK or not (sender.retry_not_stored and sender.attempts_async > 1):
            _future_set_result(out, result)
            # inline of SendFuture.finished
            done = out.on_done
            if done is not None:
                out.on_done = None
                done(out, result)
            return
        sender.retry_after_first(out, self.p, self.budget, self.born, self.mq, None)

    def set_exception(self, exc: BaseException) -> None:
        """This attempt failed (an error reply, a timeout, the connection lost)."""
        out = self.out
        if out.done():
            return
        if not is_retriable(exc):
            out.set_exception(exc)
            out.finished()
            return
        self.sender.retry_after_first(out, self.p, self.budget, self.born, self.mq, exc)


class _FirstAttempt(_Attempt):
    """The first attempt of a message without a header template (or with RPC hooks)."""

    __slots__ = ("addr", "born", "budget", "mq", "out", "p", "sender")


class _FirstSend(SendRequest, _Attempt):
    """A plain message's first attempt (:func:`~pocketmq.client.api.plain_request`'s request)
    that is also its reply's waiter: one object per send less. Its ``born`` is the request's."""

    __slots__ = ("addr", "budget", "mq", "out", "p", "sender")
    # (made as ``_FirstSend()``: SendRequest's __init__ is object's)


def copy_outcome(
    task: asyncio.Future[SendResult],
    *,
    out: asyncio.Future[SendResult] | concurrent.futures.Future[SendResult],
) -> None:
    """Done callback: give ``out`` the outcome of ``task`` (nothing if ``out`` is done already)."""
    if out.done():
        if not task.cancelled():
            task.exception()  # retrieved: the caller gave up on this send
        return
    if task.cancelled():
        out.cancel()
    elif (exc := task.exception()) is not None:
        out.set_exception(exc)
    else:
        out.set_result(task.result())
