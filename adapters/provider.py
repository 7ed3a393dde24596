"""The compute-provider port, as adapters see it. It is defined in :mod:`handlers.provider_port` (the domain
owns its ports; adapters implement them) and re-exported here for the providers' convenience."""

from __future__ import annotations

from handlers.provider_port import *  # noqa: F403
from handlers.provider_port import __all__ as __all__
