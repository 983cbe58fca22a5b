"""Background work of a replicating store stays out of its loops' way (the replication lag)."""

from __future__ import annotations

from pocketmq.store.ha import HA_REPUT_BATCH
from pocketmq.store.services import allocate


async def test_replicating_store_dispatches_in_short_slices(open_store, tmp_path):
    store = open_store(str(tmp_path / "m"))
    await store.start()
    await store.start_ha(host="127.0.0.1", port=0)
    try:
        assert store._services is not None
        assert store._services.reput.batch == HA_REPUT_BATCH
    finally:
        await store.shutdown()


def test_prefault_range_stops_at_a_closed_file(tmp_path):
    mf = allocate._create(str(tmp_path), 0, 4 << 20, False, False, False)
    mf.close()
    allocate._prefault_range(mf, 0, 4 << 20, False)  # returns at once, nothing to map
    assert mf.closed
