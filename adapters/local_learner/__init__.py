"""The local learner: the outer loop's LoRA trainer on this machine (``[backend] kind = "local"``), with no
Tinker account: peft + torch on a Qwen3-architecture model, on the GPU when there is one, else the CPU.

- :mod:`.losses`: Tinker's policy-gradient losses (``importance_sampling``, ``ppo``, ``cispo``) in torch;
- :mod:`.lora`: the base model, the adapter (Tinker's shape: all linear layers, alpha 32), merging it;
- :mod:`.checkpoint`: sampler weights and resumable state (adapter + Adam) under the run directory;
- :mod:`.learner`: :class:`~.learner.LocalLearner`, the ``LearnerPort``;
- :mod:`.sampler`: the sampler server (the project's OpenAI-compatible server) serving each published sampler
  version, and :class:`~.sampler.LocalPolicy`, the agent policy that samples from it.

Nothing here is imported by ``ait --help``: torch and peft load only when a run builds this backend.
"""

from __future__ import annotations
