"""``mqadmin``: RocketMQ's admin tool, with the same command names and short options.

    mqadmin                          list the commands
    mqadmin help <command>           a command's options (or: mqadmin <command> -h)
    mqadmin <command> [options]      e.g. mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t T

Command names are matched case-insensitively. The name server comes from ``-n`` or
``$NAMESRV_ADDR`` (default 127.0.0.1:9876). Differences from the Java tool, where users asked:
``--json`` on every command (one document, stable keys, see :mod:`pocketmq.client.admin.model`),
non-zero exit codes with one clear line on failure (tracebacks only with ``--debug``; codes in
:mod:`pocketmq.client.admin.cli_common`), ``--dry-run`` on offset resets, and a fast start: this
module imports only click; a command's module (and the admin client) load when it runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from pocketmq.client.admin.cli_common import CONTEXT_SETTINGS, EXIT_INTERRUPTED, EXIT_USAGE

__all__ = ["COMMANDS", "cli", "main"]

_T, _C, _G, _M = (
    "pocketmq.client.admin.cli_topic",
    "pocketmq.client.admin.cli_cluster",
    "pocketmq.client.admin.cli_group",
    "pocketmq.client.admin.cli_msg",
)
_A = "pocketmq.client.admin.cli_acl"

#: name → (module, attribute, one-line description); listed without importing anything.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "updateTopic": (_T, "update_topic", "Update or create topic"),
    "deleteTopic": (_T, "delete_topic", "Delete topic from broker and NameServer"),
    "topicList": (_T, "topic_list", "Fetch all topic list from name server"),
    "topicRoute": (_T, "topic_route", "Examine topic route info"),
    "topicStatus": (_T, "topic_status", "Examine topic Status info"),
    "topicClusterList": (_T, "topic_cluster_list", "Get cluster info for topic"),
    "updateTopicPerm": (_T, "update_topic_perm", "Update topic perm"),
    "updateOrderConf": (_T, "update_order_conf", "Create or update or delete order conf"),
    "clusterList": (_C, "cluster_list", "List cluster infos"),
    "brokerStatus": (_C, "broker_status", "Fetch broker runtime status data"),
    "getBrokerConfig": (_C, "get_broker_config", "Get broker config by cluster or special broker"),
    "updateBrokerConfig": (_C, "update_broker_config", "Update broker's config"),
    "getNamesrvConfig": (_C, "get_namesrv_config", "Get configs of name server"),
    "wipeWritePerm": (_C, "wipe_write_perm", "Wipe write perm of broker in all name server"),
    "addWritePerm": (_C, "add_write_perm", "Add write perm of broker in all name server"),
    "brokerConsumeStats": (_C, "broker_consume_stats", "Fetch broker consume stats data"),
    "statsAll": (_C, "stats_all", "Topic and Consumer tps stats"),
    "updateSubGroup": (_G, "update_sub_group", "Update or create subscription group"),
    "deleteSubGroup": (_G, "delete_sub_group", "Delete subscription group from broker"),
    "consumerProgress": (_G, "consumer_progress", "Query consumers's progress, speed"),
    "consumerStatus": (_G, "consumer_status", "Query consumer's internal data structure"),
    "consumerConnection": (_G, "consumer_connection", "Query consumer's socket connection, client version and subscription"),
    "producerConnection": (_G, "producer_connection", "Query producer's socket connection and client version"),
    "resetOffsetByTime": (_G, "reset_offset_by_time", "Reset consumer offset by timestamp (without client restart)"),
    "skipAccumulatedMessage": (_G, "skip_accumulated_message", "Skip all messages that are accumulated (not consumed) currently"),
    "cloneGroupOffset": (_G, "clone_group_offset", "Clone offset from other group"),
    "queryMsgById": (_M, "query_msg_by_id", "Query Message by Id"),
    "queryMsgByKey": (_M, "query_msg_by_key", "Query Message by Key"),
    "queryMsgByUniqueKey": (_M, "query_msg_by_unique_key", "Query Message by Unique key"),
    "printMsg": (_M, "print_msg", "Print Message Detail"),
    "sendMessage": (_M, "send_message", "Send a message"),
    "consumeMessage": (_M, "consume_message", "Consume message"),
    "updateAclConfig": (_A, "update_acl_config", "Update acl config yaml file in broker"),
    "deleteAclConfig": (_A, "delete_acl_config", "Delete Acl Config Account in broker"),
    "updateGlobalWhiteAddr": (_A, "update_global_white_addr", "Update global white address for acl Config File in broker"),
    "clusterAclConfigVersion": (_A, "cluster_acl_config_version", "List all of acl config version information in cluster"),
    "getAclConfig": (_A, "get_acl_config", "List all of acl config information in cluster"),
    "queryMsgTraceById": ("pocketmq.client.admin.cli_trace", "query_msg_trace_by_id", "Query a message trace"),
}  # fmt: skip
COMMANDS.update(importlib.import_module("pocketmq.client.admin.cli_extra").EXTRA_COMMANDS)

_BY_LOWER = {name.lower(): name for name in COMMANDS}


def canonical_name(name: str) -> str | None:
    """The registered spelling of a command name given in any case."""
    return _BY_LOWER.get(name.lower())


class AdminGroup(click.Group):
    """Commands are imported on first use; lookup ignores case."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = canonical_name(cmd_name)
        if name is None:
            return None
        module, attr, _ = COMMANDS[name]
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        return cmd

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        cmd = self.get_command(ctx, name)
        if cmd is None:
            raise click.UsageError(f"no such command {name!r}; run 'mqadmin' to list the commands")
        return cmd.name, cmd, args[1:]


@click.group(cls=AdminGroup, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """mqadmin: RocketMQ admin commands for pocketmq (and Apache RocketMQ) clusters."""
    if ctx.invoked_subcommand is None:
        click.echo(command_list(), nl=False)


def command_list() -> str:
    width = max(len(n) for n in COMMANDS) + 2
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {name.ljust(width)}{desc}" for name, (_, _, desc) in COMMANDS.items()]
    lines.append("")
    lines.append("See 'mqadmin help <command>' for more information on a specific command.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry: run one command and exit with its code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            click.echo(f"mqadmin (pocketmq) {version('pocketmq')}")
        except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
            click.echo("mqadmin (pocketmq) unknown version")
        sys.exit(0)
    if args and args[0] in ("help", "--help", "-h"):
        if len(args) == 1 or args[0] != "help":
            click.echo(command_list(), nl=False)
            sys.exit(0)
        name = canonical_name(args[1])
        if name is None:
            click.echo(
                f"mqadmin help: no such command {args[1]!r}; run 'mqadmin' to list the commands", err=True
            )
            sys.exit(EXIT_USAGE)
        args = [name, "--help"]
    try:
        code = cli.main(args, prog_name="mqadmin", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        cmd = exc.ctx.command.name if exc.ctx is not None and exc.ctx.command is not cli else None
        where = f"mqadmin {cmd}" if cmd else "mqadmin"
        hint = f" (see 'mqadmin help {cmd}')" if cmd else ""
        click.echo(f"{where}: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("mqadmin: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
