"""Publishing to the Hugging Face Hub: one commit that creates (or updates) a model repository.

Every file goes in one ``create_commit`` (the repository is created first if it does not exist), so a reader of
the repository never sees half a checkpoint. The token comes from the caller (``HF_TOKEN``) and is never logged;
``endpoint`` points the client at another Hub (the tests' local stub).
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi

__all__ = ["publish_files"]


def publish_files(
    files: dict[str, Path | bytes], *, repo_id: str, token: str, endpoint: str | None = None, private: bool = True
) -> str:
    """Create ``repo_id`` if needed and commit ``files`` (path in repo -> local file or bytes); returns its URL."""
    api = HfApi(endpoint=endpoint, token=token, library_name="ai-trains-ai")
    url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    operations = [
        CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(src) if isinstance(src, Path) else src)
        for name, src in sorted(files.items())
    ]
    api.create_commit(repo_id, operations, commit_message="ait publish", repo_type="model")
    return str(url)
