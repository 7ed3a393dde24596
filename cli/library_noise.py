"""The libraries' console noise (weight-loading bars, info lines), hidden for the commands that load models.

``ait episode`` and ``ait baselines`` show their own bars and summaries; transformers, huggingface_hub and tqdm
would draw theirs beside them. ``-v`` keeps everything.
"""

from __future__ import annotations

__all__ = ["quiet_libraries"]


def quiet_libraries(verbose: bool = False) -> None:
    """Silence the libraries' progress bars and info chatter on the console (``verbose`` keeps them)."""
    import os

    if verbose:
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TQDM_DISABLE", "1")
    import sys

    if "transformers" in sys.modules:  # already imported: its settings were read at import time
        from transformers.utils import logging as tf_logging

        tf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        tf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
