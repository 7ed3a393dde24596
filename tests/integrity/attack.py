"""One hostile env prelude that tries every route at once, and the engine-side targets it aims at.

The same code runs three ways: as a plain child of the test process (the *control*: it must reach every
target, which proves each target exists and is reachable without the sandbox), inside the validation probe,
and inside the CPU trainer's training child. Each route records ``OK:<what it got>`` or ``ERR:<exception>``;
the probe variant raises them (they come back in the ``env_import`` check), the others print them to stderr
after a ``REDTEAM`` marker.

Routes: the key at its real path, a planted 0600 key outside the repository and the one under ``$HOME``;
rebuilding the hidden set with the key's path set and the seal cleared; importing the project's ``families``
after editing ``sys.path`` and ``sys.meta_path``; writing into the project tree, ``$HOME`` and the host's
``/tmp``; a unix socket on the host filesystem; another process's ``/proc/<pid>/environ`` (an engine-like
process holding an API key) and the parent's; a fork bomb (up to 400 children); reserving far more address
space than the limit; the engine's secrets in its own environment; a ``setsid`` daemon that ignores SIGTERM and
writes once its parent is gone. The endless loop has scenarios of its own (it cannot share a process).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
FAKE_SECRET = "sk-redteam-" + "9" * 24
FORKS = 400
RESERVE = 64 << 30  # address space the memory route reserves (never touched): above every child's RLIMIT_AS

_ATTACK = r'''
import importlib as _il, json as _j, mmap as _mm, os as _os, signal as _sig, socket as _so, sys as _sys
import time as _t
_T = _j.loads(__TARGETS__)
_r = {}


def _try(name, fn):
    try:
        _r[name] = "OK:" + repr(fn())[:100]
    except BaseException as e:
        _r[name] = "ERR:" + type(e).__name__ + ":" + str(e)[:90]


def _read(p):
    with open(p) as f:
        return f.read()[:80]


def _write(p):
    with open(p, "w") as f:
        f.write("planted by the red team")
    return p


def _project_families():
    """The project's own families package, after removing the probe's import blocker."""
    saved = dict(_sys.modules), list(_sys.path), list(_sys.meta_path)
    try:
        _sys.path.insert(0, _T["project"])
        _sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != "_Hidden"]
        for k in [k for k in _sys.modules if k == "families" or k.startswith("families.")]:
            del _sys.modules[k]
        fam = _il.import_module("families")
        return fam, saved
    except BaseException:
        _restore(saved)
        raise


def _restore(saved):
    mods, path, meta = saved
    for k in [k for k in _sys.modules if k == "families" or k.startswith("families.")]:
        del _sys.modules[k]
    _sys.modules.update({k: v for k, v in mods.items() if k == "families" or k.startswith("families.")})
    _sys.path[:] = path
    _sys.meta_path[:] = meta


def _import_families():
    fam, saved = _project_families()
    _restore(saved)
    return fam.__file__


def _regen_hidden():
    env = dict(_os.environ)
    _os.environ["AIT_EVAL_" + "KEY_FILE"] = _T["key_real"]
    _os.environ.pop("AIT_EVAL_" + "KEY_SEALED", None)
    fam, saved = _project_families()
    try:
        return fam.hidden_tasks(fam.get_family("calc_chain"))[0].prompt
    finally:
        _restore(saved)
        _os.environ.clear()
        _os.environ.update(env)


def _socket():
    s = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(_T["socket"])
        s.sendall(b"hello from the sandbox\n")
        return s.recv(64).decode()
    finally:
        s.close()


def _environ(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        data = f.read()
    return ("SECRET-FOUND" if _T["secret"].encode() in data else "no-secret") + " (%d bytes)" % len(data)


def _forks():
    kids = []
    try:
        for _ in range(_T["forks"]):
            pid = _os.fork()
            if pid == 0:
                _t.sleep(60)
                _os._exit(0)
            kids.append(pid)
        return len(kids)
    except OSError as e:
        return "%d then %s" % (len(kids), e.strerror)
    finally:
        for k in kids:
            _os.kill(k, 9)
        for k in kids:
            _os.waitpid(k, 0)


def _reserve():
    m = _mm.mmap(-1, _T["reserve"], flags=_mm.MAP_PRIVATE | _mm.MAP_ANONYMOUS | getattr(_mm, "MAP_NORESERVE", 0x4000))
    m.close()
    return _T["reserve"]


def _daemon(targets):
    main = _os.getpid()
    first = _os.fork()
    if first == 0:
        _os.setsid()
        if _os.fork() == 0:
            _sig.signal(_sig.SIGTERM, _sig.SIG_IGN)
            _null = _os.open("/dev/null", _os.O_RDWR)
            for _fd in (0, 1, 2):  # let go of the parent's pipes, as a daemon does
                _os.dup2(_null, _fd)
            while True:  # until the process that started it is gone: from then on the engine is scoring
                try:
                    _os.kill(main, 0)
                except ProcessLookupError:
                    break
                _t.sleep(0.05)
            _t.sleep(1.0)
            for p in targets:
                try:
                    _write(p)
                except OSError:
                    pass
            _os._exit(0)
        _os._exit(0)
    _os.waitpid(first, 0)
    return "started"


_try("env_secret", lambda: _os.environ["OPENAI_API_" + "KEY"])
_try("env_key_file", lambda: _os.environ.get("AIT_EVAL_" + "KEY_FILE", "unset"))
_try("key_real", lambda: _read(_T["key_real"]))
_try("key_planted", lambda: _read(_T["key_planted"]))
_try("key_home", lambda: _read(_T["key_home"]))
_try("import_families", _import_families)
_try("regen_hidden", _regen_hidden)
_try("write_project", lambda: _write(_T["write_project"]))
_try("write_home", lambda: _write(_T["write_home"]))
_try("write_tmp", lambda: _write(_T["write_tmp"]))
_try("unix_socket", _socket)
_try("proc_environ", lambda: _environ(_T["decoy_pid"]))
_try("parent_environ", lambda: _environ(_os.getppid()))
_try("fork_bomb", _forks)
_try("memory_hog", _reserve)
_late = list(_T["daemon"])
if _T["daemon_to_out"]:  # the CPU trainer's child: also where the trainer reads its outputs
    _late.append(_os.path.join(_j.load(open(_sys.argv[-1]))["out_dir"], "late_write"))
_try("setsid_daemon", lambda: _daemon(_late))
'''


@dataclass
class Host:
    """The engine side: every target exists and is reachable from here (``prove_reachable`` checks it)."""

    root: Path
    decoy: subprocess.Popen[bytes] = field(init=False)
    connections: list[bytes] = field(default_factory=list)
    key_planted: Path = field(init=False)
    home: Path = field(init=False)
    socket_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        key_dir = self.home / ".config" / "ait"
        key_dir.mkdir(parents=True, mode=0o700)
        (key_dir / "eval.key").write_text("ab" * 32 + "\n")
        (key_dir / "eval.key").chmod(0o600)
        planted_dir = self.root / "keys"
        planted_dir.mkdir(mode=0o700)
        self.key_planted = planted_dir / "install.key"
        self.key_planted.write_text("cd" * 32 + "\n")
        self.key_planted.chmod(0o600)
        # The socket is open to every uid, and its folder can be crossed by every uid: on a root host whose Python
        # is not private to root, the no-sandbox fallback drops the child to another uid, and a 0700 folder
        # (mkdtemp's) closed the route there, so the control run saw it closed for a reason that is not the sandbox.
        self.root.chmod(0o711)
        self.socket_path = self.root / "host.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.socket_path))
        self.socket_path.chmod(0o777)
        server.listen(8)
        self._server = server
        threading.Thread(target=self._serve, daemon=True).start()
        # An engine-like process whose environment holds an API key (its /proc/<pid>/environ is the target).
        env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": FAKE_SECRET}
        self.decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], env=env)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.connections.append(conn.recv(64))
                    conn.sendall(b"host-service\n")
                except OSError:
                    pass

    @property
    def key_real(self) -> Path:
        return Path(os.environ["AIT_EVAL_KEY_FILE"]).resolve()

    def targets(self, tag: str, *, daemon_to_out: bool = False) -> dict[str, Any]:
        return {
            "project": str(PROJECT),
            "key_real": str(self.key_real),
            "key_planted": str(self.key_planted),
            "key_home": str(self.home / ".config" / "ait" / "eval.key"),
            "write_project": str(PROJECT / f".ait-redteam-{tag}"),
            "write_home": str(self.home / ".config" / "ait" / f"planted-{tag}"),
            "write_tmp": f"/tmp/ait-redteam-{tag}",
            "socket": str(self.socket_path),
            "decoy_pid": self.decoy.pid,
            "secret": FAKE_SECRET,
            "forks": FORKS,
            "reserve": RESERVE,
            "daemon": [str(self.root / f"daemon-{tag}")],
            "daemon_to_out": daemon_to_out,
        }

    def written(self, tag: str) -> list[str]:
        """What a run with ``tag`` managed to write where the engine can see it (daemon included)."""
        t = self.targets(tag)
        paths = [t["write_project"], t["write_home"], t["write_tmp"], *t["daemon"]]
        return [p for p in paths if os.path.lexists(p)]

    def cleanup(self, tag: str) -> None:
        for p in self.written(tag):
            os.unlink(p)

    def close(self) -> None:
        self._server.close()
        self.decoy.kill()
        self.decoy.wait()


def attack_code(targets: dict[str, Any], *, finish: str, extra: str = "") -> str:
    """The prelude; ``finish``: ``raise`` (the probe reports it) or ``print`` (stderr, after ``REDTEAM``).

    ``extra`` is more code (more ``_try`` routes) run after the common ones.
    """
    code = _ATTACK.replace("__TARGETS__", repr(json.dumps(targets))) + extra
    if finish == "raise":
        return code + "raise RuntimeError('PROBE-RESULT ' + _j.dumps(_r))\n"
    return code + "print('REDTEAM ' + _j.dumps(_r), file=_sys.stderr, flush=True)\n"


def parse(text: str) -> dict[str, str]:
    """The outcomes a ``print`` run left in its output."""
    assert "REDTEAM " in text, text[-2000:]
    found: dict[str, str] = json.loads(text.split("REDTEAM ", 1)[1].splitlines()[0])
    return found


def new_tag(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def run_control(host: Host, tag: str) -> dict[str, str]:
    """The attack as a plain child of an engine-like parent holding an API key: no sandbox at all."""
    env = {**os.environ, "OPENAI_API_KEY": FAKE_SECRET, "HOME": str(host.home)}
    code = attack_code(host.targets(tag), finish="print")
    # ``; exit $?`` keeps the shell as the parent (no exec), so /proc/<parent>/environ holds the key.
    argv = ["/bin/sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, code]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
    return parse(done.stderr.decode(errors="replace"))


# --- what each route's outcome must be: reached without the sandbox, stopped with it --------------------------

ROUTES = (
    "env_secret",
    "env_key_file",
    "key_real",
    "key_planted",
    "key_home",
    "import_families",
    "regen_hidden",
    "write_project",
    "write_home",
    "write_tmp",
    "unix_socket",
    "proc_environ",
    "parent_environ",
    "fork_bomb",
    "memory_hog",
    "setsid_daemon",
)
_WRITES = {"write_project": "write_project", "write_home": "write_home", "write_tmp": "write_tmp"}


@dataclass
class Seen:
    """One run's outcomes and what it left where the engine can see it."""

    got: dict[str, str]
    written: list[str]
    connections: int  # connections the host's unix socket accepted during the run
    targets: dict[str, Any]


def forks_made(outcome: str) -> int:
    """``OK:400`` or ``OK:'63 then Resource temporarily unavailable'`` -> the children it had at once."""
    body = outcome.removeprefix("OK:").strip("'\"")
    return int(body.split()[0])


def reached(route: str, run: Seen, hidden_prompt: str) -> bool:
    """The control run (no sandbox) got what the route is after."""
    got = run.got[route]
    if route in _WRITES:
        return run.targets[_WRITES[route]] in run.written
    if route == "setsid_daemon":
        return got == "OK:'started'" and run.targets["daemon"][0] in run.written
    if route == "regen_hidden":
        return hidden_prompt[:60] in got
    if route == "import_families":
        return got.startswith("OK:") and str(PROJECT) in got
    if route == "unix_socket":
        return "host-service" in got and run.connections == 1
    if route in ("proc_environ", "parent_environ"):
        return "SECRET-FOUND" in got
    if route == "env_secret":
        return FAKE_SECRET in got
    if route == "env_key_file":
        return got.startswith("OK:") and "unset" not in got
    if route == "fork_bomb":
        return got == f"OK:{FORKS}"
    return got.startswith("OK:")  # the keys, the memory reservation


def contained(route: str, run: Seen, hidden_prompt: str, *, nproc: int) -> bool:
    """The sandboxed run did not get it (and left nothing where the engine can see it)."""
    got = run.got[route]
    if route in _WRITES:  # inside, /tmp is its own: a write there may succeed and reaches nothing
        return run.targets[_WRITES[route]] not in run.written and (route == "write_tmp" or got.startswith("ERR:"))
    if route == "setsid_daemon":
        return not [p for p in run.targets["daemon"] if p in run.written]
    if route == "regen_hidden":
        return hidden_prompt[:60] not in got
    if route == "import_families":  # the CPU child has a read-only copy of the code, never the project tree
        return got.startswith("ERR:") or str(PROJECT) not in got
    if route == "unix_socket":
        return got.startswith("ERR:") and run.connections == 0
    if route in ("proc_environ", "parent_environ"):
        return "SECRET-FOUND" not in got
    if route == "env_secret":
        return got.startswith("ERR:KeyError")
    if route == "env_key_file":
        return got == "OK:'unset'"
    if route == "fork_bomb":
        return got.startswith("OK:") and forks_made(got) < nproc
    if route == "memory_hog":
        return got.startswith("ERR:") and "memory" in got.lower()
    return got.startswith("ERR:FileNotFoundError")  # the keys: not there at all
