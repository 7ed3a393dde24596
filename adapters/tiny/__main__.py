"""``python -m adapters.tiny --model tiny-0.6b --port 0``: serve a tiny checkpoint (see :mod:`.server`)."""

from __future__ import annotations

from .server import main

raise SystemExit(main())
