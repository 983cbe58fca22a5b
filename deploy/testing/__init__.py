"""In-process pocketmq clusters for tests (ours and users\x27): name server + broker(s) on ephemeral ports."""
