"""The hidden-eval package builder, without importing verifiers: files, determinism, vendoring."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec
import pytest

import families
from families import FAMILIES, Task, get_family, hidden_tasks
from families.eval_env import (
    VendorError,
    build_eval_package,
    package_files,
    toolset_files,
    vendor_family,
)

FAMILIES_DIR = Path(families.__file__).parent


def available() -> list[str]:
    out = []
    for name in FAMILIES:
        try:
            get_family(name)
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


@pytest.fixture(scope="module")
def calc_files() -> tuple[dict[str, str], object]:
    return package_files("calc_chain")


def test_same_inputs_same_bytes_and_fingerprint(calc_files: tuple[dict[str, str], object]) -> None:
    files, info = calc_files
    again, info2 = package_files("calc_chain")
    assert again == files and info2 == info
    manifest = json.loads(files["ait_eval_calc_chain/manifest.json"])
    assert manifest["fingerprint"] == info.fingerprint  # type: ignore[attr-defined]
    assert manifest["tasks"] == 200 and manifest["env_id"] == "ait-eval-calc-chain"


def test_fingerprint_changes_with_the_tasks() -> None:
    tasks = list(hidden_tasks(get_family("calc_chain")))[:3]
    _, base = package_files("calc_chain", tasks)
    changed = [*tasks[:2], msgspec.structs.replace(tasks[2], answer=tasks[2].answer + "0")]
    _, other = package_files("calc_chain", changed)
    assert base.fingerprint != other.fingerprint


@pytest.mark.parametrize("name", available())
def test_bundled_tasks_are_the_hidden_set(name: str) -> None:
    files, info = package_files(name)
    module = f"ait_eval_{name}"
    lines = files[f"{module}/tasks.jsonl"].splitlines()
    bundled = [msgspec.json.decode(line, type=Task) for line in lines]
    assert bundled == list(hidden_tasks(get_family(name)))
    # Byte for byte, key order included: tools may render a world dict in its order.
    assert lines == [msgspec.json.encode(t).decode() for t in hidden_tasks(get_family(name))]
    assert info.tasks == len(bundled) == 200
    # The generated modules are valid Python and never import the project.
    for path, text in files.items():
        if path.endswith(".py"):
            tree = ast.parse(text, filename=path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    assert (node.module or "").split(".")[0] != "families", path
                if isinstance(node, ast.Import):
                    assert all(a.name.split(".")[0] != "families" for a in node.names), path


def test_vendored_sources_are_copies_of_the_project_files(calc_files: tuple[dict[str, str], object]) -> None:
    files, _ = calc_files
    vendored = {p.removeprefix("ait_eval_calc_chain/_family/"): t for p, t in files.items() if "/_family/" in p}
    assert "calc_chain.py" in vendored and "_base.py" in vendored
    for rel, text in vendored.items():
        if rel == "__init__.py":
            assert text != (FAMILIES_DIR / "__init__.py").read_text()  # a stub, not the registry
            continue
        assert text == (FAMILIES_DIR / rel).read_text(), rel
    # Only what the family module imports, transitively: no other family comes along.
    assert not any(other + ".py" in vendored for other in FAMILIES if other != "calc_chain")


def test_requirements_and_pyproject(calc_files: tuple[dict[str, str], object]) -> None:
    files, info = calc_files
    assert info.requirements == ["verifiers", "msgspec>=0.19"]  # type: ignore[attr-defined]
    pyproject = files["pyproject.toml"]
    assert 'name = "ait-eval-calc-chain"' in pyproject and 'packages = ["ait_eval_calc_chain"]' in pyproject
    _, pinned = package_files("calc_chain", verifiers_requirement="verifiers==0.4.0")
    assert pinned.requirements[0] == "verifiers==0.4.0"


def test_build_writes_and_replaces_the_directory(tmp_path: Path) -> None:
    tasks = list(hidden_tasks(get_family("calc_chain")))[:4]
    info = build_eval_package("calc_chain", tmp_path, tasks)
    root = Path(info.path)
    assert root == tmp_path / "ait-eval-calc-chain"
    (root / "stale.txt").write_text("left over")
    info = build_eval_package("calc_chain", tmp_path, tasks)
    files, _ = package_files("calc_chain", tasks)
    on_disk = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
    assert on_disk == files
    assert [p.name for p in tmp_path.iterdir()] == ["ait-eval-calc-chain"]  # no staging dirs left


def test_bad_task_lists_are_refused() -> None:
    tasks = list(hidden_tasks(get_family("calc_chain")))[:2]
    with pytest.raises(ValueError, match="no tasks"):
        package_files("calc_chain", [])
    with pytest.raises(ValueError, match="duplicate task ids"):
        package_files("calc_chain", [tasks[0], tasks[0]])
    with pytest.raises(ValueError, match="other families"):
        package_files("calc_chain", [msgspec.structs.replace(tasks[0], family="ledger")])


def test_toolset_files_for_another_package() -> None:
    files, path = toolset_files("ledger", "my_env")
    assert path == "my_env.toolset.LedgerTools"
    assert {"toolset.py", "_runtime.py", "_family/ledger.py"} <= set(files)
    assert "class LedgerTools(FamilyTools)" in files["toolset.py"]
    for tool in ("get_balance", "deposit", "withdraw", "transfer"):
        assert f"    def {tool}(self" in files["toolset.py"]


def fake_package(tmp_path: Path, modules: dict[str, str]) -> Path:
    root = tmp_path / "families"
    for rel, text in {"__init__.py": "", **modules}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_vendoring_follows_relative_imports_into_subpackages(tmp_path: Path) -> None:
    root = fake_package(
        tmp_path,
        {
            "fam.py": "from .sub.tools import f\nfrom . import helper\nimport msgspec\n",
            "helper.py": "import json\n",
            "sub/__init__.py": "",
            "sub/tools.py": "from .._base import X\n",
            "_base.py": "X = 1\n",
            "unrelated.py": "",
        },
    )
    vendored = vendor_family("families.fam", "Fam", root=root)
    assert set(vendored.files) == {
        "_family/__init__.py",
        "_family/fam.py",
        "_family/helper.py",
        "_family/sub/__init__.py",
        "_family/sub/tools.py",
        "_family/_base.py",
    }
    assert vendored.module == "_family.fam" and vendored.requirements == ["msgspec>=0.19"]


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("import json\nfrom families._base import X\n", "families/fam.py:2: absolute import from 'families._base'"),
        ("import families.x\n", "families/fam.py:1: absolute import of 'families.x'"),
        ("import numpy as np\n", "families/fam.py:1: imports 'numpy'"),
        ("from . import NAME\n", "imports families.NAME, which is not a module file"),
        ("from .. import up\n", "families/fam.py:1: relative import reaches above"),
    ],
)
def test_vendoring_errors_name_file_and_line(tmp_path: Path, source: str, needle: str) -> None:
    root = fake_package(tmp_path, {"fam.py": source})
    with pytest.raises(VendorError) as info:
        vendor_family("families.fam", "Fam", root=root)
    assert needle in str(info.value)
