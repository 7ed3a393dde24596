"""Stand-in executables for the vLLM scoring tests."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STANDINS = ROOT / "fixtures" / "prime_rl" / "standins"
VLLM = (sys.executable, str(STANDINS / "vllm.py"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
