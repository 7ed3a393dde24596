"""Tinker behind small ports: the SDK-shaped client protocols (``port``), the learner (``learner``), the
renderer (``renderer``), the trainable agent policy (``policy``) and the one place that builds a real
``tinker.ServiceClient`` (``service``). Tests fake at ``port`` (tests/fakes/tinker.py) with real
``tinker.types`` objects; no real client is ever constructed in tests.
"""

from __future__ import annotations
