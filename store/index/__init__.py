"""The message-key index: ``IndexFile``/``IndexService`` (``file``), the key hash (``hash``),
the record scan that indexes without dispatch fields (``scan``) and the index child process
(``process``)."""
