"""Writing a family's hidden-eval package: names, files, fingerprint, and the directory itself.

The output is a pure function of the family source and the tasks: the same inputs give the same
bytes (tasks are encoded in the generators' deterministic order, files are written in a fixed order), and the
``manifest.json`` fingerprint is a sha256 over every other file, so two pods scoring with packages of
equal fingerprint run exactly the same code on exactly the same tasks.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import msgspec

from .._base import Task
from ._render import (
    Names,
    ToolSignature,
    render_init,
    render_pyproject,
    render_readme,
    render_taskset,
    render_toolset,
    tool_signatures,
)
from ._vendor import VendorError, vendor_family

__all__ = ["EvalPackage", "build_eval_package", "package_files", "package_names", "toolset_files"]

# Bumped when the generated layout changes, so the fingerprint changes with it.
LAYOUT_VERSION = 1
# Insertion order, NOT sorted keys: some tools render a world dict in its order (multi_hop's
# lookup_person), so sorting would change what the model sees. The generators' order is deterministic.
_TASK_ENCODER = msgspec.json.Encoder()


class EvalPackage(msgspec.Struct, frozen=True, kw_only=True):
    """What was written: where, under which names, and its fingerprint."""

    path: str  # the project directory (holds pyproject.toml)
    family: str
    env_id: str  # what `vf-eval` / `env.taskset.id` take
    module: str
    taskset_class: str
    toolset_class: str
    tasks: int
    fingerprint: str
    requirements: list[str]


def package_names(family_name: str, family_cls: type, task_type: type) -> Names:
    camel = "".join(part.capitalize() for part in family_name.split("_"))
    return Names(
        family=family_name,
        dist=f"ait-eval-{family_name.replace('_', '-')}",
        module=f"ait_eval_{family_name}",
        camel=camel,
        family_module="_family." + family_cls.__module__.removeprefix("families."),
        family_class=family_cls.__name__,
        task_module="_family." + task_type.__module__.removeprefix("families."),
        task_class=task_type.__name__,
    )


def _fingerprint(files: dict[str, str]) -> str:
    digest = hashlib.sha256(f"layout {LAYOUT_VERSION}\n".encode())
    for path in sorted(files):
        data = files[path].encode()
        digest.update(f"{path}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def _support_files(names: Names, vendored: dict[str, str], signatures: list[ToolSignature]) -> dict[str, str]:
    """The vendored family, the runtime and the toolset module, relative to the package directory."""
    files = dict(vendored)
    files["_runtime.py"] = (Path(__file__).parent / "_pkg_runtime.py").read_text()
    files["toolset.py"] = render_toolset(names, signatures)
    return files


def toolset_files(family_name: str, module: str) -> tuple[dict[str, str], str]:
    """The family's tools as a ``vf.Toolset`` for another package (an agent-facing template env).

    Returns (files relative to the directory of package ``module``, the toolset's dotted class
    path). The files are ``toolset.py``, ``_runtime.py`` (whose ``FamilyTask`` puts a task into the
    rollout state, as the tools need) and the vendored family source under ``_family/``. Note that
    the vendored source includes the family's generator: whoever places it in an agent workspace
    decides whether that is acceptable for the hidden split.
    """
    from .. import get_family

    family = get_family(family_name)
    vendored = vendor_family(type(family).__module__, type(family).__name__)
    sample = family.generate("dev", 0)
    names = msgspec.structs.replace(package_names(family_name, type(family), type(sample)), module=module)
    signatures = tool_signatures(family.tools(sample).functions())
    return _support_files(names, vendored.files, signatures), f"{module}.toolset.{names.toolset_class}"


def package_files(
    family_name: str,
    tasks: Sequence[Task] | None = None,
    *,
    verifiers_requirement: str = "verifiers",
) -> tuple[dict[str, str], EvalPackage]:
    """Every file of the package (path relative to the project dir -> text) and its description.

    ``tasks`` defaults to the family's hidden eval set. ``verifiers_requirement`` is deliberately
    unpinned by default: a pod installs the package into prime-rl's venv, whose verifiers must not
    be replaced (install with ``--no-deps`` there).
    """
    from .. import SYSTEM_PROMPT, get_family, hidden_tasks

    family = get_family(family_name)
    task_list = list(tasks) if tasks is not None else list(hidden_tasks(family))
    if not task_list:
        raise ValueError(f"{family_name}: no tasks to bundle")
    ids = [t.id for t in task_list]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{family_name}: duplicate task ids in the bundled tasks")
    foreign = sorted({t.family for t in task_list} - {family_name})
    if foreign:
        raise ValueError(f"{family_name}: tasks of other families given: {foreign}")

    vendored = vendor_family(type(family).__module__, type(family).__name__)
    names = package_names(family_name, type(family), type(task_list[0]))
    task_file = f"{names.task_module.replace('.', '/')}.py"
    if task_file not in vendored.files:
        raise VendorError(f"{family_name}: the Task struct's module {names.task_module} was not vendored")
    signatures = tool_signatures(family.tools(task_list[0]).functions())
    system_prompt = getattr(family, "system_prompt", None) or SYSTEM_PROMPT
    requirements = [verifiers_requirement, *vendored.requirements]

    mod = names.module
    files = {f"{mod}/{path}": source for path, source in _support_files(names, vendored.files, signatures).items()}
    files[f"{mod}/taskset.py"] = render_taskset(names, system_prompt)
    files[f"{mod}/__init__.py"] = render_init(names)
    files[f"{mod}/tasks.jsonl"] = "".join(_TASK_ENCODER.encode(t).decode() + "\n" for t in task_list)
    files["pyproject.toml"] = render_pyproject(names, requirements)
    files["README.md"] = render_readme(names, len(task_list), requirements)
    fingerprint = _fingerprint(files)
    info = EvalPackage(
        path="",
        family=family_name,
        env_id=names.dist,
        module=mod,
        taskset_class=names.taskset_class,
        toolset_class=names.toolset_class,
        tasks=len(task_list),
        fingerprint=fingerprint,
        requirements=requirements,
    )
    manifest = msgspec.structs.asdict(info)
    del manifest["path"]
    files[f"{mod}/manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return files, info


def build_eval_package(
    family_name: str,
    out_dir: Path,
    tasks: Sequence[Task] | None = None,
    *,
    verifiers_requirement: str = "verifiers",
) -> EvalPackage:
    """Write the package project to ``out_dir/<env id>/`` (replacing any previous one) and describe it.

    The directory holds the hidden tasks and their answers: ``out_dir`` must never be inside an
    agent workspace.
    """
    files, info = package_files(family_name, tasks, verifiers_requirement=verifiers_requirement)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / info.env_id
    # Write next to the target and swap in, so a reader never sees a half-written package.
    staging = Path(tempfile.mkdtemp(prefix=f".{info.env_id}-", dir=out_dir))
    try:
        for rel in sorted(files):
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[rel], encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return msgspec.structs.replace(info, path=str(target))
