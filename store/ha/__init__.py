"""Master/slave replication with RocketMQ 4.x's HA protocol (byte layout in ``codec``).

``codec`` the frames (sans-IO decoders, the transfer start rule); ``master.HAMaster`` the
master's HA listener and one ``SlaveConnection`` per slave; ``waiters.GroupTransfer`` the
SYNC_MASTER waits (the store's ``ReplicationWaiter``); ``slave.HASlave`` the slave's client.
The façade (``MessageStore.start``) starts the master side on a master and the client on a
slave; the broker only supplies the master's address (``update_ha_master_address``).
"""

from pocketmq.store.ha.codec import HAFrameError
from pocketmq.store.ha.master import HAMaster
from pocketmq.store.ha.slave import HASlave
from pocketmq.store.ha.waiters import GroupTransfer

__all__ = ["HA_REPUT_BATCH", "GroupTransfer", "HAFrameError", "HAMaster", "HASlave"]

#: records per reput slice on a store that replicates (the default 2048 is ~7 ms of dispatch
#: on the loop, which a SYNC_MASTER send would wait behind on either side). 64: a slave
#: decodes what it dispatches, ~15 µs a record under load, so 256 held its loop ~4 ms (seen
#: as on-CPU loop stalls in ha_bench --loop-lag-warn-ms, on master and slave) before the
#: next transfer was applied and acknowledged; at 20k msg/s a wake-up brings ~20 records,
#: so only a backlog is cut finer
HA_REPUT_BATCH = 64
