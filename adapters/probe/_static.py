"""Static first-line checks on the env package's source (no agent code runs): forbidden imports and file access.

An env must not import this project's packages (``families`` holds the hidden eval generators, ``handlers``
/ ``engine`` / ``events`` / ``adapters`` the engine) and must not read files outside its own package. The
scan parses every ``.py`` file under the env directory with :mod:`ast` and reports each finding as
``path:line: what``. It is deliberately simple: code that builds names or paths at run time passes it, and
the sandbox's filesystem confinement is the real defence.
"""

from __future__ import annotations

import ast
from pathlib import Path, PurePosixPath

from families.source_parse import parse_source

__all__ = ["FORBIDDEN_PACKAGES", "scan_env"]

FORBIDDEN_PACKAGES = ("families", "handlers", "engine", "events", "adapters")
_OPENERS = {"open", "Path", "PurePath", "PosixPath", "listdir", "scandir", "walk", "glob", "iglob", "stat"}
_OPENERS |= {"read_text", "read_bytes", "copy", "copyfile", "copytree", "FileIO", "loadtxt", "fromfile"}
_IMPORTERS = {"import_module", "__import__", "find_spec"}
_MAX_FILES = 500
_CLIMB = "climbs out of the env package with Path(__file__) parents (read only your package's files)"


def _top(name: str | None) -> str:
    return (name or "").split(".", 1)[0]


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _outside(text: str) -> bool:
    """A literal path that leaves the package: absolute, home-relative or climbing with '..'."""
    return text.startswith(("/", "~")) or ".." in PurePosixPath(text).parts


def _parent_climb(node: ast.expr) -> int | None:
    """How many directories ``Path(__file__)...`` climbs above the file's own directory (None: not such a chain)."""
    ups = 0
    while True:
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            ups, node = ups + 1, node.value
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
        ):
            ups, node = ups + node.slice.value + 1, node.value.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("resolve", "absolute")
        ):
            node = node.func.value
        else:
            break
    is_file_path = (
        isinstance(node, ast.Call)
        and _call_name(node) in ("Path", "PurePath", "PosixPath")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "__file__"
    )
    return ups - 1 if is_file_path and ups else None


class _Visitor(ast.NodeVisitor):
    def __init__(self, rel: str, depth: int) -> None:
        self.rel = rel
        self.depth = depth  # directories between the env directory and this file
        self.findings: list[str] = []

    def _add(self, node: ast.AST, what: str) -> None:
        self.findings.append(f"{self.rel}:{getattr(node, 'lineno', 0)}: {what}")

    def _forbidden(self, node: ast.AST, module: str) -> None:
        if _top(module) in FORBIDDEN_PACKAGES:
            self._add(
                node,
                f"imports {module!r}: this project's code is not available to a training env "
                "(generate your tasks in your own package)",
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._forbidden(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._forbidden(node, node.module)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if name in _IMPORTERS and literal is not None:
            self._forbidden(node, literal)
        if name in _OPENERS and literal is not None and _outside(literal):
            self._add(node, f"accesses {literal!r} outside the env package (only files in your package may be read)")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        climb = _parent_climb(node)
        if climb is not None and climb > self.depth:
            self._add(node, _CLIMB)
            return  # one finding per chain
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        climb = _parent_climb(node)
        if climb is not None and climb > self.depth:
            self._add(node, _CLIMB)
            return
        self.generic_visit(node)


def scan_env(workspace: Path, env_path: str) -> tuple[list[str], int]:
    """(findings as ``path:line: what``, files scanned) for every ``.py`` file under ``workspace/env_path``."""
    env_dir = workspace / env_path
    findings: list[str] = []
    files = sorted(p for p in env_dir.rglob("*.py") if p.is_file() and not p.is_symlink())[:_MAX_FILES]
    for path in files:
        rel = path.relative_to(workspace).as_posix()
        try:
            tree = parse_source(path.read_bytes(), rel)
        except SyntaxError as exc:
            findings.append(f"{rel}:{exc.lineno or 0}: syntax error: {exc.msg}")
            continue
        except ValueError as exc:  # null bytes
            findings.append(f"{rel}:0: cannot parse: {exc}")
            continue
        visitor = _Visitor(rel, len(path.relative_to(env_dir).parts) - 1)
        visitor.visit(tree)
        findings += visitor.findings
    return findings, len(files)
