"""Transactional messages, 4.x half-message design.

1. the half message is sent with ``TRAN_MSG=true``, ``PGROUP=<group>`` and the prepared sysFlag;
2. the local transaction runs; an exception counts as UNKNOW (the broker will ask later);
3. END_TRANSACTION (oneway) commits (8), rolls back (12) or leaves it unknown (0);
4. for unresolved halves the broker sends CHECK_TRANSACTION_STATE; the producer's
   ``transaction_checker`` answers and END_TRANSACTION goes back with ``fromTransactionCheck``.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from pocketmq.client.errors import BrokerNotFoundError, MessageValidationError
from pocketmq.client.message import Message, SendResult
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from pocketmq.remoting.protocol.message import MessageConst, MessageExt, decode_offset_msg_id

if TYPE_CHECKING:
    from pocketmq.client.instance import MQClientInstance

logger = logging.getLogger(__name__)


class TransactionState(enum.Enum):
    COMMIT_MESSAGE = 8
    ROLLBACK_MESSAGE = 12
    UNKNOW = 0


TransactionChecker = Callable[[MessageExt], Awaitable[TransactionState]]


class TransactionalProducer(Protocol):
    """What the transaction steps need from their producer."""

    group: str
    transaction_checker: TransactionChecker | None

    @property
    def instance(self) -> MQClientInstance: ...

    def running_instance(self) -> MQClientInstance: ...

    async def send(self, msg: Message) -> SendResult: ...

    def send_half(self, msg: Message) -> Awaitable[SendResult]: ...


# members and their values as module names: Enum.value is a Python-level property on 3.11
_COMMIT, _ROLLBACK = TransactionState.COMMIT_MESSAGE, TransactionState.ROLLBACK_MESSAGE
_COMMIT_VALUE, _ROLLBACK_VALUE = _COMMIT.value, _ROLLBACK.value


async def send_in_transaction(
    producer: TransactionalProducer,
    msg: Message,
    execute_local: Callable[[Message, SendResult], Awaitable[TransactionState]],
) -> tuple[SendResult, TransactionState]:
    """Send ``msg`` as a half message, run ``execute_local``, then commit or roll back
    (END_TRANSACTION); ``Producer.send_in_transaction`` is this function.

    Raises:
        MessageValidationError: a delayed message (and the send's own errors).
        BrokerNotFoundError: the half's broker is no longer known for END_TRANSACTION.
    """
    if msg.delay_level:
        raise MessageValidationError("transactional messages cannot be delayed")
    result = await producer.send_half(msg)
    instance = producer.running_instance()
    broker = result.message_queue.broker_name
    # the broker of the half, looked up once for the heartbeat and END_TRANSACTION
    addr = instance.find_broker_addr_in_publish(broker)
    if addr is not None and addr not in instance.broker_versions:
        _announce(instance, addr)
    try:
        state = await execute_local(msg, result)
    except Exception:
        logger.exception("local transaction of %s raised; state UNKNOW", result.msg_id)
        state = TransactionState.UNKNOW
    # END_TRANSACTION (oneway), sent from here (no function of its own: one frame less per
    # transaction; with the connection open it joins the loop turn's END write to the broker);
    # a bad msgId or a broker still unknown raises
    oid = result.offset_msg_id
    # commit_log_offset's IPv4 case inlined (a frame less per transaction); else through it:
    # 32 digits that are not 16 bytes of hex (whitespace fromhex skips) fail the unpack
    if len(oid) == 32:
        try:
            offset = _OFFSET(_fromhex(oid))[0]
        except (ValueError, struct.error):
            offset = commit_log_offset(oid)
    else:
        offset = commit_log_offset(oid)
    if addr is None:
        addr = instance.find_broker_addr_in_publish(broker)
        if addr is None:
            raise BrokerNotFoundError(broker)
    msg_id = result.msg_id
    end = instance.api.end_transaction(
        addr,
        producer.group,
        result.queue_offset,
        offset,
        _COMMIT_VALUE if state is _COMMIT else _ROLLBACK_VALUE if state is _ROLLBACK else state.value,
        msg_id,
        result.transaction_id or msg_id,
    )
    if end is not None:  # None: queued for the turn's END write
        await end
    return result, state


async def send_half(producer: TransactionalProducer, msg: Message) -> SendResult:
    """``producer.send`` of ``msg`` as a transactional half: ``TRAN_MSG`` and ``PGROUP`` set for
    the send (the general path of ``Producer.send_half``)."""
    msg.properties[MessageConst.TRAN_MSG] = "true"
    msg.properties[MessageConst.PGROUP] = producer.group
    try:
        return await producer.send(msg)
    finally:
        del msg.properties[MessageConst.TRAN_MSG]
        del msg.properties[MessageConst.PGROUP]


def _announce(instance: MQClientInstance, addr: str) -> None:
    """Heartbeat now to the broker at ``addr``, which holds our half message and has not had a
    heartbeat from us yet.

    The broker checks back only over a connection of a producer of the group it knows from a
    heartbeat; the periodic heartbeat (30 s) would leave a first half unreachable until then.
    """
    key = (instance.client_id, addr)
    if key not in _announcing:
        _announcing.add(key)

        async def announce() -> None:
            try:
                await instance.send_heartbeat_to_all_brokers()
            finally:
                _announcing.discard(key)

        instance.tasks.spawn(announce(), name="heartbeat-transaction-producer")


#: (client id, broker address) pairs a heartbeat is on its way to: one at a time
_announcing: set[tuple[str, str]] = set()


#: the commit-log offset at the end of an offset msgId's 16 bytes (a signed long, as decoded):
#: unpack of the whole 16, not unpack_from at 8 (its argument parsing: ~0.1k instructions more)
_OFFSET = struct.Struct(">8xq").unpack
_fromhex = bytes.fromhex


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset of an offset msgId: its last 8 bytes, read directly when the id
    is 32 hex digits (an IPv4 store host; no IP formatting), else through
    ``decode_offset_msg_id`` (an IPv6 host's 56 digits; it raises its error for a bad id)."""
    if len(offset_msg_id) == 32:
        # bytes.fromhex, C-level: about half the cost of a regex match of the digits and an
        # int() of the last 16; it skips whitespace between bytes, which the length test catches
        try:
            raw = _fromhex(offset_msg_id)
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return _OFFSET(raw)[0]  # type: ignore[no-any-return]
    return decode_offset_msg_id(offset_msg_id)[2]


async def answer_check(
    producer: TransactionalProducer,
    broker_addr: str,
    msg: MessageExt,
    header: CheckTransactionStateRequestHeader,
) -> None:
    checker = producer.transaction_checker
    if checker is None:
        logger.warning(
            "CHECK_TRANSACTION_STATE for %s but producer %s has no checker", header.msg_id, producer.group
        )
        return
    try:
        state = await checker(msg)
    except Exception:
        logger.exception("transaction checker raised for %s", header.msg_id)
        state = TransactionState.UNKNOW
    uniq = msg.get_property(MessageConst.UNIQ_KEY) or header.msg_id or ""
    end = EndTransactionRequestHeader(
        producer_group=producer.group,
        tran_state_table_offset=header.tran_state_table_offset,
        commit_log_offset=header.commit_log_offset,
        commit_or_rollback=state.value,
        from_transaction_check=True,
        msg_id=uniq,
        transaction_id=header.transaction_id or uniq,
    )
    await producer.instance.api.end_transaction_oneway(broker_addr, end)
