"""Consumer side of the SDK: push and lite-pull consumers, rebalance, offsets, consume services."""
