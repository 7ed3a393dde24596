"""``python -m engine.cli ...`` runs ``ait ...`` (how local pods start ``ait pod-agent`` with this interpreter)."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
