"""``python -m cli ...`` runs ``ait ...`` (how local pods start ``ait pod-agent`` with this interpreter)."""

from __future__ import annotations

import sys

from cli import main

sys.exit(main())
