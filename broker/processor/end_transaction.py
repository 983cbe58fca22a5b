"""END_TRANSACTION (37): commit or roll back a half message (RocketMQ ``EndTransactionProcessor``).

Clients send it oneway (no reply goes out then); a request without the oneway bit is answered:

====  =========================================================================================
code  condition (remark)
====  =========================================================================================
11    the broker is a slave (``Message store is slave mode, so end transaction is forbidden.``)
1     ``commitOrRollback`` not 0, 8 or 12; a missing or malformed header field (names the field)
1     no record at ``commitLogOffset`` (``Find prepared transaction message failed``); the
      record is not a half message; ``PGROUP`` differs (``The producer group wrong``); its queue
      offset differs (``The transaction state table offset wrong``); the transaction is already
      committed or rolled back (no second copy is stored)
13/14 the commit's put was refused by the store (the send path's codes and remarks)
0     committed (the real message stored, then the op record) or rolled back (the op record)
====  =========================================================================================

``commitOrRollback`` 0 (UNKNOW) does nothing and answers nothing, as RocketMQ: the check service
will ask the producer later. Nothing is stored for a refused request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.processor.send_checks import PUT_STATUS_DEFAULT, PUT_STATUS_REPLY
from pocketmq.broker.state import HandlerTable
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.end_fields import EndTxRequest
from pocketmq.remoting.protocol.end_raw import EndRawRequest
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.headers import EndTransactionRequestHeader
from pocketmq.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.store import BrokerRole

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.state import BrokerState
    from pocketmq.broker.transaction.ends import RecentEnds
    from pocketmq.broker.transaction.service import TransactionalMessageService
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

SLAVE_REMARK = "Message store is slave mode, so end transaction is forbidden."
#: hoisted: an Enum class attribute read goes through ``EnumType.__getattr__``'s hook (~0.6k
#: instructions each in Python 3.11, callgrind), once per END_TRANSACTION otherwise
_SLAVE = BrokerRole.SLAVE


@dataclass(eq=False, kw_only=True)
class EndTransactionProcessor(HandlerTable):
    #: the half-message service (looks up, commits, rolls back)
    transactions: TransactionalMessageService
    state: BrokerState

    #: the config ``slave`` was read from: configs are frozen and replaced whole
    #: (UPDATE_BROKER_CONFIG), so the role is read again only when the object changes -- a
    #: pydantic model's attribute read goes through its ``__getattr__`` hook, ~0.8k
    #: instructions each, two per END_TRANSACTION otherwise (callgrind)
    _cfg: BrokerConfig | None = field(default=None, init=False, repr=False)
    _slave: bool = field(default=False, init=False, repr=False)
    #: ``transactions.ends`` (made with the service, never replaced): one attribute read less
    #: per END_TRANSACTION
    _ends: RecentEnds = field(init=False, repr=False)

    HANDLERS = {RequestCode.END_TRANSACTION: "end_transaction"}

    def __post_init__(self) -> None:
        self._ends = self.transactions.ends

    def end_transaction(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        cfg = self.state.config
        if cfg is not self._cfg:
            self._cfg = cfg
            self._slave = cfg.store.broker_role is _SLAVE
        if self._slave:
            return RemotingCommand.response_to(request, ResponseCode.SLAVE_NOT_AVAILABLE, SLAVE_REMARK)
        # what producers send: a oneway commit or rollback of a half stored lately, read
        # without building the header (the fields the frame decoder read from the header's
        # shape, remoting.protocol.end_raw, or the typed decode's attributes: no extFields
        # dict, remoting.protocol.end_fields); anything else, or
        # a field the header parser would refuse, takes the general path
        if type(request) is EndRawRequest:  # (always oneway, its fields read: end_raw)
            if self._ends.end_oneway_read(*request.end):
                return None
        elif request.flag & RPC_ONEWAY:
            if type(request) is EndTxRequest:
                f = request.fields
                if self._ends.end_oneway_of(
                    f.commitLogOffset, f.tranStateTableOffset, f.producerGroup, f.msgId, f.commitOrRollback
                ):
                    return None
            else:
                ext = request.ext_fields
                if ext is not None and self._ends.end_oneway(ext):
                    return None
        header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        kind = header.commit_or_rollback
        if kind == TRANSACTION_NOT_TYPE:
            if header.from_transaction_check:
                logger.info(
                    "producer %s checked transaction %s: still unknown", header.producer_group, header.msg_id
                )
            return None
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise RemoteSystemError(
                f"commitOrRollback {kind} is not 0 (unknown), 8 (commit) or 12 (rollback)"
            )
        service, ends = self.transactions, self._ends
        offset = header.commit_log_offset
        recent = ends.recent_half(header)
        if recent is not None:  # stored lately by this process: no read back (transaction.recent)
            if request.flag & RPC_ONEWAY:  # no reply: stored with this loop turn's others
                ends.end_later(offset, recent, kind == TRANSACTION_COMMIT_TYPE)
                return None
            if kind == TRANSACTION_ROLLBACK_TYPE:
                ends.rollback_recent(offset, recent)
                return _success(request)
            result = ends.commit_recent(offset, recent)
        else:
            half = service.find_half(header)
            if kind == TRANSACTION_ROLLBACK_TYPE:
                service.rollback(half)
                return _success(request)
            result = service.commit(half)
        if result.status.is_ok:
            return _success(request)
        code, remark = PUT_STATUS_REPLY.get(result.status, PUT_STATUS_DEFAULT)
        return RemotingCommand.response_to(request, code, remark)


def _success(request: RemotingCommand) -> RemotingCommand | None:
    """SUCCESS; nothing for a oneway request (the usual END_TRANSACTION), whose reply the
    connection would drop: no reply built per transaction (hooks see None, as for UNKNOW)."""
    if request.flag & RPC_ONEWAY:
        return None
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
