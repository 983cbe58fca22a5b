"""``MessageStoreConfig``: RocketMQ's store keys, spelled and defaulted as in ``MessageStoreConfig.java``.

Python attributes are snake_case; the camelCase Java key is the alias, so a ``broker.conf``
section loads unchanged (``MessageStoreConfig.model_validate({"flushDiskType": "SYNC_FLUSH"})``).
Keys whose Java spelling is not what ``to_camel`` produces carry an explicit alias. Unknown keys
are rejected (``extra="forbid"``). Derived paths are properties, not fields: unlike Java, an
unset ``storePathCommitLog`` follows ``storePathRootDir``.
"""

from __future__ import annotations

import enum
import os
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
CQ_STORE_UNIT_SIZE = 20

_GiB = 1024 * 1024 * 1024
_MAX_INT32 = 2**31 - 1
#: IndexFile: 40-byte header, 4 bytes per hash slot, 20 per entry (must fit one mapping)
_INDEX_HEADER, _INDEX_SLOT, _INDEX_ENTRY = 40, 4, 20
_MiB = 1024 * 1024


class FlushDiskType(enum.StrEnum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class BrokerRole(enum.StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s 1m ..."`` → delay in ms per level (index 0 = level 1); ``ValueError`` on garbage."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    out: list[int] = []
    for tok in spec.split():
        unit = units.get(tok[-1:])
        if unit is None or not tok[:-1].isdigit():
            raise ValueError(f"bad delay level {tok!r} in messageDelayLevel {spec!r}")
        out.append(int(tok[:-1]) * unit)
    if not out:
        raise ValueError("messageDelayLevel is empty")
    return out


class MessageStoreConfig(BaseModel):
    """Store configuration (sizes in bytes, intervals in ms unless the description says otherwise)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True, use_enum_values=False
    )

    #: Keys a Java ``broker.conf`` may carry for machinery or features pocketmq does not have:
    #: they load only at RocketMQ's default, any other value is a startup error naming the key
    #: (``remoting.common.config``), so no setting is accepted and ignored.
    DEFAULT_ONLY: ClassVar[frozenset[str]] = frozenset(
        {
            "store_path_dledger_commit_log",
            "mapped_file_size_consume_queue_ext",
            "bit_map_length_consume_queue_ext",
            "commit_interval_commit_log",
            "flush_commit_log_timed",
            "commit_commit_log_least_pages",
            "commit_commit_log_thorough_interval",
            "flush_least_pages_when_warm_maped_file",
            "use_reentrant_lock_when_put_message",
            "transient_store_pool_size",
            "fast_fail_if_no_buffer_in_store_pool",
            "delete_consume_queue_files_interval",
            "destroy_maped_file_interval_forcibly",
            "redelete_hanged_file_interval",
            "put_msg_index_hight_water",
            "message_index_safe",
            "disk_fall_recorded",
            "enable_schedule_async_deliver",
            "schedule_async_deliver_max_pending_limit",
            "schedule_async_deliver_max_resend_num2_blocked",
            "max_lmq_consume_queue_num",
            "debug_lock_enable",
            "is_enable_batch_push",
            "dleger_group",
            "dleger_peers",
            "dleger_self_id",
            "preferred_leader_id",
        }
    )

    # -- paths and file sizes
    store_path_root_dir: str = Field(default_factory=_default_root, description="store root directory")
    store_path_commit_log: str | None = Field(
        None, description="CommitLog directory (default root/commitlog)"
    )
    store_path_dledger_commit_log: str | None = Field(
        None,
        alias="storePathDLedgerCommitLog",
        description="DLedger CommitLog directory (RocketMQ's default only: not implemented)",
    )
    # Java ints: a segment is one mapping of at most 2 GiB - 1 (an unbounded size started, then
    # every send failed with OverflowError; issue 23)
    mapped_file_size_commit_log: int = Field(
        _GiB, ge=4096, le=_MAX_INT32, description="CommitLog segment size, bytes"
    )
    mapped_file_size_consume_queue: int = Field(
        300_000 * CQ_STORE_UNIT_SIZE,
        ge=CQ_STORE_UNIT_SIZE,
        le=_MAX_INT32 // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE,
        description="ConsumeQueue file size, bytes",
    )
    enable_consume_queue_ext: bool = Field(
        False,
        description="ConsumeQueue extension files (only false: true is refused until built, remoting/common/unsupported.py)",
    )
    mapped_file_size_consume_queue_ext: int = Field(
        48 * _MiB,
        description="ConsumeQueue extension file size, bytes (RocketMQ's default only: not implemented)",
    )
    bit_map_length_consume_queue_ext: int = Field(
        64,
        description="ConsumeQueue extension bitmap length, bits (RocketMQ's default only: not implemented)",
    )

    # -- flushing
    flush_disk_type: FlushDiskType = Field(
        FlushDiskType.ASYNC_FLUSH,
        description="ASYNC_FLUSH (flush service) or SYNC_FLUSH (group commit before the reply)",
    )
    flush_interval_commit_log: int = Field(500, ge=1, description="async CommitLog flush period, ms")
    commit_interval_commit_log: int = Field(
        200,
        description="transient store pool commit period, ms (RocketMQ's default only: not implemented: no pool)",
    )
    flush_commit_log_timed: bool = Field(
        True,
        description="Java: sleep (true) or wait for a wake-up between async flushes (RocketMQ's default only: not implemented)",
    )
    flush_commit_log_least_pages: int = Field(
        4, ge=0, description="async flush only if this many dirty pages"
    )
    commit_commit_log_least_pages: int = Field(
        4,
        description="transient store pool commit threshold, pages (RocketMQ's default only: not implemented)",
    )
    flush_commit_log_thorough_interval: int = Field(10_000, description="flush regardless of pages after, ms")
    commit_commit_log_thorough_interval: int = Field(
        200,
        description="transient store pool full commit period, ms (RocketMQ's default only: not implemented)",
    )
    flush_interval_consume_queue: int = Field(1000, ge=1, description="ConsumeQueue/index flush period, ms")
    flush_consume_queue_least_pages: int = Field(
        2, description="ConsumeQueue flush only if this many dirty pages"
    )
    flush_consume_queue_thorough_interval: int = Field(
        60_000, description="ConsumeQueue flush regardless of pages after, ms"
    )
    flush_least_pages_when_warm_maped_file: int = Field(
        1024 // 4 * 16,
        description="Java's flush step while warming a new segment, pages (RocketMQ's default only: not implemented)",
    )
    sync_flush_timeout: int = Field(5000, ge=1, description="SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT, ms")
    flush_delay_offset_interval: int = Field(
        10_000, description="flush the schedule (delay) offsets this often, ms"
    )
    use_reentrant_lock_when_put_message: bool = Field(
        True,
        description="Java put lock choice (RocketMQ's default only: not implemented: puts run on one loop, no lock)",
    )
    warm_maped_file_enable: bool = Field(False, description="prefault new segments by writing them")
    transient_store_pool_enable: bool = Field(
        False,
        description="write through off-heap buffers (only false: true is refused until built, remoting/common/unsupported.py)",
    )
    transient_store_pool_size: int = Field(
        5, description="number of transient store buffers (RocketMQ's default only: not implemented)"
    )
    fast_fail_if_no_buffer_in_store_pool: bool = Field(
        False,
        description="refuse puts when no transient buffer is free (RocketMQ's default only: not implemented)",
    )
    os_page_cache_busy_time_out_mills: int = Field(
        1000,
        ge=1,
        description="ms a request handling may hold the broker's loop (the put lock) before queued sends get SYSTEM_BUSY",
    )

    # -- cleanup
    clean_resource_interval: int = Field(10_000, ge=1, description="cleaner period, ms")
    delete_commit_log_files_interval: int = Field(
        100, description="pause between two expired CommitLog segment deletions, ms"
    )
    delete_consume_queue_files_interval: int = Field(
        100,
        description="pause between two ConsumeQueue file deletions, ms (RocketMQ's default only: not implemented)",
    )
    destroy_maped_file_interval_forcibly: int = Field(
        120_000,
        description="Java: force-unmap a still-referenced file after, ms (RocketMQ's default only: not implemented)",
    )
    redelete_hanged_file_interval: int = Field(
        120_000,
        description="Java: retry deleting a file that failed to unmap after, ms (RocketMQ's default only: not implemented)",
    )
    delete_when: str = Field("04", description="';'-separated hours of day when expired files are deleted")
    disk_max_used_space_ratio: int = Field(75, ge=10, le=95, description="percent; clean above this")
    file_reserved_time: int = Field(72, ge=0, description="hours a full CommitLog file is kept")
    clean_file_forcibly_enable: bool = Field(
        True, description="delete the oldest files above diskSpaceCleanForciblyRatio even if not expired"
    )
    # Java reads these two from system properties; here they are ordinary keys.
    disk_space_warning_level_ratio: float = Field(0.90, gt=0, le=1, description="disk full above this")
    disk_space_clean_forcibly_ratio: float = Field(0.85, gt=0, le=1, description="delete oldest above this")

    # -- messages, reads, index
    max_message_size: int = Field(
        4 * _MiB,
        ge=1,
        le=_MAX_INT32,
        description="max stored message size (body + topic + properties + 91), bytes",
    )
    check_crc_on_recover: bool = Field(
        True, alias="checkCRCOnRecover", description="check every record's body CRC during recovery"
    )
    put_msg_index_hight_water: int = Field(
        600_000,
        description="Java: index backlog above which puts are throttled (RocketMQ's default only: not implemented)",
    )
    max_transfer_bytes_on_message_in_memory: int = Field(
        256 * 1024, description="max bytes per pull when the data is in page cache"
    )
    max_transfer_count_on_message_in_memory: int = Field(
        32, description="max messages per pull when the data is in page cache"
    )
    max_transfer_bytes_on_message_in_disk: int = Field(
        64 * 1024, description="max bytes per pull when the data is beyond memory"
    )
    max_transfer_count_on_message_in_disk: int = Field(
        8, description="max messages per pull when the data is beyond memory"
    )
    access_message_in_memory_max_ratio: int = Field(
        40,
        ge=0,
        le=100,
        description="percent of RAM behind the CommitLog head counted as in memory (pull limits, suggest slave)",
    )
    message_index_enable: bool = Field(True, description="build IndexFiles (query by key / UNIQ_KEY)")
    # pocketmq's own key (RocketMQ has none): build the index in a second process
    # (store/index/process/main.py) so it runs on another core; reput then writes ConsumeQueues only
    index_process_enable: bool = Field(
        False, description="pocketmq only: build IndexFiles in a child process (needs messageIndexEnable)"
    )
    max_hash_slot_num: int = Field(
        5_000_000, ge=1, le=_MAX_INT32 // 4, description="hash slots per IndexFile"
    )
    max_index_num: int = Field(5_000_000 * 4, ge=2, le=_MAX_INT32 // 20, description="entries per IndexFile")
    max_msgs_num_batch: int = Field(64, description="max messages one key query returns")
    message_index_safe: bool = Field(
        False,
        description="Java: use the checkpoint's index time in abnormal recovery (RocketMQ's default only: not implemented)",
    )
    default_query_max_num: int = Field(32, description="max messages of a key query that names no limit")
    disk_fall_recorded: bool = Field(
        True,
        description="Java: record pull disk fall-behind stats (RocketMQ's default only: not implemented)",
    )
    duplication_enable: bool = Field(
        False,
        description="Java: reput from the CommitLog start on a slave (only false: true is refused until built)",
    )
    message_delay_level: str = Field(
        DEFAULT_MESSAGE_DELAY_LEVEL,
        description="delay of each delay level 1..n (s/m/h/d units), as in RocketMQ",
    )
    enable_schedule_message_stats: bool = Field(
        True, description="count delayed message deliveries per level"
    )
    enable_schedule_async_deliver: bool = Field(
        False,
        description="Java: deliver due delayed messages asynchronously (RocketMQ's default only: not implemented)",
    )
    schedule_async_deliver_max_pending_limit: int = Field(
        2000,
        description="Java: async delayed delivery backlog limit (RocketMQ's default only: not implemented)",
    )
    schedule_async_deliver_max_resend_num2_blocked: int = Field(
        3,
        description="Java: async delayed delivery resends before blocking (RocketMQ's default only: not implemented)",
    )
    enable_lmq: bool = Field(
        False,
        description="light message queues (only false: true is refused until built, remoting/common/unsupported.py)",
    )
    enable_multi_dispatch: bool = Field(
        False,
        description="dispatch one message to several queues (only false: true is refused until built, remoting/common/unsupported.py)",
    )
    max_lmq_consume_queue_num: int = Field(
        20_000, description="light message queue limit (RocketMQ's default only: not implemented)"
    )

    # -- roles and HA
    broker_role: BrokerRole = Field(
        BrokerRole.ASYNC_MASTER,
        description="ASYNC_MASTER, SYNC_MASTER (puts wait for the slave) or SLAVE (puts refused)",
    )
    ha_listen_port: int = Field(10912, description="master port slaves connect to for CommitLog replication")
    ha_send_heartbeat_interval: int = Field(5000, description="slave offset report period, ms (HA)")
    ha_housekeeping_interval: int = Field(
        20_000,
        description="master drops a slave silent this long, ms (HA)",
    )
    ha_transfer_batch_size: int = Field(
        32 * 1024,
        description="max CommitLog bytes per HA transfer",
    )
    ha_master_address: str | None = Field(
        None,
        description="a slave's master HA address host:port (else learned from the name server)",
    )
    ha_slave_fallbehind_max: int = Field(
        256 * _MiB,
        description="SYNC_MASTER: slave behind by more than this many bytes is not in sync",
    )
    ha_keep_warm_millis: int = Field(
        1,
        ge=0,
        le=1000,
        description=(
            "pocketmq: while replication traffic flows, master and slave wake every N ms so a "
            "descheduled idle CPU does not add its wake-up to the lag (0 = off; store/ha/keepwarm.py)"
        ),
    )
    slave_timeout: int = Field(
        3000,
        description="SYNC_MASTER wait for the slave before SLAVE_NOT_AVAILABLE/FLUSH_SLAVE_TIMEOUT, ms",
    )
    offset_check_in_slave: bool = Field(False, description="a slave corrects out-of-range pull offsets too")
    debug_lock_enable: bool = Field(
        False, description="Java lock debugging (RocketMQ's default only: not implemented)"
    )
    is_enable_batch_push: bool = Field(
        False,
        alias="isEnableBatchPush",
        description="Java: push batches to slaves (RocketMQ's default only: not implemented)",
    )

    # -- DLedger (accepted so a Java broker.conf loads; DLedger mode itself is not supported)
    enable_dleger_commit_log: bool = Field(
        False, alias="enableDLegerCommitLog", description="DLedger CommitLog mode (refused: not supported)"
    )
    dleger_group: str | None = Field(
        None,
        alias="dLegerGroup",
        description="DLedger group name (RocketMQ's default only: not implemented)",
    )
    dleger_peers: str | None = Field(
        None,
        alias="dLegerPeers",
        description="DLedger peers (RocketMQ's default only: not implemented)",
    )
    dleger_self_id: str | None = Field(
        None,
        alias="dLegerSelfId",
        description="DLedger id of this node (RocketMQ's default only: not implemented)",
    )
    preferred_leader_id: str | None = Field(
        None, description="DLedger preferred leader (RocketMQ's default only: not implemented)"
    )

    @field_validator("message_delay_level")
    @classmethod
    def _check_delay(cls, v: str) -> str:
        parse_delay_levels(v)
        return v

    @field_validator("delete_when")
    @classmethod
    def _check_delete_when(cls, v: str) -> str:
        for part in v.split(";"):
            if part.strip() and not (part.strip().isdigit() and 0 <= int(part) <= 23):
                raise ValueError(f"deleteWhen must be ';'-separated hours 0-23, got {v!r}")
        return v

    @field_validator("store_path_commit_log")
    @classmethod
    def _single_path(cls, v: str | None) -> str | None:
        if v is not None and ";" in v:
            raise ValueError("multiple CommitLog paths (';') are not supported")
        return v

    @model_validator(mode="after")
    def _index_file_fits(self) -> MessageStoreConfig:
        size = _INDEX_HEADER + self.max_hash_slot_num * _INDEX_SLOT + self.max_index_num * _INDEX_ENTRY
        if size > _MAX_INT32:
            raise ValueError(
                f"maxHashSlotNum={self.max_hash_slot_num} and maxIndexNum={self.max_index_num} make an "
                f"IndexFile of {size} bytes, more than {_MAX_INT32}"
            )
        return self

    @field_validator("enable_dleger_commit_log")
    @classmethod
    def _no_dledger(cls, v: bool) -> bool:
        if v:
            raise ValueError("enableDLegerCommitLog=true is not supported")
        return v

    # -- derived values
    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")

    @property
    def cq_file_size(self) -> int:
        """ConsumeQueue file size rounded up to whole 20-byte units, as Java's getter does."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    @property
    def delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def index_file_size(self) -> int:
        return 40 + self.max_hash_slot_num * 4 + self.max_index_num * 20
