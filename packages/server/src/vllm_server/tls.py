"""TLS settings shared by the HTTP and gRPC listeners."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class TlsConfig:
    """A certificate and key, and optionally CA certificates that client certificates must chain to."""

    certfile: Path
    keyfile: Path
    ca_certs: Path | None = None

    def read(self) -> tuple[bytes, bytes, bytes | None]:
        """The certificate chain, private key and CA bundle, as bytes."""
        ca = self.ca_certs.read_bytes() if self.ca_certs is not None else None
        return self.certfile.read_bytes(), self.keyfile.read_bytes(), ca
