"""A method of the method table: service, name, full path, streaming kind and message types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import msgspec

Req = TypeVar("Req", bound=msgspec.Struct)
Resp = TypeVar("Resp", bound=msgspec.Struct)


@dataclass(frozen=True, slots=True)
class MethodSpec(Generic[Req, Resp]):
    """One gRPC method, defined without a .proto: its path and message types."""

    service: str
    name: str
    streaming: Literal["unary", "server", "bidi"]
    request_type: type[Req]
    response_type: type[Resp]

    @property
    def path(self) -> str:
        """The full method path, `/package.Service/Method`."""
        return f"/{self.service}/{self.name}"
