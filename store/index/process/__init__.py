"""The index child process (``indexProcessEnable``): its program (``main``, run as
``python -m pocketmq.store.index.process.main``), the store's control of it (``control``) and
the state file both share (``ipc``)."""
