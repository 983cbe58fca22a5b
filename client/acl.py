"""ACL request signing (Java ``AclClientRPCHook``).

Before each request: add ``AccessKey`` to the ext fields, sort the ext fields by key, concatenate
their *values* (no keys, no separators) followed by the body, and set
``Signature = Base64(HMAC-SHA1(secretKey, bytes))``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from pocketmq.remoting.protocol.command import RemotingCommand


def sign(secret_key: str, ext_fields: dict[str, str], body: bytes | None) -> str:
    data = "".join(v for k, v in sorted(ext_fields.items()) if k != "Signature").encode()
    if body:
        data += body
    return base64.b64encode(hmac.new(secret_key.encode(), data, hashlib.sha1).digest()).decode()


class AclClientRPCHook:
    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        if ext is None:
            ext = request.ext_fields = {}
        ext["AccessKey"] = self.access_key
        if self.security_token:
            ext["SecurityToken"] = self.security_token
        ext["Signature"] = sign(self.secret_key, ext, request.body)

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None
