"""TLS material made at start: a throwaway CA, a server certificate for 127.0.0.1, a CA file."""

from __future__ import annotations

import os
import ssl
import tempfile

try:
    import trustme
except ImportError as exc:  # the testing kit's one dependency of its own
    raise ImportError(
        "the emulators need the testing extra: pip install 'realtime-resumption[testing]'"
    ) from exc


class TlsMaterial:
    """A fresh CA and server certificate; the CA is written to a file until ``remove()``."""

    def __init__(self, host: str) -> None:
        self._ca = trustme.CA(organization_name="realtime-resumption emulator")
        names = dict.fromkeys([host, "127.0.0.1", "localhost"])
        self._cert = self._ca.issue_cert(*names)
        fd, self.ca_file = tempfile.mkstemp(prefix="realtime-resumption-ca-", suffix=".pem")
        with os.fdopen(fd, "wb") as f:
            f.write(self._ca.cert_pem.bytes())

    def server_context(self) -> ssl.SSLContext:
        """The server side: presents the certificate for 127.0.0.1."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(ctx)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA (and only it)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._ca.configure_trust(ctx)
        return ctx

    def remove(self) -> None:
        """Delete the CA file (idempotent)."""
        try:
            os.unlink(self.ca_file)
        except FileNotFoundError:
            pass
