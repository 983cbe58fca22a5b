"""Error types of the remoting layer.

Two families:

* **Protocol errors** (h11 style). ``LocalProtocolError``: we were asked to build something
  illegal, or our decoder rejected bytes (the codecs raise it; ``FrameDecoder`` records it).
  ``RemoteProtocolError``: the peer sent garbage. The transport converts the decoder's local
  errors into this kind at its one receive point (``RemotingConnection.data_received``): it
  answers a bad header whose opaque it knows with SYSTEM_ERROR, and otherwise logs once and
  closes that one connection, keeping everybody else served.
* **Response errors**: one class per RocketMQ response code, registered when the class is
  defined. A server handler raises e.g. ``TopicNotExistError(remark)`` and the server turns it
  into a reply with that code; a client turns a non-success reply back into the class with
  :func:`for_code`. ``retriable`` and ``refresh_route`` are policy flags read by the producer's
  retry loop, so no code checks are scattered through client logic (aiokafka ``errors.py``).
"""

from __future__ import annotations

from typing import ClassVar

from pocketmq.remoting.protocol.codes import ResponseCode


class RemotingError(Exception):
    """Root of every error raised by pocketmq's remoting layer."""


class ProtocolError(RemotingError):
    """Bytes or commands that break the RocketMQ remoting protocol."""


class LocalProtocolError(ProtocolError):
    """Raised inside codecs: the bytes or the command at hand are not legal."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something illegal (a local decoder error, as seen by the transport).

    ``__cause__`` is the decoder's ``LocalProtocolError``; ``peer`` names the connection.
    """

    def __init__(self, message: str, *, peer: str = "") -> None:
        super().__init__(message)
        self.peer = peer

    @classmethod
    def from_local(cls, exc: LocalProtocolError, peer: str) -> RemoteProtocolError:
        """The remote kind of a decoder error on the connection to ``peer`` (h11's conversion)."""
        remote = cls(f"{peer} sent bytes we cannot decode: {exc}", peer=peer)
        remote.__cause__ = exc
        return remote


class FrameError(LocalProtocolError):
    """The framing itself is broken (length word); the stream cannot be resynchronised."""


class FrameTooLargeError(FrameError):
    """A length prefix claims more than ``max_frame_size`` bytes; nothing is allocated for it."""


class HeaderDecodeError(LocalProtocolError):
    """A well-framed command whose header cannot be decoded.

    The frame boundary is intact, so the connection can go on. ``opaque`` is set when the
    header was readable far enough to know which request to answer (with SYSTEM_ERROR).
    """

    def __init__(self, message: str, *, opaque: int | None = None) -> None:
        super().__init__(message)
        self.opaque = opaque


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No reply within the request's timeout."""


class RemotingConnectError(RemotingError, ConnectionError):
    """Could not connect to the peer, or the connection was lost."""


class RemotingSendRequestError(RemotingError, ConnectionError):
    """The request could not be written (connection closed while sending)."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many async or oneway requests already in flight on this client."""


# --------------------------------------------------------------------------------------------
# response errors

_REGISTRY: dict[int, type[ResponseError]] = {}


class ResponseError(RemotingError):
    """A RocketMQ reply code other than SUCCESS (or a handler's way of producing one)."""

    code: ClassVar[int] = ResponseCode.SYSTEM_ERROR
    #: Safe to retry (possibly on another broker).
    retriable: ClassVar[bool] = False
    #: Refresh the topic route before retrying.
    refresh_route: ClassVar[bool] = False
    #: Whether subclasses register their ``code`` (the unknown fallback does not).
    _register: ClassVar[bool] = True

    def __init__(
        self,
        remark: str = "",
        *,
        addr: str | None = None,
        opaque: int | None = None,
        code: int | None = None,
    ) -> None:
        self.remark = remark
        self.addr = addr
        self.opaque = opaque
        if code is not None:
            # Only UnknownResponseError instances carry a code of their own.
            self.response_code = code
        else:
            self.response_code = type(self).code
        super().__init__(remark)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("_register", True):
            return
        code = int(cls.code)
        if code in _REGISTRY:
            raise TypeError(
                f"response code {code} registered twice: {_REGISTRY[code].__name__}, {cls.__name__}"
            )
        _REGISTRY[code] = cls

    def __str__(self) -> str:
        where = f" from {self.addr}" if self.addr else ""
        return f"[{type(self).__name__} code={self.response_code}{where}] {self.remark}"


def for_code(code: int) -> type[ResponseError]:
    """The error class registered for ``code``; ``UnknownResponseError`` when there is none."""
    return _REGISTRY.get(code, UnknownResponseError)


def error_from_response(
    code: int, remark: str | None, *, addr: str | None = None, opaque: int | None = None
) -> ResponseError:
    """Build the exception for a non-success reply."""
    cls = for_code(code)
    if cls is UnknownResponseError:
        return UnknownResponseError(remark or "", addr=addr, opaque=opaque, code=code)
    return cls(remark or "", addr=addr, opaque=opaque)


class UnknownResponseError(ResponseError):
    _register = False
    retriable = False


class RemoteSystemError(ResponseError):
    code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusyError(ResponseError):
    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupportedError(ResponseError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class TransactionFailedError(ResponseError):
    code = ResponseCode.TRANSACTION_FAILED


class FlushDiskTimeoutError(ResponseError):
    code = ResponseCode.FLUSH_DISK_TIMEOUT


class SlaveNotAvailableError(ResponseError):
    code = ResponseCode.SLAVE_NOT_AVAILABLE


class FlushSlaveTimeoutError(ResponseError):
    code = ResponseCode.FLUSH_SLAVE_TIMEOUT


class MessageIllegalError(ResponseError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(ResponseError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True
    refresh_route = True


class VersionNotSupportedError(ResponseError):
    code = ResponseCode.VERSION_NOT_SUPPORTED


class NoPermissionError(ResponseError):
    code = ResponseCode.NO_PERMISSION
    retriable = True
    refresh_route = True


class TopicNotExistError(ResponseError):
    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True
    refresh_route = True


class TopicExistAlreadyError(ResponseError):
    code = ResponseCode.TOPIC_EXIST_ALREADY


class PullNotFoundError(ResponseError):
    code = ResponseCode.PULL_NOT_FOUND


class PullRetryImmediatelyError(ResponseError):
    code = ResponseCode.PULL_RETRY_IMMEDIATELY


class PullOffsetMovedError(ResponseError):
    code = ResponseCode.PULL_OFFSET_MOVED


class QueryNotFoundError(ResponseError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailedError(ResponseError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(ResponseError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(ResponseError):
    code = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(ResponseError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class FilterDataNotExistError(ResponseError):
    code = ResponseCode.FILTER_DATA_NOT_EXIST


class FilterDataNotLatestError(ResponseError):
    code = ResponseCode.FILTER_DATA_NOT_LATEST


class TransactionShouldCommitError(ResponseError):
    code = ResponseCode.TRANSACTION_SHOULD_COMMIT


class TransactionShouldRollbackError(ResponseError):
    code = ResponseCode.TRANSACTION_SHOULD_ROLLBACK


class TransactionStateUnknownError(ResponseError):
    code = ResponseCode.TRANSACTION_STATE_UNKNOW


class TransactionStateGroupWrongError(ResponseError):
    code = ResponseCode.TRANSACTION_STATE_GROUP_WRONG


class NoBuyerIdError(ResponseError):
    code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(ResponseError):
    code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class ConsumerNotOnlineError(ResponseError):
    code = ResponseCode.CONSUMER_NOT_ONLINE


class ConsumeMsgTimeoutError(ResponseError):
    code = ResponseCode.CONSUME_MSG_TIMEOUT


class NoMessageError(ResponseError):
    code = ResponseCode.NO_MESSAGE


class UpdateAclConfigFailedError(ResponseError):
    code = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED


class DeleteAclConfigFailedError(ResponseError):
    code = ResponseCode.DELETE_ACL_CONFIG_FAILED


class UpdateGlobalWhiteAddrsFailedError(ResponseError):
    code = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED


class FlowControlError(ResponseError):
    code = ResponseCode.FLOW_CONTROL
    retriable = True


class HeaderFieldError(RemoteSystemError):
    """A custom-header field is missing or unparsable (Java: RemotingCommandException → 1)."""

    _register = False


__all__ = [name for name in dir() if name.endswith("Error")] + [
    "error_from_response",
    "for_code",
]
