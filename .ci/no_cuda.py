"""Print uv flags that keep torch and its CUDA-only dependencies out of `uv sync`.

CI installs torch's CPU build from the machine's local wheel instead (see .ci/run), so the several GB of
CUDA wheels that the registry's Linux torch depends on are never downloaded.
"""

import tomllib
from pathlib import Path

lock = tomllib.loads(Path(__file__).resolve().parents[1].joinpath("uv.lock").read_text())
packages = {p["name"]: p for p in lock["package"]}
cuda = ("nvidia-", "cuda-", "triton")
skip, todo = {"torch"}, ["torch"]
while todo:
    entry = packages.get(todo.pop(), {})
    deps = list(entry.get("dependencies", []))
    for extra in entry.get("optional-dependencies", {}).values():
        deps += extra
    for dep in deps:
        name = dep["name"]
        if name.startswith(cuda) and name not in skip:
            skip.add(name)
            todo.append(name)
print(" ".join(f"--no-install-package {name}" for name in sorted(skip)))  # noqa: T201
