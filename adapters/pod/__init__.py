"""The pod agent: the small authenticated HTTP service that runs inner-training jobs on a pod (or locally).

- :mod:`.core`: the job manager (idempotent submission, one job at a time, progress stream with cursors)
- :mod:`.server`: the aiohttp service (bearer token on every endpoint)
- :mod:`.client`: the controller's httpx client (:class:`HttpPodAgent`)
- :mod:`.inproc`: agents in this process, for the simulated provider and tests
- :mod:`.trainers`: inner trainers by name (``--trainer standin``); :mod:`.standin` is the demo trainer
- :mod:`.tokens`: per-pod tokens derived from a per-run secret

Import the submodule you need: this package imports nothing heavy on its own (the agent starts fast).
"""

from __future__ import annotations
