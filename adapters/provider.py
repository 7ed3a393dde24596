"""The compute-provider port, as adapters see it. It is defined in :mod:`handlers.ports.provider` (the domain
owns its ports; adapters implement them) and re-exported here for the providers' convenience."""

from __future__ import annotations

from handlers.ports.provider import *  # noqa: F403
from handlers.ports.provider import __all__ as __all__
