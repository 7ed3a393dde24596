"""The installation key: the secret the hidden eval sets are derived from.

Knowing the generator code and the public seed range (split ``hidden``, seeds ``0..199``) must not be enough
to rebuild a hidden set, so every hidden draw's seed mixes in ``HMAC-SHA256(key, "family|seed")``. The key is
32 random bytes, hex-encoded, created on first use at ``$AIT_EVAL_KEY_FILE`` or ``~/.config/ait/eval.key``
(mode 0600, its directory 0700), outside the repository and every workspace. It never appears in events,
logs or artifacts: only its :func:`key_fingerprint` (the first 16 hex digits of its sha256) does, e.g. in a
baselines file, which a changed key therefore invalidates.

A key file may carry ``#`` comment lines. One with the line ``# AIT PUBLIC TEST KEY`` is a committed,
public key for the test suite (``tests/data/eval-test.key``): it is allowed inside the repository; any other
key found inside the repository is refused, since a committed key is no secret.

A process started with ``AIT_EVAL_KEY_SEALED=1`` (the CPU trainer's training child, where the agent's env
code runs) is *sealed*: :func:`current_key` raises :class:`EvalKeySealed` instead of loading or creating a
key, so the hidden split cannot be built there, not even under a fresh key. (The real defence is that the
key file is not reachable from that process at all; the seal makes any attempt fail loudly.)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

__all__ = [
    "ENV_VAR",
    "SEAL_VAR",
    "TEST_KEY_MARKER",
    "EvalKey",
    "EvalKeyError",
    "EvalKeySealed",
    "current_key",
    "key_fingerprint",
    "key_path",
    "key_sealed",
]

# stdlib logging, not structlog: this module is vendored into eval packages, which carry no structlog.
log = logging.getLogger(__name__)

ENV_VAR = "AIT_EVAL_KEY_FILE"
SEAL_VAR = "AIT_EVAL_KEY_SEALED"
TEST_KEY_MARKER = "# AIT PUBLIC TEST KEY"
_REPO = Path(__file__).resolve().parents[1]
_KEY_BYTES = 32


class EvalKeyError(Exception):
    """The key file is unusable; the message names the file and what to do."""


class EvalKeySealed(EvalKeyError):
    """This process is sealed from the key (agent code runs here): the hidden split is unreachable."""


def key_sealed() -> bool:
    """Whether this process runs sealed from the installation key (``AIT_EVAL_KEY_SEALED=1``)."""
    return os.environ.get(SEAL_VAR, "").strip() == "1"


class EvalKey:
    """A loaded key: derives the hidden-split mix and states its fingerprint; never prints the secret."""

    __slots__ = ("_secret", "fingerprint", "is_test_key", "path")

    def __init__(self, secret: bytes, path: Path, *, is_test_key: bool) -> None:
        self._secret = secret
        self.path = path
        self.is_test_key = is_test_key
        self.fingerprint = hashlib.sha256(secret).hexdigest()[:16]

    def hidden_mix(self, family: str, seed: int) -> str:
        """What a hidden draw's seed mixes in: keyed per (family, seed), so a seed alone reveals nothing."""
        return hmac.new(self._secret, f"{family}|{seed}".encode(), hashlib.sha256).hexdigest()

    def __repr__(self) -> str:  # the secret stays out of every repr, traceback and log line
        return f"EvalKey(fingerprint={self.fingerprint!r}, path={str(self.path)!r})"


def key_path() -> Path:
    """Where the key lives now: ``$AIT_EVAL_KEY_FILE`` if set, else ``~/.config/ait/eval.key``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".config" / "ait" / "eval.key"


def _parse(path: Path, text: str) -> EvalKey:
    lines = [ln.strip() for ln in text.splitlines()]
    is_test = TEST_KEY_MARKER in lines
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(body) != 1:
        raise EvalKeyError(f"{path}: expected one line of hex (the key), found {len(body)} non-comment lines")
    try:
        secret = bytes.fromhex(body[0])
    except ValueError:
        raise EvalKeyError(f"{path}: the key line is not hex") from None
    if len(secret) < 16:
        raise EvalKeyError(f"{path}: the key has {len(secret)} bytes; at least 16 are needed")
    resolved = path.resolve()
    if not is_test and (resolved == _REPO or _REPO in resolved.parents):
        raise EvalKeyError(
            f"{path}: an installation key inside the repository is no secret; move it outside (default "
            f"~/.config/ait/eval.key, or set {ENV_VAR}) and re-freeze baselines (`ait baselines --force`)"
        )
    return EvalKey(secret, path, is_test_key=is_test)


def _create(path: Path) -> None:
    """Write a fresh key atomically; if another process won the race, its key stands."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(
                "# ai-trains-ai installation key: hidden eval sets derive from it. Keep it secret; never commit it.\n"
            )
            f.write(secrets.token_hex(_KEY_BYTES) + "\n")
            f.flush()
            os.fsync(f.fileno())
        # link() fails if the key appeared meanwhile: an existing key is never overwritten.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("eval_key.created at %s (fingerprint only ever shown)", path)


_CACHE: dict[tuple[str, int, int], EvalKey] = {}


def current_key() -> EvalKey:
    """The installation key at :func:`key_path`, created on first use; cached per (path, inode, mtime)."""
    if key_sealed():
        raise EvalKeySealed(
            f"this process is sealed from the installation key ({SEAL_VAR}=1: agent code runs here); "
            "the hidden eval split cannot be built in it"
        )
    path = key_path()
    if not path.exists():
        _create(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise EvalKeyError(f"{path}: cannot read the eval key: {exc.strerror}") from None
    cache_key = (str(path), st.st_ino, st.st_mtime_ns)
    key = _CACHE.get(cache_key)
    if key is None:
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalKeyError(f"{path}: cannot read the eval key: {exc}") from None
        key = _CACHE[cache_key] = _parse(path, text)
        if not key.is_test_key and stat.S_IMODE(st.st_mode) & 0o077:
            log.warning("eval key %s is readable by others (mode %o): chmod 600 it", path, stat.S_IMODE(st.st_mode))
    return key


def key_fingerprint() -> str:
    """The current key's public fingerprint: the first 16 hex digits of its sha256."""
    return current_key().fingerprint
