"""MessageStoreConfig: Java key names and defaults, explicit acronym aliases, strictness."""

from __future__ import annotations

import os

import pydantic
import pytest

from pocketmq.store import BrokerRole, FlushDiskType, MessageStoreConfig
from pocketmq.store.config import parse_delay_levels

# keys as they appear in RocketMQ's conf/broker.conf samples and MessageStoreConfig.java
JAVA_CONF = """
storePathRootDir=/data/rocketmq/store
storePathCommitLog=/data/rocketmq/store/commitlog
mappedFileSizeCommitLog=1073741824
mappedFileSizeConsumeQueue=300000
deleteWhen=04
fileReservedTime=48
diskMaxUsedSpaceRatio=88
brokerRole=SYNC_MASTER
flushDiskType=SYNC_FLUSH
maxMessageSize=65536
checkCRCOnRecover=false
messageIndexEnable=true
maxHashSlotNum=5000000
maxIndexNum=20000000
flushIntervalCommitLog=500
flushCommitLogLeastPages=4
flushCommitLogThoroughInterval=10000
syncFlushTimeout=5000
flushIntervalConsumeQueue=1000
messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
maxTransferCountOnMessageInMemory=32
transientStorePoolEnable=false
warmMapedFileEnable=false
destroyMapedFileIntervalForcibly=120000
enableDLegerCommitLog=false
dLegerGroup=RaftNode00
dLegerPeers=n0-127.0.0.1:40911
dLegerSelfId=n0
haListenPort=10912
haMasterAddress=192.168.0.1:10912
slaveReadEnable=ignored-by-store
"""


def _parse(text: str) -> dict[str, str]:
    out = {}
    for line in text.strip().splitlines():
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


def test_defaults_equal_rocketmq():
    c = MessageStoreConfig()
    assert c.store_path_root_dir == os.path.join(os.path.expanduser("~"), "store")
    assert c.commit_log_dir == os.path.join(c.store_path_root_dir, "commitlog")
    assert c.mapped_file_size_commit_log == 1 << 30
    assert c.mapped_file_size_consume_queue == 300_000 * 20
    assert c.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert c.broker_role is BrokerRole.ASYNC_MASTER
    assert (
        c.flush_interval_commit_log,
        c.flush_commit_log_least_pages,
        c.flush_commit_log_thorough_interval,
    ) == (500, 4, 10_000)
    assert (c.sync_flush_timeout, c.flush_interval_consume_queue) == (5000, 1000)
    assert (c.file_reserved_time, c.delete_when, c.disk_max_used_space_ratio) == (72, "04", 75)
    assert c.max_message_size == 4 * 1024 * 1024
    assert (c.max_hash_slot_num, c.max_index_num) == (5_000_000, 20_000_000)
    assert c.index_file_size == 420_000_040
    assert c.check_crc_on_recover and c.message_index_enable
    assert (
        c.delay_levels_ms[0] == 1000 and c.delay_levels_ms[-1] == 7_200_000 and len(c.delay_levels_ms) == 18
    )
    assert (c.max_transfer_count_on_message_in_memory, c.max_transfer_bytes_on_message_in_memory) == (
        32,
        256 * 1024,
    )
    assert (c.max_transfer_count_on_message_in_disk, c.max_transfer_bytes_on_message_in_disk) == (
        8,
        64 * 1024,
    )
    assert c.access_message_in_memory_max_ratio == 40


def test_java_broker_conf_keys_load_verbatim():
    props = _parse(JAVA_CONF)
    props.pop("slaveReadEnable")  # a BrokerConfig key: the broker's config splits them
    c = MessageStoreConfig.model_validate(props)
    assert c.store_path_commit_log == "/data/rocketmq/store/commitlog"
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH and c.broker_role is BrokerRole.SYNC_MASTER
    assert c.check_crc_on_recover is False
    assert c.dleger_group == "RaftNode00" and c.dleger_self_id == "n0"
    assert c.file_reserved_time == 48 and c.max_message_size == 65536
    assert c.cq_file_size == 300_000  # already a multiple of 20
    assert c.ha_master_address == "192.168.0.1:10912"


def test_acronym_aliases_are_java_spellings():
    fields = MessageStoreConfig.model_fields
    assert fields["check_crc_on_recover"].alias == "checkCRCOnRecover"
    assert fields["enable_dleger_commit_log"].alias == "enableDLegerCommitLog"
    assert fields["dleger_peers"].alias == "dLegerPeers"
    assert fields["is_enable_batch_push"].alias == "isEnableBatchPush"
    assert fields["mapped_file_size_commit_log"].alias == "mappedFileSizeCommitLog"
    # snake_case names work too
    assert MessageStoreConfig(check_crc_on_recover=False).check_crc_on_recover is False


def test_unknown_or_misspelled_key_is_an_error_naming_it():
    with pytest.raises(pydantic.ValidationError, match="flushDiskTyp"):
        MessageStoreConfig.model_validate({"flushDiskTyp": "SYNC_FLUSH"})
    with pytest.raises(pydantic.ValidationError, match="checkCrcOnRecover"):
        MessageStoreConfig.model_validate({"checkCrcOnRecover": "false"})  # to_camel spelling is not Java's


@pytest.mark.parametrize(
    "bad",
    [
        {"flushDiskType": "SOMETIMES"},
        {"brokerRole": "LEADER"},
        {"mappedFileSizeCommitLog": "12"},
        {"deleteWhen": "25"},
        {"messageDelayLevel": "1s 5x"},
        {"messageDelayLevel": ""},
        {"storePathCommitLog": "/a;/b"},
        {"enableDLegerCommitLog": "true"},
        {"diskMaxUsedSpaceRatio": "99"},
        # issue 23: sizes beyond one mapping (a Java int) started, then every send failed
        {"mappedFileSizeCommitLog": "1000000000000000000000"},
        {"mappedFileSizeCommitLog": str(2**31)},
        {"mappedFileSizeConsumeQueue": str(2**31)},
        {"maxMessageSize": str(2**31)},
        {"maxHashSlotNum": "300000000", "maxIndexNum": "100000000"},
    ],
)
def test_bad_values_are_rejected(bad):
    with pytest.raises(pydantic.ValidationError):
        MessageStoreConfig.model_validate(bad)


def test_frozen_and_derived_values():
    c = MessageStoreConfig(store_path_root_dir="/r", mapped_file_size_consume_queue=205)
    with pytest.raises(pydantic.ValidationError):
        c.flush_interval_commit_log = 1  # type: ignore[misc]
    assert c.cq_file_size == 220  # rounded up to whole units, as Java's getter
    assert c.consume_queue_dir == "/r/consumequeue" and c.index_dir == "/r/index"
    assert c.checkpoint_path == "/r/checkpoint" and c.abort_path == "/r/abort"


def test_parse_delay_levels_units():
    assert parse_delay_levels("1s 2m 3h 1d") == [1000, 120_000, 10_800_000, 86_400_000]
