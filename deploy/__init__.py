"""Local deployment: the `pocketmq` command (up, cluster, bench) and process launchers."""
