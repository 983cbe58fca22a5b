"""Reput: the dispatcher that turns CommitLog records into ConsumeQueue units and index
entries (``dispatcher``), its fast path over records this process appended (``appended``) and
the property field parsing both use (``props_fields``)."""
