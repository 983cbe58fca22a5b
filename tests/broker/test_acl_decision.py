"""ACL 1.0 pure parts: signatures, address patterns, rules from YAML documents, the decision table."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from pocketmq.broker.acl.address import AddressPatternError, parse_address_pattern, peer_address
from pocketmq.broker.acl.decision import Memo, decide, required_resources
from pocketmq.broker.acl.rules import (
    ANY,
    DENY,
    PUB,
    SUB,
    AclConfigError,
    AclRules,
    build_rules,
    check_permission,
    check_resource_perms,
    parse_perm,
)
from pocketmq.broker.acl.validator import ACL_EXCEPTION, AclDenied, AclValidator
from pocketmq.client.acl import AclClientRPCHook, tool_credentials
from pocketmq.remoting.protocol.acl import sign, signature_content, signature_matches
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData

# ------------------------------------------------------------------------------------ signing


def test_signature_is_hmac_sha1_over_sorted_values_then_body() -> None:
    ext = {"b": "TopicA", "a": "G", "AccessKey": "RocketMQ", "Signature": "old", "_UNIQUE_KEY_QUERY": "true"}
    assert signature_content(ext, b"body") == b"RocketMQGTopicAbody"
    want = base64.b64encode(hmac.new(b"12345678", b"RocketMQGTopicAbody", hashlib.sha1).digest()).decode()
    assert sign("12345678", ext, b"body") == want
    assert signature_matches("12345678", want, ext, b"body")
    assert not signature_matches("12345679", want, ext, b"body")
    assert not signature_matches("12345678", None, ext, b"body")
    assert not signature_matches("12345678", want, ext, b"bodx")


def test_client_hook_adds_access_key_token_and_signature() -> None:
    req = RemotingCommand.request(310, {"b": "T", "a": "G"}, b"x")
    AclClientRPCHook("RocketMQ", "12345678", "tok").before_request("h:1", req)
    ext = req.ext_fields
    assert ext is not None and ext["AccessKey"] == "RocketMQ" and ext["SecurityToken"] == "tok"
    assert ext["Signature"] == sign("12345678", {k: v for k, v in ext.items() if k != "Signature"}, b"x")
    # the Java reference value for the same content (values sorted by key: AccessKey, SecurityToken, a, b)
    assert signature_content(ext, b"x") == b"RocketMQtokGTx"


def test_tool_credentials_env_then_tools_yml(tmp_path) -> None:
    assert tool_credentials({}) is None
    env = {"ROCKETMQ_ACCESS_KEY": "ak12345", "ROCKETMQ_SECRET_KEY": "sk12345"}
    creds = tool_credentials(env)
    assert creds is not None and creds.access_key == "ak12345" and "sk12345" not in repr(creds)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    creds = tool_credentials({"ROCKETMQ_HOME": str(tmp_path)})
    assert creds is not None and (creds.access_key, creds.secret_key) == ("rocketmq2", "12345678")
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: rocketmq2\n")
    assert tool_credentials({"ROCKETMQ_HOME": str(tmp_path)}) is None


# ---------------------------------------------------------------------------------- addresses

ADDR_CASES = [
    ("*", "1.2.3.4:1", True),
    ("*.*.*.*", "[::1]:1", True),
    ("192.168.0.7", "192.168.0.7:10", True),
    ("192.168.0.7", "192.168.0.8:10", False),
    ("192.168.0.*", "192.168.0.200:10", True),
    ("192.168.0.*", "192.168.1.2:10", False),
    ("10.*.*.*", "10.9.8.7:1", True),
    ("192.168.1.1-5", "192.168.1.5:1", True),
    ("192.168.1.1-5", "192.168.1.6:1", False),
    ("192.168.1-3.*", "192.168.2.99:1", True),
    ("192.168.1-3.*", "192.168.4.1:1", False),
    ("192.168.1.{1,2,9}", "192.168.1.9:1", True),
    ("192.168.1.{1,2,9}", "192.168.1.3:1", False),
    ("127.0.0.1,10.0.0.1", "10.0.0.1:5", True),
    ("127.0.0.1,10.0.0.1", "10.0.0.2:5", False),
    ("::1", "::1:1234", True),
    ("0:0:0:0:0:0:0:1", "[::1]:1234", True),
    ("fe80:0:0:0:0:0:0:*", "fe80::abcd:1", True),
    ("fe80::*", "fe80::abcd:1", True),
    ("fe80::*", "fe81::abcd:1", False),
    ("fe80:0:0:0:0:0:0:1-ff", "fe80::ff:1", True),
    ("fe80:0:0:0:0:0:0:1-ff", "fe80::100:1", False),
    ("fe80:0:0:0:0:0:0:{1,a}", "fe80::a:1", True),
    ("127.0.0.1", "::ffff:127.0.0.1:99", True),
    ("", "127.0.0.1:1", False),
]


@pytest.mark.parametrize(("pattern", "peer", "hit"), ADDR_CASES)
def test_address_patterns(pattern: str, peer: str, hit: bool) -> None:
    assert parse_address_pattern(pattern).matches(peer_address(peer)) is hit


@pytest.mark.parametrize(
    "pattern",
    [
        "1.2.3",
        "1.2.3.256",
        "*.1.2.3",
        "1-2.3.4.5",
        "1.2.*.4",
        "1.2.3.5-1",
        "1.2.3.{}",
        "a.b.c.d",
        "1.2.3.4,x",
    ],
)
def test_bad_address_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AddressPatternError):
        parse_address_pattern(pattern)


# ---------------------------------------------------------------------------------- rules


def test_permissions() -> None:
    assert [parse_perm(s) for s in ("DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB", "junk", None)] == [
        DENY, PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY,
    ]  # fmt: skip
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert check_permission(ANY, SUB) and not check_permission(ANY, DENY)
    assert not check_permission(SUB, DENY | SUB)
    check_resource_perms(["a=PUB", "b=SUB|PUB"])
    for bad in (["a"], ["a=WRITE"], ["=PUB"]):
        with pytest.raises(AclConfigError):
            check_resource_perms(bad)


DOC = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": 12345678,
            "whiteRemoteAddress": None,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
            "groupPerms": ["groupA=DENY", "groupB=PUB|SUB"],
        },
        {
            "accessKey": "rocketmq2",
            "secretKey": "12345678",
            "whiteRemoteAddress": "192.168.1.*",
            "admin": True,
        },
    ],
}


def test_rules_from_documents_and_duplicates() -> None:
    rules = build_rules(
        [("/a.yml", DOC), ("/b.yml", {"accounts": [{"accessKey": "RocketMQ", "secretKey": "other12"}]})]
    )
    acct = rules.accounts["RocketMQ"]
    assert acct.secret_key == "12345678" and acct.source == "/a.yml"
    assert acct.perms == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
    }
    assert rules.warnings and "RocketMQ" in rules.warnings[0]
    assert "12345678" not in repr(acct)


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([1, 2], "expected a mapping"),
        ({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}, "longer than 6"),
        ({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678", "topicPerms": ["x"]}]}, "topic:x"),
        ({"globalWhiteRemoteAddresses": ["1.2.3"]}, "globalWhiteRemoteAddresses"),
        ({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678", "admin": "maybe"}]}, "admin"),
    ],
)
def test_bad_documents_name_the_problem(doc: object, fragment: str) -> None:
    with pytest.raises(AclConfigError, match=fragment.replace("|", r"\|")):
        build_rules([("/x.yml", doc)])


# ------------------------------------------------------------------------------- decisions

RULES = build_rules([("/a.yml", DOC)])


def _signed(
    code: int, ext: dict[str, str], body: bytes | None = None, ak: str = "RocketMQ", sk: str = "12345678"
) -> dict[str, str]:
    req = RemotingCommand.request(code, dict(ext), body)
    AclClientRPCHook(ak, sk).before_request("x", req)
    assert req.ext_fields is not None
    return req.ext_fields


#: one memo across the whole table: remembered authorizations never change a decision
MEMO: Memo = {}


#: the same accounts without the global white list: there the validator's shortcut (no white
#: list, a good signature) serves the accounts without their own white list
RULES_NO_GLOBAL = build_rules(
    [("/a.yml", {k: v for k, v in DOC.items() if k != "globalWhiteRemoteAddresses"})]
)


class _Fixed:
    def __init__(self, rules: AclRules) -> None:
        self.rules = rules


#: one validator per rules object across the whole table, as a broker keeps one
VALIDATORS = {id(r): AclValidator(_Fixed(r)) for r in (RULES, RULES_NO_GLOBAL)}  # type: ignore[arg-type]


def _validated(
    rules: AclRules, code: int, ext: dict[str, str] | None, body: bytes | None, peer: str
) -> str | None:
    """None when the validator lets the request through, else the reason it gives."""
    try:
        VALIDATORS[id(rules)].before_request(peer, RemotingCommand.request(code, ext, body))
    except AclDenied as exc:
        return exc.remark.removeprefix(ACL_EXCEPTION + ": ")
    return None


def _decide(code: int, ext: dict[str, str] | None, body: bytes | None = None, peer: str = "127.0.0.1:1"):
    plain = decide(RULES, peer=peer_address(peer), code=code, ext=ext, body=body)
    for _ in range(2):  # the first call may fill the memo, the second reads it
        assert decide(RULES, peer=peer_address(peer), code=code, ext=ext, body=body, memo=MEMO) == plain
    # the validator (with its shortcut) reaches the table's outcome, with and without a global
    # white list, first and remembered
    for rules in (RULES, RULES_NO_GLOBAL):
        want = decide(rules, peer=peer_address(peer), code=code, ext=ext, body=body)
        for _ in range(2):
            assert _validated(rules, code, ext, body, peer) == (None if want.allowed else want.reason)
    return plain


def test_validator_decides_again_after_a_reload() -> None:
    """The memo belongs to one rules object: new rules (a reload) are applied at the next request."""

    class Manager:
        rules = RULES

    validator = AclValidator(Manager())  # type: ignore[arg-type]
    ext = _signed(310, {"a": "G", "b": "topicB"})
    for _ in range(2):
        validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(ext), None))
    Manager.rules = build_rules(
        [
            (
                "plain_acl.yml",
                {
                    "accounts": [
                        {"accessKey": "RocketMQ", "secretKey": "12345678", "topicPerms": ["topicB=SUB"]}
                    ]
                },
            )
        ]
    )
    with pytest.raises(AclDenied, match="topic:topicB"):
        validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(ext), None))
    assert validator.denied == 1


def test_decision_table() -> None:
    send = {"a": "G", "b": "topicB"}
    assert _decide(310, _signed(310, send)).allowed
    d = _decide(310, _signed(310, {"a": "G", "b": "topicA"}))
    assert (
        not d.allowed
        and d.reason.startswith("No default permission for topic:topicA")
        and "RocketMQ" in d.reason
    )
    d = _decide(310, _signed(310, {"a": "G", "b": "other"}))  # default topic perm DENY
    assert not d.allowed and d.resource == "other"
    d = _decide(310, _signed(310, send, sk="wrong123"))
    assert not d.allowed and d.reason == "Check signature failed for accessKey=RocketMQ"
    d = _decide(310, _signed(310, send, ak="nobody1"))
    assert d.reason == "No acl config for nobody1"
    assert _decide(310, dict(send)).reason == "No accessKey is configured"
    assert _decide(310, None).reason == "No accessKey is configured"
    # global white list: no key needed; account white list: no signature needed
    assert _decide(310, None, peer="10.10.103.9:5").allowed
    assert _decide(310, {"AccessKey": "rocketmq2", "b": "x"}, peer="192.168.1.3:5").allowed
    assert not _decide(310, {"AccessKey": "rocketmq2", "b": "x"}, peer="192.168.2.3:5").allowed
    # admin codes
    d = _decide(17, _signed(17, {"topic": "t"}))
    assert d.reason == "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    assert _decide(17, _signed(17, {"topic": "t"}, ak="rocketmq2")).allowed
    # retry sends need SUB on the group; trace topic sends pass
    assert _decide(310, _signed(310, {"a": "groupB", "b": "%RETRY%groupB"})).allowed
    assert not _decide(310, _signed(310, {"a": "groupA", "b": "%RETRY%groupA"})).allowed
    assert _decide(310, _signed(310, {"a": "G", "b": "RMQ_SYS_TRACE_TOPIC"})).allowed
    # pulls need the topic and the group
    assert _decide(11, _signed(11, {"topic": "topicC", "consumerGroup": "groupB"})).allowed
    d = _decide(11, _signed(11, {"topic": "topicC", "consumerGroup": "groupA"}))
    assert not d.allowed and "group:groupA" in d.reason
    # codes without resources need only the signature
    assert _decide(320, _signed(320, {"b": "topicA"})).allowed


def test_heartbeat_resources_and_bad_body() -> None:
    hb = HeartbeatData(
        client_id="c",
        consumer_data_set=(
            ConsumerData(group_name="groupB", subscription_data_set=(SubscriptionData(topic="topicC"),)),
        ),
    ).encode()
    assert required_resources(34, {}, hb) == {"%RETRY%groupB": SUB, "topicC": SUB}
    assert _decide(34, _signed(34, {}, hb), hb).allowed
    d = _decide(34, _signed(34, {}, b"{nope"), b"{nope")
    assert not d.allowed and d.reason
    assert required_resources(15, {"consumerGroup": "g", "topic": "t"}, None) == {"%RETRY%g": SUB, "t": SUB}
    assert required_resources(35, {"consumerGroup": "g"}, None) == {"%RETRY%g": SUB}
    assert required_resources(36, {"group": "g"}, None) == {"%RETRY%g": SUB}
    assert required_resources(12, {"topic": "t"}, None) == {"t": SUB}
    assert required_resources(10, {"topic": "%RETRY%g", "group": "g"}, None) == {"%RETRY%g": SUB}


@pytest.mark.parametrize("secret", ["12345678", "k" * 64, "long-" * 30, "ünïcødé-secret"])
@pytest.mark.parametrize(
    "ext",
    [
        {},
        {"AccessKey": "a"},
        {"b": "x", "a": "y", "Signature": "s"},
        {"z": "1", "_UNIQUE_KEY_QUERY": "t", "é": "2"},
    ],
)
def test_signer_is_rfc2104_hmac_sha1(secret: str, ext: dict[str, str]) -> None:
    from pocketmq.remoting.protocol.acl import Signer

    for body in (None, b"", b"body" * 300):
        data = "".join(
            v for k, v in sorted(ext.items()) if k not in ("Signature", "_UNIQUE_KEY_QUERY")
        ).encode()
        want = base64.b64encode(
            hmac.new(secret.encode(), data + (body or b""), hashlib.sha1).digest()
        ).decode()
        signer = Signer(secret)
        assert signer.sign(ext, body) == want
        assert signer.sign(dict(reversed(list(ext.items()))), body) == want  # any arrival order
        assert signer.matches(want, ext, body) and not signer.matches(want[:-2] + "==", ext, body)


def test_broken_yaml_error_never_quotes_the_file(tmp_path) -> None:
    from pocketmq.broker.acl.files import AclFiles

    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - {accessKey: RocketMQ, secretKey: topsecret99\n"
    )
    with pytest.raises(AclConfigError, match="not valid YAML") as err:
        AclFiles(str(tmp_path)).load()
    assert "topsecret99" not in str(err.value) and "line" in str(err.value)


def test_signed_content_is_exact_whatever_key_set_came_before() -> None:
    """The signed values are looked up by the previous key set of the same size: a request with
    another key set of that size (other signed keys, or a signed key where an unsigned one was)
    still signs exactly its own values."""
    ak = {"AccessKey": "RocketMQ"}
    shapes = [
        {**ak, "a": "1", "b": "2", "Signature": "s", "_UNIQUE_KEY_QUERY": "t"},
        {**ak, "a": "1", "b": "2", "c": "3", "Signature": "s"},  # c must be signed
        {**ak, "a": "1", "b": "2", "c": "3", "d": "4"},
        {**ak, "x": "9", "b": "2", "c": "3", "d": "4"},
        {**ak, "a": "1", "b": "2", "Signature": "s", "_UNIQUE_KEY_QUERY": "t"},
        {**ak, "b": "2", "a": "1", "_UNIQUE_KEY_QUERY": "t", "Signature": "s"},
    ]
    for ext in shapes * 2:
        want = "".join(v for k, v in sorted(ext.items()) if k not in ("Signature", "_UNIQUE_KEY_QUERY"))
        assert signature_content(ext, None) == want.encode()
        good = sign("12345678", {k: v for k, v in ext.items() if k != "Signature"}, b"x")
        assert signature_matches("12345678", good, ext, b"x")
    # a captured signature over {a, b} does not cover a field added in place of an unsigned one
    captured = {**ak, "a": "1", "b": "2"}
    sig = sign("12345678", captured, None)
    signature_content(
        {**captured, "Signature": sig, "_UNIQUE_KEY_QUERY": "t"}, None
    )  # fills the size-5 entry
    assert not signature_matches("12345678", sig, {**captured, "c": "evil", "Signature": sig}, None)


def test_validator_checks_with_the_secret_of_the_current_rules() -> None:
    """The key states the shortcut keeps beside each account follow a reload that changes the
    secret: the old secret's signature is refused, the new one's accepted."""

    def make(secret: str) -> AclRules:
        account = {"accessKey": "RocketMQ", "secretKey": secret, "topicPerms": ["topicB=PUB"]}
        return build_rules([("plain_acl.yml", {"accounts": [account]})])

    class Manager:
        rules = make("12345678")

    validator = AclValidator(Manager())  # type: ignore[arg-type]
    old = _signed(310, {"a": "G", "b": "topicB"}, b"x")
    validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(old), b"x"))
    Manager.rules = make("87654321")
    with pytest.raises(AclDenied, match="Check signature failed for accessKey=RocketMQ"):
        validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(old), b"x"))
    new = _signed(310, {"a": "G", "b": "topicB"}, b"x", sk="87654321")
    validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(new), b"x"))
    with pytest.raises(AclDenied, match="Check signature failed"):  # the body is signed too
        validator.before_request("127.0.0.1:1", RemotingCommand.request(310, dict(new), b"y"))
