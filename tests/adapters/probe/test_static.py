"""The static scan: project imports and literal file access outside the env package, with file and line."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters.probe import FORBIDDEN_PACKAGES, scan_env


def _env(tmp_path: Path, source: str, rel: str = "env/pkg/__init__.py") -> Path:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return tmp_path


def test_clean_package_has_no_findings(tmp_path: Path) -> None:
    src = "import json\nfrom pathlib import Path\nDATA = Path(__file__).parent / 'data.json'\nopen('rows.txt')\n"
    findings, scanned = scan_env(_env(tmp_path, src), "env")
    assert findings == [] and scanned == 1


def test_every_forbidden_import_form_is_reported_with_its_line(tmp_path: Path) -> None:
    src = (
        "import os\n"
        "import families\n"
        "from handlers.reward.formula import x\n"
        "import engine.log as log\n"
        "importlib.import_module('events.codec')\n"
        "__import__('adapters')\n"
        "from . import sibling\n"
    )
    findings, _ = scan_env(_env(tmp_path, src), "env")
    lines = sorted(int(f.split(":")[1]) for f in findings)
    assert lines == [2, 3, 4, 5, 6]
    assert all(f.startswith("env/pkg/__init__.py:") for f in findings)


def test_literal_paths_outside_the_package_are_reported(tmp_path: Path) -> None:
    src = "open('/etc/passwd')\nPath('~/.ssh/id_rsa').read_text()\nopen('../job.toml')\nos.listdir('/work')\n"
    findings, _ = scan_env(_env(tmp_path, src), "env")
    assert [int(f.split(":")[1]) for f in findings] == [1, 2, 3, 4]


def test_climbing_out_with_file_parents_is_reported(tmp_path: Path) -> None:
    src = (
        "from pathlib import Path\n"
        "OK = Path(__file__).parent.parent / 'x'\n"  # env/ itself: inside the env package directory
        "BAD = Path(__file__).resolve().parents[2] / 'families'\n"
        "ALSO = Path(__file__).parent.parent.parent\n"
    )
    findings, _ = scan_env(_env(tmp_path, src), "env")
    assert [int(f.split(":")[1]) for f in findings] == [3, 4]


def test_syntax_errors_are_findings_not_crashes(tmp_path: Path) -> None:
    findings, _ = scan_env(_env(tmp_path, "def broken(:\n"), "env")
    assert len(findings) == 1 and "syntax error" in findings[0]


@given(st.sampled_from(FORBIDDEN_PACKAGES), st.sampled_from(["", ".sub", ".a.b"]))
def test_any_forbidden_module_path_is_caught(package: str, suffix: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        findings, _ = scan_env(_env(Path(tmp), f"import {package}{suffix}\n"), "env")
    assert len(findings) == 1 and f"'{package}{suffix}'" in findings[0]


@given(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4))
def test_relative_paths_inside_the_package_never_flagged(parts: list[str]) -> None:
    import tempfile

    literal = "/".join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        findings, _ = scan_env(_env(Path(tmp), f"open({literal!r})\nopen('/' + {literal!r})\n"), "env")
    assert findings == []  # a literal relative path is fine; a path built at run time is the sandbox's job
