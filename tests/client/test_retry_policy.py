"""The error registry decides retries: each response code's flags, as the producer reads them."""

from __future__ import annotations

import pytest

from pocketmq.client.errors import error_from_response, for_code
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.errors import UnknownResponseError

# code → (retriable on another broker, refresh the route first). Java's producer retries
# TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID and
# NOT_IN_CURRENT_UNIT; SYSTEM_BUSY and FLOW_CONTROL are broker back-pressure, also retried.
EXPECTED: dict[int, tuple[bool, bool]] = {
    ResponseCode.SYSTEM_ERROR: (True, False),
    ResponseCode.SYSTEM_BUSY: (True, False),
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: (False, False),
    ResponseCode.TRANSACTION_FAILED: (False, False),
    ResponseCode.FLUSH_DISK_TIMEOUT: (False, False),
    ResponseCode.SLAVE_NOT_AVAILABLE: (False, False),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (False, False),
    ResponseCode.MESSAGE_ILLEGAL: (False, False),
    ResponseCode.SERVICE_NOT_AVAILABLE: (True, True),
    ResponseCode.VERSION_NOT_SUPPORTED: (False, False),
    ResponseCode.NO_PERMISSION: (True, True),
    ResponseCode.TOPIC_NOT_EXIST: (True, True),
    ResponseCode.TOPIC_EXIST_ALREADY: (False, False),
    ResponseCode.PULL_NOT_FOUND: (False, False),
    ResponseCode.PULL_RETRY_IMMEDIATELY: (False, False),
    ResponseCode.PULL_OFFSET_MOVED: (False, False),
    ResponseCode.QUERY_NOT_FOUND: (False, False),
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: (False, False),
    ResponseCode.SUBSCRIPTION_NOT_EXIST: (False, False),
    ResponseCode.SUBSCRIPTION_NOT_LATEST: (False, False),
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: (False, False),
    ResponseCode.FILTER_DATA_NOT_EXIST: (False, False),
    ResponseCode.FILTER_DATA_NOT_LATEST: (False, False),
    ResponseCode.TRANSACTION_SHOULD_COMMIT: (False, False),
    ResponseCode.TRANSACTION_SHOULD_ROLLBACK: (False, False),
    ResponseCode.TRANSACTION_STATE_UNKNOW: (False, False),
    ResponseCode.TRANSACTION_STATE_GROUP_WRONG: (False, False),
    ResponseCode.NO_BUYER_ID: (True, False),
    ResponseCode.NOT_IN_CURRENT_UNIT: (True, False),
    ResponseCode.CONSUMER_NOT_ONLINE: (False, False),
    ResponseCode.CONSUME_MSG_TIMEOUT: (False, False),
    ResponseCode.NO_MESSAGE: (False, False),
    ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED: (False, False),
    ResponseCode.DELETE_ACL_CONFIG_FAILED: (False, False),
    ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: (False, False),
    ResponseCode.FLOW_CONTROL: (True, False),
}


def test_every_response_code_is_covered() -> None:
    assert set(EXPECTED) == {int(c) for c in ResponseCode if c != ResponseCode.SUCCESS}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_flags(code: int) -> None:
    cls = for_code(code)
    assert cls is not UnknownResponseError
    assert (cls.retriable, cls.refresh_route) == EXPECTED[code]
    err = error_from_response(code, "remark text", addr="1.2.3.4:10911", opaque=7)
    assert err.response_code == code and err.remark == "remark text" and "1.2.3.4:10911" in str(err)


def test_unknown_code_is_not_retried() -> None:
    err = error_from_response(4242, "?")
    assert isinstance(err, UnknownResponseError) and err.response_code == 4242 and not err.retriable
