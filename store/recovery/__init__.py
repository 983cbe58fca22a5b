"""Startup recovery of CommitLog, ConsumeQueues and index (``recover``) and the files it
reads: the checkpoint, abort and lock files (``checkpoint``)."""
