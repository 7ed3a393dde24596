"""Port contract suites: one abstract test case per port, subclassed once per implementation.

The model is the ``eventsourcing`` library's recorder test case: the abstract class holds the tests, which
state what the port promises; a subclass supplies only the factory (and the few arrangements the tests need,
such as a request this implementation refuses) and inherits every test. The abstract classes are not named
``Test*``, so pytest collects only the subclasses.

- :mod:`.provider_contract` -- ``handlers.ports.provider.Provider``
- :mod:`.inner_trainer_contract` -- ``handlers.ports.inner_trainer.InnerTrainer``
- :mod:`.learner_contract` -- ``handlers.ports.learner.LearnerPort``
- :mod:`.policy_contract` -- ``handlers.ports.policy.AgentPolicy`` (the trainer agent's policy)

Subclasses live in ``tests/contracts/test_*.py``, except where an implementation's own test package holds the
fixtures it needs: ``tests/adapters/prime_rl/test_contract.py``, and ``tests/adapters/cpu_trainer/test_trainer.py``
(where the CPU trainer's one training job is shared with the trainer's own test).
"""

import pytest

# The contracts' asserts sit in these (non-test) modules: have pytest rewrite them, so a failure shows its values.
pytest.register_assert_rewrite(
    "tests.contracts.inner_trainer_contract",
    "tests.contracts.learner_contract",
    "tests.contracts.policy_contract",
    "tests.contracts.provider_contract",
)
