"""``mqadmin`` ACL commands (RocketMQ 4.9 ``tools/command/acl``): updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion, getAclConfig.

Each takes ``-b brokerAddr`` or ``-c clusterName`` (writes go to every broker of the cluster, as
RocketMQ, masters and slaves; reads to the masters). The caller signs with the tool credentials
(``ROCKETMQ_ACCESS_KEY``/``ROCKETMQ_SECRET_KEY`` or ``$ROCKETMQ_HOME/conf/tools.yml``) and, with
ACL on, must be an ``admin: true`` account. Secret keys are never printed: the broker masks them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, run_admin

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin

__all__ = [
    "cluster_acl_config_version",
    "delete_acl_config",
    "get_acl_config",
    "update_acl_config",
    "update_global_white_addr",
]

_B = click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
_C = click.option("-c", "--clusterName", "cluster", help="every broker of this cluster")


def _perms(text: str | None) -> list[str] | None:
    return None if text is None else [p.strip() for p in text.strip().split(",") if p.strip()]


@admin_command("updateAclConfig", "Update acl config yaml file in broker.")
@_B
@_C
@click.option("-a", "--accessKey", "access_key", required=True, help="account access key")
@click.option("-s", "--secretKey", "secret_key", help="account secret key (kept when updating without it)")
@click.option(
    "-w", "--whiteRemoteAddress", "white", help="addresses that need no signature, e.g. 192.168.1.*"
)
@click.option("-i", "--defaultTopicPerm", "default_topic_perm", help="DENY, PUB, SUB or PUB|SUB")
@click.option("-u", "--defaultGroupPerm", "default_group_perm", help="DENY, PUB, SUB or PUB|SUB")
@click.option("-t", "--topicPerms", "topic_perms", help="e.g. topicA=DENY,topicD=SUB")
@click.option("-g", "--groupPerms", "group_perms", help="e.g. groupA=DENY,groupD=SUB")
@bool_option("-m", "--admin", default=False, help="the account may send admin requests")
def update_acl_config(
    opts: Opts, broker_addr: str | None, cluster: str | None, access_key: str, secret_key: str | None,
    white: str | None, default_topic_perm: str | None, default_group_perm: str | None,
    topic_perms: str | None, group_perms: str | None, admin: bool,
) -> None:  # fmt: skip
    async def job(a: MQAdmin) -> list[str]:
        addrs = await a.targets(broker_addr, cluster, with_slaves=True)
        for addr in addrs:
            await a.update_acl_config(
                addr, access_key.strip(), secret_key=secret_key, white_remote_address=white, admin=admin,
                default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
                topic_perms=_perms(topic_perms), group_perms=_perms(group_perms),
            )  # fmt: skip
        return addrs

    addrs = run_admin(opts, job)
    text = "".join(f"create or update plain access config to {addr} success.\n" for addr in addrs)
    emit(opts, {"accessKey": access_key, "brokers": addrs}, text)


@admin_command("deleteAclConfig", "Delete Acl Config Account in broker.")
@_B
@_C
@click.option("-a", "--accessKey", "access_key", required=True, help="account to delete")
def delete_acl_config(opts: Opts, broker_addr: str | None, cluster: str | None, access_key: str) -> None:
    async def job(a: MQAdmin) -> list[str]:
        addrs = await a.targets(broker_addr, cluster, with_slaves=True)
        for addr in addrs:
            await a.delete_acl_config(addr, access_key.strip())
        return addrs

    addrs = run_admin(opts, job)
    text = "".join(
        f"delete plain access config account from {addr} success.\naccount's accesskey is:{access_key}\n"
        for addr in addrs
    )
    emit(opts, {"accessKey": access_key, "brokers": addrs}, text)


@admin_command("updateGlobalWhiteAddr", "Update global white address for acl Config File in broker.")
@_B
@_C
@click.option(
    "-g", "--globalWhiteRemoteAddresses", "addresses", required=True, help="e.g. 10.10.103.*,192.168.0.*"
)
@click.option(
    "-p", "--aclFileFullPath", "acl_file", help="which ACL file (default: the broker's plain_acl.yml)"
)
def update_global_white_addr(
    opts: Opts, broker_addr: str | None, cluster: str | None, addresses: str, acl_file: str | None
) -> None:
    entries = [p.strip() for p in addresses.split(",") if p.strip()]

    async def job(a: MQAdmin) -> list[str]:
        addrs = await a.targets(broker_addr, cluster, with_slaves=True)
        for addr in addrs:
            await a.update_global_white_addrs(addr, entries, acl_file)
        return addrs

    addrs = run_admin(opts, job)
    text = "".join(f"update global white remote addresses to {addr} success.\n" for addr in addrs)
    emit(opts, {"globalWhiteRemoteAddresses": entries, "brokers": addrs}, text)


def _time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


@admin_command("clusterAclConfigVersion", "List all of acl config version information in cluster.")
@_B
@_C
def cluster_acl_config_version(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    async def job(a: MQAdmin) -> list[dict[str, Any]]:
        return [await a.acl_config_version(addr) for addr in await a.targets(broker_addr, cluster)]

    infos = run_admin(opts, job)

    def text() -> str:
        row = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}\n"
        out = [row.format("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
                          "#AclConfigVersionNum", "#AclLastUpdateTime")]  # fmt: skip
        for info in infos:
            for path, v in info["files"].items():
                out.append(row.format(info["clusterName"], info["brokerName"], info["brokerAddr"], path,
                                      str(v["counter"]), _time(v["timestamp"])))  # fmt: skip
        return "".join(out)

    emit(opts, {"brokers": infos}, text)


_FIELDS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
           "topicPerms", "groupPerms")  # fmt: skip


def _java(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


@admin_command("getAclConfig", "List all of acl config information in cluster.")
@_B
@_C
def get_acl_config(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    async def job(a: MQAdmin) -> list[tuple[str, dict[str, Any]]]:
        return [(addr, await a.acl_config(addr)) for addr in await a.targets(broker_addr, cluster)]

    configs = run_admin(opts, job)

    def text() -> str:
        out: list[str] = []
        for _addr, cfg in configs:
            out.append(
                f"\n{'globalWhiteRemoteAddresses':<20}: {_java(cfg.get('globalWhiteAddrs') or [])}\n\naccounts:\n"
            )
            for account in cfg.get("plainAccessConfigs") or ():
                out.extend(f"  {name:<18}: {_java(account.get(name))}\n" for name in _FIELDS)
                out.append("\n")
        return "".join(out)

    emit(opts, {"brokers": [{"addr": a, **c} for a, c in configs]}, text)
