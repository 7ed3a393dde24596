"""The inner trainer on a GPU pod: a job -> a prime-rl ``rl`` run, then hidden-eval scoring with vLLM.

- :mod:`.pins`: the pinned prime-rl / verifiers / vLLM revisions (one place).
- :mod:`.config`: ``[prime_rl]`` + ``[env]`` + task spec -> a complete ``rl`` TOML (refusing bad combinations).
- :mod:`.runner`: :class:`PrimeRLRunner`, the ``InnerTrainer`` port: install the env, dry run, train with
  progress, classify failures, enforce the time budget, then score in a separate phase.
- :mod:`.procgroup`, :mod:`.progress`, :mod:`.classify`: process groups, log following, failure reasons.
- :mod:`.bootstrap`: the pod bootstrap script for the pinned revisions.

This package's ``__init__`` imports nothing heavy: :mod:`adapters.vllm` uses :mod:`.procgroup`.
"""
