"""Pure retention decisions (Java ``CleanCommitLogService``), tested without files or clocks."""

from __future__ import annotations

from dataclasses import dataclass

#: Java ``MappedFileQueue.DELETE_FILES_BATCH_MAX``: at most this many files per cleaning round.
DELETE_FILES_BATCH_MAX = 10


@dataclass(frozen=True, slots=True)
class CleanDecision:
    #: delete expired files this round
    delete: bool
    #: delete the oldest files even if not expired (disk nearly full and forcible cleaning on)
    clean_immediately: bool
    #: True: mark the disk full (puts refused); False: mark it OK again
    disk_full: bool


def is_time_to_delete(delete_when: str, hour: int) -> bool:
    """``deleteWhen`` is ``;``-separated hours of day ("04", "04;16")."""
    return any(part.strip() and int(part) == hour for part in delete_when.split(";"))


def decide(
    *,
    hour: int,
    used_ratio: float,
    delete_when: str,
    disk_max_used_space_ratio: int,
    disk_space_clean_forcibly_ratio: float,
    disk_space_warning_level_ratio: float,
    clean_file_forcibly_enable: bool,
    manual: bool = False,
) -> CleanDecision:
    """One cleaning round's decision from the hour of day and the disk's used fraction (0-1)."""
    disk_full = used_ratio > disk_space_warning_level_ratio
    immediate = disk_full or used_ratio > disk_space_clean_forcibly_ratio
    space_to_delete = used_ratio < 0 or used_ratio > disk_max_used_space_ratio / 100.0
    delete = is_time_to_delete(delete_when, hour) or space_to_delete or manual
    return CleanDecision(delete, delete and clean_file_forcibly_enable and immediate, disk_full)


def count_expired_files(
    last_modified_ms: list[int],
    now_ms: int,
    file_reserved_ms: int,
    *,
    clean_immediately: bool,
    batch_max: int = DELETE_FILES_BATCH_MAX,
) -> int:
    """How many leading files to delete: expired ones (or any, when cleaning immediately), in
    order, stopping at the first that must stay; the newest file is never deleted."""
    n = 0
    for mtime in last_modified_ms[:-1]:
        if not (clean_immediately or now_ms >= mtime + file_reserved_ms):
            break
        n += 1
        if n >= batch_max:
            break
    return n
