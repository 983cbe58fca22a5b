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
#: on the loop, which a SYNC_MASTER send would wait behind on either side). 64: a record costs
#: ~5 µs of dispatch when the machine is quiet and 15+ µs under load, so 256 (1.3 ms quiet) held
#: a loop 4-7 ms under load (on-CPU stalls in ha_bench --loop-lag-warn-ms, master and slave)
#: before the next transfer was applied and acknowledged; 64 costs no measurable CPU (a slave
#: dispatching 96 MiB of 1 KB records: 0.42-0.50 s against 0.44-0.60 s), and at 20k msg/s a
#: wake-up brings ~20 records, so only a backlog is cut finer
HA_REPUT_BATCH = 64
