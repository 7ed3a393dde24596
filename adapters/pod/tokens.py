"""Per-pod bearer tokens, derived from a per-run secret kept beside the run (never in its log).

``token = HMAC-SHA256(run secret, pod id)``: every controller process working on the run (a resumed worker
included) can recompute the token of a pod it adopts, yet one pod's token says nothing about another's. The
secret file is created once with mode 0600; tokens reach a pod through its environment or a token file, never
a command line.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

__all__ = ["TOKEN_ENV", "PodTokens", "read_token_file"]

TOKEN_ENV = "AIT_POD_TOKEN"  # the variable a pod's bootstrap reads its token from


class PodTokens:
    def __init__(self, secret_file: Path) -> None:
        self.secret_file = Path(secret_file)
        self._secret: bytes | None = None

    def _load(self) -> bytes:
        if self._secret is None:
            path = self.secret_file
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(32))
            self._secret = path.read_text().strip().encode()
            if len(self._secret) < 32:
                raise ValueError(f"{path}: the pod token secret is too short (expected 64 hex characters)")
        return self._secret

    def __call__(self, pod_id: str) -> str:
        return hmac.new(self._load(), f"pod:{pod_id}".encode(), hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"PodTokens({str(self.secret_file)!r})"


def read_token_file(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace ignored), with errors that name the file, not the token."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"token file {path}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise ValueError(f"token file {path}: the token must be at least 16 characters")
    return token
