"""Transactional messages on the broker (RocketMQ 4.x half-topic design).

* :mod:`.bookkeeping`: pure decisions (op bodies, transaction identity, resolved and due halves,
  op progress, open transactions and what is forgotten), tested with tables;
* :mod:`.service`: ``TransactionalMessageService`` (prepare, commit, rollback, op records, the
  resolved set and the open transactions, both bounded, and the progress kept as
  ``CID_RMQ_SYS_TRANS`` consumer offsets);
* :mod:`.check`: ``TransactionalMessageCheckService`` (check-back of unresolved halves);
* :mod:`.records`: half-queue records read in place (fields, properties, transaction);
* :mod:`.recent`: the halves this process stored lately, which END_TRANSACTION commits or rolls
  back without reading them back from the CommitLog;
* :mod:`.half_props`: a half's properties built in one pass from the sender's (the prepare's
  hot path).

END_TRANSACTION is served by :mod:`pocketmq.broker.processor.end_transaction`; the prepare hook
is in the send processor: its half branch (in ``process``: ``sent_half_properties``, the half
built in place, then ``transactions.store_half``, without the send's stored-properties step) takes a producer's usual
half; the general path (stored properties, then the same two calls, or
``transactions.prepare_message`` for what ``sent_half_properties`` declines) takes the rest. User documentation:
``docs/transactions.md``.
"""
