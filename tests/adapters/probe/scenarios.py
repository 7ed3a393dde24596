"""Workspaces for the probe tests: the good calc_chain env, and targeted or hostile variants of it.

Every variant starts from ``workspaces/good_calc`` (a valid submission for ``calc_chain_v1_fast``) and
changes one thing: code inserted in the env module (runs at import time; ``early`` puts it before the
module's ``import verifiers``, so with ``preimport=False`` a test does not pay that import), a text
replacement in it, or another job.toml. Hostile code reports what each attempt achieved by raising
``PROBE-RESULT {json}`` at import, so the outcome shows up in the ``env_import`` check's detail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

GOOD = Path(__file__).parent / "workspaces" / "good_calc"
MODULE = "env/calc_chain_train/__init__.py"
SPEC = Path(__file__).resolve().parents[3] / "examples" / "tasks" / "calc_chain_v1_fast.json"
PROJECT = Path(__file__).resolve().parents[3]
FAKE_KEY = "sk-probe-test-FAKE-0123456789abcdef"


def make_workspace(
    root: Path,
    name: str,
    *,
    prelude: str = "",
    early: bool = False,
    replace: dict[str, str] | None = None,
    job: str | None = None,
) -> Path:
    """A copy of the good workspace; ``prelude`` runs at import, before verifiers is imported when ``early``."""
    ws = root / name
    shutil.copytree(GOOD, ws, ignore=shutil.ignore_patterns("__pycache__"))
    module = ws / MODULE
    text = module.read_text()
    for old, new in (replace or {}).items():
        assert old in text, f"scenario {name}: {old!r} not in the good env"
        text = text.replace(old, new)
    if prelude:
        anchor = "from __future__ import annotations\n" if early else "from pydantic import Field\n"
        text = text.replace(anchor, anchor + "\n" + prelude + "\n", 1)
    module.write_text(text)
    if job is not None:
        (ws / "job.toml").write_text(job)
    return ws


def probe_result(detail: str) -> dict[str, str]:
    """The JSON a hostile env raised at import, out of a check's detail."""
    start = detail.index("PROBE-RESULT ") + len("PROBE-RESULT ")
    return dict(json.JSONDecoder().raw_decode(detail[start:])[0])


# --- hostile code (import time) -----------------------------------------------------------------------


def exfiltrate(*, port: int, outside: Path, original_ws: Path, key: Path, rundir: Path) -> str:
    """Try every way out at once; each attempt's outcome goes into the raised PROBE-RESULT."""
    return f"""
import json as _j, os as _os, socket as _s, sys as _sys
_r = {{}}
def _try(name, fn):
    try:
        _r[name] = "OK:" + repr(fn())[:120]
    except BaseException as e:
        _r[name] = "ERR:" + type(e).__name__ + ":" + str(e)[:80]
_try("internet", lambda: _s.create_connection(("1.1.1.1", 53), timeout=3))
_try("host_loopback", lambda: _s.create_connection(("127.0.0.1", {port}), timeout=3).recv(100))
_try("write_outside", lambda: open({str(outside)!r}, "w").write("pwned"))
_try("write_original_ws", lambda: open({str(original_ws / "pwned.txt")!r}, "w").write("pwned"))
_try("env_key", lambda: _os.environ["OPENAI_API_KEY"])
_try("env_names", lambda: sorted(_os.environ))
_try("proc1_environ", lambda: open("/proc/1/environ", "rb").read())
_try("ppid_environ", lambda: open("/proc/%d/environ" % _os.getppid(), "rb").read())
_try("read_key", lambda: open({str(key)!r}).read())
_try("read_rundir", lambda: _os.listdir({str(rundir)!r}))
_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != "_Hidden"]  # undo the driver's name block
_try("import_families", lambda: (_sys.path.insert(0, {str(PROJECT)!r}), __import__("fam" + "ilies").__file__)[1])
_try("read_project", lambda: open({str(PROJECT / "families" / "_sets.py")!r}).read(40))
_try("big_file", lambda: open(_os.path.join(_os.environ.get("TMPDIR", "/tmp"), "big"), "wb").write(b"0" * (40 << 20)))
_try("uid", lambda: _os.getuid())
_try("caps", lambda: [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "NoNewPrivs"))])
raise RuntimeError("PROBE-RESULT " + _j.dumps(_r))
"""


FORK_BOMB = """
import os as _os
while True:
    try:
        _os.fork()
    except OSError:
        pass
"""

MEMORY_HOG = """
_hog = []
while True:
    _hog.append(bytearray(16 << 20))
"""

IMPORT_LOOP = """
while True:
    pass
"""

IMPORT_CRASH = """
import os as _os
_os._exit(3)
"""

REWARD_LOOP = {
    '        found = _ANSWER.findall(trace.last_reply or "")': "        while True:\n            pass\n"
    '        found = _ANSWER.findall(trace.last_reply or "")'
}

# --- targeted bad envs (one check each) ----------------------------------------------------------------

IMPORTS_FAMILIES = "from families import get_family  # the hidden eval's generator\n"

TWO_TASKSETS = {
    '__all__ = ["CalcTaskset"]': (
        'class OtherTaskset(CalcTaskset):\n    pass\n\n\n__all__ = ["CalcTaskset", "OtherTaskset"]'
    )
}

PREFIXED_TOOLS = {"    TOOL_PREFIX = None  # bare names, as in the hidden eval\n": ""}

CONSTANT_REWARD = {
    '        found = _ANSWER.findall(trace.last_reply or "")': "        return 1.0\n"
    '        found = _ANSWER.findall(trace.last_reply or "")'
}


def hidden_tasks_env(prompts_answers: list[tuple[str, str]]) -> dict[str, str]:
    """load() returns these (hidden) tasks only: too few, and each one a hidden eval item."""
    body = (
        "    def load(self) -> list[CalcTask]:\n"
        f"        rows = {prompts_answers!r}\n"
        "        return [CalcTask(CalcData(prompt=p, answer=a), self.config.task) for p, a in rows]\n"
        "\n"
        "    def _unused_load(self) -> list[CalcTask]:\n"
    )
    return {"    def load(self) -> list[CalcTask]:\n": body}
