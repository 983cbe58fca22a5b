"""The CommitLog floor: mapped files and their queue, CommitLog append/read, batch encoding,
the on-disk record layout, record validation, CRC and the few raw syscalls."""
