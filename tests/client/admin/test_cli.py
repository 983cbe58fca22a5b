"""The mqadmin command line without servers: listing, help, names, usage errors, failures."""

from __future__ import annotations

import socket
import subprocess
import sys

import click
import orjson
import pytest

from pocketmq.client.admin.cli import COMMANDS, AdminGroup, canonical_name, cli
from tests.client.admin.cli_helpers import MQADMIN, run_cli

#: The commands issue 8 requires (the most used mqadmin commands plus four more).
REQUIRED = [
    "updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "updateTopicPerm", "clusterList",
    "brokerStatus", "getBrokerConfig", "updateBrokerConfig", "updateSubGroup", "deleteSubGroup",
    "consumerProgress", "consumerStatus", "consumerConnection", "producerConnection", "queryMsgById",
    "queryMsgByKey", "queryMsgByUniqueKey", "printMsg", "sendMessage", "resetOffsetByTime",
    "skipAccumulatedMessage", "wipeWritePerm", "addWritePerm", "topicClusterList", "brokerConsumeStats",
    "statsAll", "consumeMessage",
]  # fmt: skip


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mqadmin_alone_lists_every_required_command() -> None:
    r = run_cli()
    assert r.code == 0
    listed = {line.split()[0] for line in r.out.splitlines() if line.startswith("   ")}
    assert set(REQUIRED) <= listed
    assert "See 'mqadmin help <command>'" in r.out


def test_every_command_loads_and_has_the_common_options() -> None:
    group = AdminGroup()
    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = group.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert {"-n", "--json", "--debug", "--timeout", "-h"} - {"-h"} <= opts, name


@pytest.mark.parametrize("spelling", ["topicstatus", "TOPICSTATUS", "TopicStatus", "topicStatus"])
def test_command_names_are_case_insensitive(spelling: str) -> None:
    assert canonical_name(spelling) == "topicStatus"
    r = run_cli(spelling, "-h")
    assert r.code == 0 and "Examine topic Status info" in r.out and "-t, --topic" in r.out


def test_version() -> None:
    r = run_cli("--version")
    assert r.code == 0 and r.out.startswith("mqadmin (pocketmq) ")


def test_help_command_prints_options() -> None:
    r = run_cli("help", "updatetopic")
    assert r.code == 0
    for opt in ("-t, --topic", "-b, --brokerAddr", "-c, --clusterName", "-r, --readQueueNums", "-w, --writeQueueNums",
                "-p, --perm", "-o, --order", "--json", "-n, --namesrvAddr"):  # fmt: skip
        assert opt in r.out
    assert run_cli("help", "noSuchThing").code == 2


def one_line(text: str) -> str:
    found = [line for line in text.splitlines() if line.strip()]
    assert len(found) == 1, f"expected one line, got: {text!r}"
    assert "Traceback" not in text
    return found[0]


def test_unknown_command_and_bad_option_exit_2_with_one_line() -> None:
    r = run_cli("noSuchCommand")
    assert r.code == 2 and "no such command 'noSuchCommand'" in one_line(r.err)
    r = run_cli("topicStatus", "-t", "T", "-x")
    assert r.code == 2
    assert one_line(r.err).startswith("mqadmin topicStatus: No such option")
    r = run_cli("topicStatus")
    assert r.code == 2 and "Missing option '-t'" in one_line(r.err)
    r = run_cli("updateTopic", "-t", "T", "-r", "zero")
    assert r.code == 2 and "-r" in one_line(r.err)


def test_target_and_value_checks_are_usage_errors() -> None:
    r = run_cli("updateTopic", "-t", "T", "-n", "127.0.0.1:1")
    assert r.code == 2 and "-b" in one_line(r.err) and "-c" in r.err
    r = run_cli("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday", "-n", "127.0.0.1:1")
    assert r.code == 2 and "yyyy-MM-dd#HH:mm:ss:SSS" in one_line(r.err)
    r = run_cli("sendMessage", "-t", "T", "-p", "x", "-b", "broker-a", "-n", "127.0.0.1:1")
    assert r.code == 2 and "-i" in one_line(r.err)
    r = run_cli("topicList", "-n", "not-an-address")
    assert r.code == 1 and "bad name server address" in one_line(r.err)


def test_unreachable_name_server_exits_3_with_one_line() -> None:
    port = closed_port()
    r = run_cli("topicList", "-n", f"127.0.0.1:{port}")
    assert r.code == 3
    line = one_line(r.err)
    assert line.startswith("mqadmin topicList: cannot reach the server") and f"127.0.0.1:{port}" in line
    assert r.out == ""


def test_json_failure_document_and_debug_traceback() -> None:
    port = closed_port()
    r = run_cli("clusterList", "--json", "-n", f"127.0.0.1:{port}")
    assert r.code == 3
    doc = orjson.loads(r.out)
    assert set(doc["error"]) == {"message", "code", "type"} and doc["error"]["type"] == "RemotingConnectError"
    r = run_cli("clusterList", "--debug", "-n", f"127.0.0.1:{port}")
    assert r.code == 3 and "Traceback" in r.err


def test_namesrv_addr_comes_from_the_environment() -> None:
    port = closed_port()
    r = run_cli("topicList", env={"NAMESRV_ADDR": f"127.0.0.1:{port}"})
    assert r.code == 3 and f"127.0.0.1:{port}" in r.err


def test_console_script_starts_without_loading_the_admin_client() -> None:
    code = (
        "import sys, pocketmq.client.admin.cli as c; "
        "print(sorted(m for m in sys.modules if m.startswith('pocketmq.client.admin.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "pocketmq.client.admin.admin" not in out and "pocketmq.client.admin.cli_topic" not in out
    listing = subprocess.run([MQADMIN], capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0 and "updateTopic" in listing.stdout
