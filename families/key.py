"""The installation key's public face: what code outside ``families`` may use of :mod:`families._key`.

(``_key`` itself stays one self-contained module: it is vendored into eval packages.)
"""

from __future__ import annotations

from ._key import ENV_VAR, SEAL_VAR, EvalKeyError, EvalKeySealed, current_key, key_fingerprint, key_path, key_sealed

__all__ = [
    "ENV_VAR",
    "SEAL_VAR",
    "EvalKeyError",
    "EvalKeySealed",
    "current_key",
    "key_fingerprint",
    "key_path",
    "key_sealed",
]
