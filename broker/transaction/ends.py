"""END_TRANSACTION of the halves this process stored lately (:mod:`.recent`): checked, and for a
oneway request queued and stored with the others of its event-loop turn.

:class:`RecentEnds` is the END path of ``TransactionalMessageService`` (:mod:`.service`) for a
half still in memory: the checks RocketMQ's ``checkPrepareMessage`` makes of a half read back
(:meth:`RecentEnds.recent_half_of`), a oneway commit or rollback read straight from the
request's fields (:meth:`RecentEnds.end_oneway_of`), and the end-of-turn store of the queued
ones (:meth:`RecentEnds.flush_ends`: their committed copies, then their op records, in one
append). A request that wants a reply, and a half read back, go the service's way
(``commit`` / ``rollback``).

Until its turn's append, a queued transaction's half and transaction offsets are in
:attr:`RecentEnds.ending`: a second END_TRANSACTION naming one is refused as for one already
resolved (``TransactionalMessageService.find_half`` reads the set too).
"""

from __future__ import annotations

import asyncio
import logging
from operator import itemgetter
from typing import TYPE_CHECKING

from pocketmq.broker.transaction.bookkeeping import OP_TAG
from pocketmq.broker.transaction.recent import Recent
from pocketmq.broker.transaction.resolved import SEAL
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.store import MessageInner, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.transaction.service import TransactionalMessageService
    from pocketmq.remoting.protocol.headers import EndTransactionRequestHeader

logger = logging.getLogger(__name__)

__all__ = ["RecentEnds"]

_OP_TOPIC = RMQ_SYS_TRANS_OP_HALF_TOPIC
_OP_PROPERTIES = properties_to_string({MessageConst.TAGS: OP_TAG})
_TX_BITS = TRANSACTION_ROLLBACK_TYPE  # the two transaction-type bits of sysFlag (0xC)
#: ``commitOrRollback`` of a commit and of a rollback, as producers write them
_COMMIT, _ROLLBACK = str(TRANSACTION_COMMIT_TYPE), str(TRANSACTION_ROLLBACK_TYPE)
#: a queued end's half offset (C-level: ``min`` compares ints, not the queued tuples)
_offset_of = itemgetter(0)


def _recent_copy(commit_log_offset: int, recent: Recent) -> MessageInner:
    """The committed copy of a half from :mod:`.recent` (its properties as stored: the output
    of ``java_reput_properties`` without an empty value, which re-encoding leaves unchanged)."""
    half, props, _, _, real_topic, real_queue_id, _ = recent
    return MessageInner(
        real_topic,
        half.body,
        real_queue_id,
        half.flag,
        props,
        (half.sys_flag & ~_TX_BITS) | TRANSACTION_COMMIT_TYPE,
        half.born_timestamp,
        half.born_host,
        half.store_host,
        half.reconsume_times,
        commit_log_offset,
    )


class RecentEnds:
    """END_TRANSACTIONs of recent halves (module docstring), for the service ``svc``."""

    __slots__ = ("_ending", "ending", "entries", "svc")

    def __init__(self, svc: TransactionalMessageService) -> None:
        self.svc = svc
        #: the service's recent halves (``RecentHalves.entries``: cleared in place, never replaced)
        self.entries = svc.recent.entries
        #: oneway END_TRANSACTIONs of recent halves, stored together at the end of the loop
        #: turn that read them (:meth:`end_later`)
        self._ending: list[tuple[int, Recent, bool]] = []
        #: their half and transaction offsets: a second END_TRANSACTION naming one is refused
        self.ending: set[int] = set()

    def recent_half(self, header: EndTransactionRequestHeader) -> Recent | None:
        """The half END_TRANSACTION names when this process stored it lately (:mod:`.recent`),
        checked as ``TransactionalMessageService.find_half`` checks a half read back; None: read
        it (``find_half``).

        Raises:
            RemoteSystemError: another producer group, another queue offset, or the transaction
                is already resolved.
        """
        return self.recent_half_of(
            header.commit_log_offset, header.producer_group, header.tran_state_table_offset
        )

    def recent_half_of(self, offset: int, producer_group: str, table_offset: int) -> Recent | None:
        """:meth:`recent_half` of the header's ``commitLogOffset``, ``producerGroup`` and
        ``tranStateTableOffset``."""
        svc = self.svc
        recent = self.entries.get(offset)
        if recent is None or offset < svc.store.get_min_phy_offset():  # (retention deleted it)
            return None
        _, _, queue_offset, tx_offset, _, _, pgroup = recent
        if pgroup != producer_group:
            raise RemoteSystemError("The producer group wrong")
        if queue_offset != table_offset:
            raise RemoteSystemError("The transaction state table offset wrong")
        done, ending = svc.done, self.ending
        # (is_resolved of both sets, inline: this runs for every END_TRANSACTION)
        if queue_offset in done or tx_offset in done or queue_offset in ending or tx_offset in ending:
            svc.counters.already_resolved += 1
            raise RemoteSystemError(
                f"the transaction of half message {queue_offset} is already committed or rolled back"
            )
        return recent

    def commit_recent(self, commit_log_offset: int, recent: Recent) -> PutResult:
        """``TransactionalMessageService.commit`` of a half from :meth:`recent_half`: the same
        committed copy and op.

        Its properties go as stored: they are the output of ``java_reput_properties`` (or of a
        Java map), without an empty value, so re-encoding them (``commit``) changes nothing.
        """
        svc = self.svc
        result = svc.put_commit(_recent_copy(commit_log_offset, recent), recent[2], recent[3])
        if result.append is not None:
            svc.recent.discard(commit_log_offset)
        return result

    def rollback_recent(self, commit_log_offset: int, recent: Recent) -> None:
        svc = self.svc
        svc.recent.discard(commit_log_offset)
        svc.counters.rolled_back += 1
        queue_offset, tx_offset = recent[2], recent[3]
        svc.write_op(queue_offset, tx_offset)

    def end_oneway(self, ext: dict[str, str]) -> bool:
        """:meth:`end_oneway_of` the fields ``ext`` of a oneway END_TRANSACTION (the general
        decode's dict; a missing field: False)."""
        try:
            return self.end_oneway_of(
                ext["commitLogOffset"],
                ext["tranStateTableOffset"],
                ext["producerGroup"],
                ext["msgId"],
                ext["commitOrRollback"],
            )
        except KeyError:
            return False

    def end_oneway_of(
        self, raw: str, raw_table: str, group: str | None, msg_id: str | None, kind: str
    ) -> bool:
        """:meth:`end_later` of a oneway END_TRANSACTION whose fields (``commitLogOffset``,
        ``tranStateTableOffset``, ``producerGroup``, ``msgId``, ``commitOrRollback``, as sent:
        the typed decode's attributes, ``remoting.protocol.end_fields``, or :meth:`end_oneway`'s
        dict values) name a recent half and read as ``EndTransactionRequestHeader.from_ext_fields``
        would read them (a commit or a rollback, ``msgId`` there), checked as
        :meth:`recent_half_of` checks it (the CommitLog's first offset once per loop turn, by
        :meth:`flush_ends`); False, nothing done: not a recent half, a check failed or a field
        reads otherwise -- the general path then decides, with its error where there is one.
        Read without building the header (a sixth of the handler's work) and without checking
        the offsets' text first: ``int()`` is what the header parser runs, which takes no ``_``
        and no value out of int64's range (an offset naming a recent half or equal to one's
        queue offset is in range)."""
        try:
            offset = int(raw)
            table_offset = int(raw_table)
            if msg_id is None or "_" in raw or "_" in raw_table:
                return False
        except (ValueError, TypeError):  # (a null field, not a number)
            return False
        # the two kinds as producers write them (str(TRANSACTION_COMMIT_TYPE), ...: compared,
        # not looked up -- the string decoded per request is not hashed)
        if kind == _COMMIT:
            commit = True
        elif kind == _ROLLBACK:
            commit = False
        else:
            return False
        return self.end_oneway_read(offset, table_offset, group, commit)

    def end_oneway_read(self, offset: int, table_offset: int, group: str | None, commit: bool) -> bool:
        """:meth:`end_oneway_of` of fields already read (``commitLogOffset``,
        ``tranStateTableOffset``, ``producerGroup``, a commit or a rollback: the frame decoder's
        ``end_raw.EndRawRequest``, whose header is what the header parser reads so)."""
        # (a subscript, no method call: a miss, the rare case, is the KeyError)
        try:
            recent = self.entries[offset]
        except KeyError:  # not recent
            return False
        _, _, queue_offset, tx_offset, _, _, pgroup = recent
        # (a null group compares unequal; a half without PGROUP: the header parser refuses a
        # null group)
        if table_offset != queue_offset or group != pgroup or pgroup is None:
            return False
        done, ending = self.svc.done, self.ending
        # (ResolvedOffsets' test inline: a recent half is at or above ``cur_lo`` but for those
        # in flight when ``cur`` was sealed, so ``cur`` alone tells)
        if (
            queue_offset in done.cur
            or (queue_offset < done.cur_lo and queue_offset in done)
            or queue_offset in ending
        ):
            return False
        # inline of end_later (the transaction offset is the half's own but for a check copy)
        if tx_offset != queue_offset:
            if tx_offset in done or tx_offset in ending:
                return False
            ending.add(tx_offset)
        ending.add(queue_offset)
        queued = self._ending
        first = not queued  # (no len() call: the turn's first schedules the store)
        queued.append((offset, recent, commit))
        if first:
            self._schedule_flush()
        return True

    def end_later(self, commit_log_offset: int, recent: Recent, commit: bool) -> None:
        """:meth:`commit_recent` / :meth:`rollback_recent` of a oneway END_TRANSACTION, done
        with the others read in the same loop turn: their committed copies and op records go
        to the store in one append (``MessageStore.put_run``: one clock read, one slice
        assignment, one reput wake-up) by a callback the first one schedules. A oneway request
        is never answered, so nothing is acknowledged before the put; a crash in between
        leaves the half unresolved, checked after the restart as today. Until then its
        offsets are in ``ending``: a second END_TRANSACTION naming them is refused.
        """
        ending = self.ending
        ending.add(recent[2])
        ending.add(recent[3])
        queued = self._ending
        queued.append((commit_log_offset, recent, commit))
        if len(queued) == 1:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self.flush_ends)
        except RuntimeError:  # no loop (offline tools): at once
            self.flush_ends()

    def flush_ends(self) -> None:
        """Store what :meth:`end_later` queued: the committed copies, then the op records, each
        in request order, in one append; when the store will not take them so (a segment roll,
        a refusal), one transaction at a time as the synchronous path does. Should the append
        raise, nothing of the turn is resolved: the check service asks the producers later.
        A half whose CommitLog segment retention deleted meanwhile is not ended (as
        ``find_half`` finds no record there)."""
        queued, self._ending = self._ending, []
        # their half and transaction offsets (end_later), resolved at once should the run be stored
        ending, self.ending = self.ending, set()
        if not queued:
            return
        svc = self.svc
        low = svc.store.get_min_phy_offset()
        if min(map(_offset_of, queued)) < low:
            for offset, _, _ in queued:
                if offset < low:
                    logger.error(
                        "END_TRANSACTION of half at %d: Find prepared transaction message failed", offset
                    )
            queued = [end for end in queued if end[0] >= low]
            if not queued:
                return
            ending = {o for _, recent, _ in queued for o in (recent[2], recent[3])}
        svc.ensure_topic(_OP_TOPIC)
        host = svc.state.store_host
        now = svc.now_ms()
        # the copies, then the op records: each op still follows its copy, and the ops, all in
        # the one op queue, go as a batch put's items (one template, one reput entry). A copy is
        # given as its half, as stored, and what differs (MessageStore.put_run's copies: the
        # half's record gives its CRC); the half itself is left as it is, so should the run not
        # be taken, _recent_copy makes the same copy
        copies: list[tuple[MessageInner, str, str, int, int]] = []
        ops: list[bytes] = []  # (op record bodies: the op template's flag and properties)
        named: list[int] = []  # (the offset each names: TransactionalMessageService.ops_stored)
        add, copy, name = ops.append, copies.append, named.append
        for offset, recent, commit in queued:
            half, props, queue_offset, tx_offset, real_topic, real_queue_id, _ = recent
            if commit:
                copy((half, props, real_topic, real_queue_id, offset))
            add(b"%d" % queue_offset)
            name(queue_offset)
            if tx_offset != queue_offset:  # (op_bodies: a later copy names its transaction too)
                add(b"%d" % tx_offset)
                name(tx_offset)
        op_template = MessageInner(_OP_TOPIC, b"", 0, 0, _OP_PROPERTIES, 0, now, host, host)
        appended = svc.store.put_run((), op_template, bodies=ops, copies=copies)
        if not appended:
            for offset, recent, commit in queued:
                if commit:
                    self.commit_recent(offset, recent)
                else:
                    self.rollback_recent(offset, recent)
            return
        # each half's queue offset and, for a check copy, its transaction's (ResolvedOffsets'
        # update inline: one C-speed union, then a seal when ``cur`` is full)
        cur = svc.done.cur
        cur |= ending
        if len(cur) >= SEAL:
            svc.done.seal()
        # the op records, the run's last entry (one batch: its first op-queue offset), known to
        # the check run without a read back
        svc.ops_stored(appended[-1][4], named)
        table = svc.recent
        held, pop = table.bytes, self.entries.pop
        for offset, recent, _ in queued:
            if pop(offset, None) is not None:  # inline of RecentHalves.discard
                held -= len(recent[0].body)
        table.bytes = held
        counters = svc.counters
        counters.committed += len(copies)  # (one copy per commit)
        counters.rolled_back += len(queued) - len(copies)
