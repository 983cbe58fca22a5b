"""ConsumeQueues: the 20-byte-unit queue files, the (topic, queueId) table and the pull
selection that reads CommitLog records through CQ units."""
