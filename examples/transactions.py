"""Transactional messages with the blocking facade: an order is published only if it was paid.

Run against a running cluster (``pocketmq cluster up``)::

    NAMESRV_ADDR=127.0.0.1:9876 python examples/transactions.py

Three orders go out in transactions. The local transaction writes the order to a SQLite table:

* ``A`` is paid at once: COMMIT, consumers receive it;
* ``B`` is cancelled: ROLLBACK, nobody ever sees it;
* ``C`` is still being paid when the local transaction returns: UNKNOW. The broker later asks the
  producer group (CHECK_TRANSACTION_STATE); ``check`` reads the table, which by then says paid:
  COMMIT. The broker asks every ``transactionCheckInterval`` (60 s by default) about halves older
  than ``transactionTimeOut`` (6 s), so ``C`` may take a minute to arrive.

The consumer then prints the orders it receives: ``A`` and ``C``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import threading
import time

from pocketmq.client import Message, TransactionState
from pocketmq.client.sync import SyncLitePullConsumer, SyncProducer

DB = sqlite3.connect(":memory:", check_same_thread=False)
DB.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, state TEXT)")
DB_LOCK = threading.Lock()
checked = threading.Event()


def set_state(order: str, state: str) -> None:
    with DB_LOCK, DB:
        DB.execute("INSERT OR REPLACE INTO orders VALUES (?, ?)", (order, state))


def local_transaction(msg: Message, result: object) -> TransactionState:
    """Runs once the half message is stored (invisible to consumers until committed)."""
    order = msg.keys or ""
    if order == "A":
        set_state(order, "paid")
        return TransactionState.COMMIT_MESSAGE
    if order == "B":
        set_state(order, "cancelled")
        return TransactionState.ROLLBACK_MESSAGE
    set_state(order, "pending")  # the payment completes a moment later
    threading.Timer(0.5, set_state, (order, "paid")).start()
    return TransactionState.UNKNOW


def check(msg: object) -> TransactionState:
    """The broker asks about a half message it has no answer for: look it up."""
    order = getattr(msg, "keys", None) or ""
    with DB_LOCK:
        row = DB.execute("SELECT state FROM orders WHERE id = ?", (order,)).fetchone()
    print(f"broker checked order {order}: {row[0] if row else 'unknown'}", flush=True)
    if row is None or row[0] == "cancelled":
        return TransactionState.ROLLBACK_MESSAGE  # the local transaction never happened
    if row[0] == "paid":
        checked.set()
        return TransactionState.COMMIT_MESSAGE
    return TransactionState.UNKNOW  # ask again later


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="OrderTopic")
    parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for the check-back")
    args = parser.parse_args()

    with SyncProducer("OrderTxProducer", namesrv=args.namesrv, transaction_checker=check) as producer:
        for order in ("A", "B", "C"):
            result, state = producer.send_in_transaction(
                Message(args.topic, f"order {order}".encode(), keys=order), local_transaction
            )
            print(f"order {order}: half message {result.msg_id} -> {state.name}", flush=True)
        # the producer must stay up to answer the broker's check for C
        if not checked.wait(args.wait):
            raise SystemExit(f"the broker did not check order C within {args.wait} s")

    consumer = SyncLitePullConsumer(
        "OrderConsumer", namesrv=args.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(args.topic)
    consumer.start()
    with consumer:
        seen: set[str] = set()
        deadline = time.monotonic() + 60
        while seen != {"A", "C"} and time.monotonic() < deadline:
            for msg in consumer.poll(timeout=1.0):
                seen.add(msg.keys or "")
                print(f"consumed {msg.body.decode()}", flush=True)
    if seen != {"A", "C"}:
        raise SystemExit(f"consumed {sorted(seen)}, expected A and C")


if __name__ == "__main__":
    main()
