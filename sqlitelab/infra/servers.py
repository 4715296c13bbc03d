"""Bundled servers: the stacks, their profiles and knobs, their builds, and their processes
started (pinned to a CPU set) and stopped by PID. Their databases: sqlitelab.infra.databases; the
load generators: sqlitelab.load.driver; loadgen's build: sqlitelab.load.commands.

    db = databases.prepare_database(tmp / "x.db", users=1000, items=1000)
    with start_server("python-fastapi", db, profile="rails71", cpus="0") as srv:
        httpx.get(srv.url + "/health")

Nothing started here outlives its `with` block, an exception, a KeyboardInterrupt (an
interrupted notebook cell) or the interpreter (atexit).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from sqlitelab.core import config, layout
from sqlitelab.core.vocabulary import SYNCHRONOUS
from sqlitelab.infra import databases, hosts, postgres
from sqlitelab.core.processes import cap_command, free_port, log_tail, own_path, pin_command, release_path, uncap

# --------------------------------------------------------------------------- stacks

# Every knob a server takes from its environment, with its variable, values and default:
# declared once, in servers/shared.toml's [knobs] (each stack enforces them in its own language).
KNOBS: dict[str, dict] = tomllib.loads(config.SHARED_TOML.read_text())["knobs"]
KNOB_ENV = {knob: k["env"] for knob, k in KNOBS.items()}

# A stack is its folder: servers/<stack>/ (or an extra stack's own, LAB_EXTRA_STACKS) with an
# executable `run` and a `stack.toml` that says what the lab needs to know of it. Its keys, with
# their type and the value an extra stack's folder gets when its stack.toml (optional there)
# leaves one out; a bundled stack's stack.toml sets every key of REQUIRED_KEYS.
MANIFEST = "stack.toml"
MANIFEST_KEYS: dict[str, tuple[type, object]] = {
    "title": (str, None),           # plain words for legends and tables; None: the stack's name
    "order": (int, None),           # a bundled stack's place: STACKS, legends, tables, builds
    "color": (str, None),           # its colour and marker in every figure; None: a spare one
    "marker": (str, None),          # (sqlitelab.report.plots.style_for)
    "compiled": (bool, False),      # a native build: a bundled one is a calibration target (load.calibrate)
    "multiprocess": (bool, False),  # runs LAB_PROCESSES worker processes (follow_cpus)
    "quick": (bool, True),          # false: the quick scale sweeps it only where a notebook names it (chosen)
    "seed": (bool, True),           # false: so does the seed scale
    "build_outputs": (list, []),    # what its build writes inside the folder (make distclean, .gitignore)
    "knobs": (dict, {}),            # knobs only this stack takes: [knobs.<name>], as shared.toml's (KNOB_KEYS)
    "cannot": (dict, {}),           # shared knobs' values it cannot honour: [cannot.<knob>] values, why (cannot)
}
# A stack-only knob's table: its variable, its values (in the order the start-up error names
# them), its default and what it is. The stack reports it in /health's knobs; other stacks
# neither take nor report it (a profile's is left out for them, like SQLite's knobs on Postgres).
KNOB_KEYS = ("env", "values", "default", "description")
REQUIRED_KEYS = ("title", "order", "color", "marker", "compiled", "multiprocess")


class StackManifestError(ValueError):
    """A stack.toml the lab cannot read: not TOML, an unknown key, a wrong type, a key missing."""


def read_manifest(folder: Path, *, bundled: bool = True) -> dict:
    """A stack folder's stack.toml, checked and completed with MANIFEST_KEYS' defaults, as its
    STACKS entry (and `dir`: the folder, `bundled`). An extra stack's folder (`bundled=False`)
    may have none."""
    path = folder / MANIFEST
    data: dict = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise StackManifestError(f"{path}: not valid TOML: {e}") from None
    elif bundled:
        raise StackManifestError(f"{path} does not exist (every servers/<stack>/ has one)")
    unknown = sorted(set(data) - set(MANIFEST_KEYS))
    if unknown:
        raise StackManifestError(f"{path}: unknown key(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(MANIFEST_KEYS)}")
    for key, value in data.items():
        kind = MANIFEST_KEYS[key][0]
        if type(value) is not kind:  # `type`, not isinstance: true is no order
            raise StackManifestError(f"{path}: {key} must be of type {kind.__name__}, not "
                                     f"{type(value).__name__} {value!r}")
    for out in data.get("build_outputs", []):
        if not isinstance(out, str) or not out or Path(out).is_absolute() or ".." in Path(out).parts:
            raise StackManifestError(f"{path}: build_outputs must be paths inside the stack's "
                                     f"folder (like \"target\"), not {out!r}")
    for name, knob in data.get("knobs", {}).items():
        bad = (not isinstance(knob, dict) or set(knob) != set(KNOB_KEYS)
               or not str(knob.get("env", "")).startswith("LAB_")
               or not isinstance(knob.get("values"), list) or knob.get("default") not in knob["values"])
        if bad:
            raise StackManifestError(f"{path}: knobs.{name} must have exactly {', '.join(KNOB_KEYS)} "
                                     f"(env a LAB_* variable, values a list, default one of them)")
    for name, c in data.get("cannot", {}).items():
        allowed = KNOBS.get(name, {}).get("values")
        bad = (allowed is None or not isinstance(c, dict) or set(c) != {"values", "why"}
               or not isinstance(c["values"], list) or not c["values"] or not set(c["values"]) <= set(allowed)
               or not isinstance(c["why"], str) or not c["why"].strip())
        if bad:
            raise StackManifestError(
                f"{path}: cannot.{name} must have exactly values (a non-empty list of the knob's values"
                + (f": {'|'.join(allowed)}" if allowed else "") + ") and why (words), for a knob of "
                f"servers/shared.toml with a list of values ({', '.join(k for k in KNOBS if 'values' in KNOBS[k])})")
    missing = [k for k in REQUIRED_KEYS if k not in data] if bundled else []
    if missing:
        raise StackManifestError(f"{path}: missing key(s) {', '.join(missing)} "
                                 f"(a bundled stack sets {', '.join(REQUIRED_KEYS)})")
    defaults = {k: list(v) if isinstance(v, list) else v for k, (_, v) in MANIFEST_KEYS.items()}
    return {**defaults, **data, "dir": folder, "bundled": bundled}


def bundled_stacks(root: Path = config.SERVERS_DIR) -> dict[str, dict]:
    """Every folder of `root` that has a stack.toml, by name, in their `order`."""
    found = {p.name: read_manifest(p) for p in sorted(root.iterdir()) if (p / MANIFEST).is_file()}
    return dict(sorted(found.items(), key=lambda item: (item[1]["order"], item[0])))


# Every stack, bundled first (their `order`), then LAB_EXTRA_STACKS' (their order there): the
# contract suite, the sweeps, the builds and the figures take their list from here.
STACKS: dict[str, dict] = bundled_stacks()


def extra_stacks(value: str | None = None) -> dict[str, dict]:
    """Stacks that are not bundled: `LAB_EXTRA_STACKS` (or `value`) names stack folders,
    os.pathsep-separated, each shaped like servers/<stack>/ (an executable `run` that execs the
    server with the LAB_* environment; a stack.toml is optional: without one, or for the keys it
    leaves out, MANIFEST_KEYS' defaults — one process, not compiled, a spare colour); the folder's
    name is the stack's name. They are added to STACKS when this module is imported (`dir`: where
    their `run` is), so start_server, sweeps and the contract suite take them like a bundled
    stack: `LAB_EXTRA_STACKS=tests/stacks/lossy-python`, or your own app's folder."""
    if value is None:
        value = os.environ.get("LAB_EXTRA_STACKS", "")
    out: dict[str, dict] = {}
    for entry in filter(None, value.split(os.pathsep)):
        folder = Path(entry).expanduser().resolve()
        run = folder / "run"
        if not (run.is_file() and os.access(run, os.X_OK)):
            raise ValueError(f"LAB_EXTRA_STACKS: {folder} is not a stack folder: it has no executable "
                             f"`run` (one that execs the server with the LAB_* environment, as "
                             f"servers/<stack>/run does)")
        if folder.name in STACKS or folder.name in out:
            raise ValueError(f"LAB_EXTRA_STACKS: a stack named {folder.name!r} is already known "
                             f"(rename the folder {folder})")
        out[folder.name] = read_manifest(folder, bundled=False)
    return out


STACKS.update(extra_stacks())


def bundled() -> list[str]:
    """The bundled stacks by name (a folder servers/<stack>/ with its stack.toml), in their
    `order`: STACKS without LAB_EXTRA_STACKS' (read live: a stack registered later counts)."""
    return [name for name, s in STACKS.items() if s.get("bundled")]


def chosen(stacks: "list[str] | tuple[str, ...] | None", *, name: str = "servers", scale: str | None = None,
           named: "list[str] | tuple[str, ...]" = ()) -> list[str]:
    """The stacks a notebook's `servers` (or `name`) parameter means, the one place it is
    resolved: None is every stack the lab bundles, in their stack.toml `order` (bundled(): a new
    folder servers/<stack>/ joins it; an extra stack, LAB_EXTRA_STACKS, runs when named) — at
    a `scale` without a stack whose stack.toml says `<scale> = false` (`quick`, `seed`) unless the
    notebook names it in `named` (01's and 02's article_server): a scale's time budget holds
    every stack but one whose start and stalls cost minutes of it; a list
    is kept in its order, each a known stack (STACKS) and none twice. Anything else is refused
    in one line naming `name` and what it accepts."""
    if stacks is None:
        return [s for s in bundled() if scale not in ("quick", "seed") or STACKS[s][scale] or s in named]
    accepts = (f"{name}: a list of stacks (servers/<stack>), or None: every stack the lab bundles "
               f"({', '.join(bundled())})")
    if isinstance(stacks, str) or not isinstance(stacks, (list, tuple)) or not stacks:
        raise ValueError(f"{name} must be a non-empty list of stacks, not {stacks!r} ({accepts})")
    unknown = [s for s in stacks if not isinstance(s, str) or s not in STACKS]
    if unknown:
        raise ValueError(f"unknown {name} {unknown}; known: {list(STACKS)} ({accepts})")
    twice = sorted({s for s in stacks if stacks.count(s) > 1})
    if twice:
        raise ValueError(f"{name} names {', '.join(twice)} more than once ({accepts})")
    return list(stacks)


def stack_dir(stack: str) -> Path:
    """The folder of a stack's files (its `run`): servers/<stack>/, or an extra stack's own."""
    return STACKS.get(stack, {}).get("dir") or config.SERVERS_DIR / stack


def stack_title(stack: str) -> str:
    """A stack's name in plain words (its stack.toml's `title`); unknown or untitled: its name."""
    return STACKS.get(stack, {}).get("title") or stack


def compiled_stacks() -> tuple[str, ...]:
    """The bundled stacks with a native build (`compiled = true`), by name."""
    return tuple(sorted(name for name, s in STACKS.items() if s.get("compiled") and s.get("bundled")))


def knob_value_title(knob: str, value) -> str:
    """A knob's value in plain words (its `titles` in shared.toml); otherwise the value itself."""
    return KNOBS.get(knob, {}).get("titles", {}).get(str(value), str(value))


def cannot(stack: str, knobs: dict, database: str = "sqlite") -> str | None:
    """Why `stack` cannot run with these knob values (by knob name, as a profile's: its stack.toml's
    [cannot], a driver without a feature), in words; None when it can. The stack refuses such a
    start in one `lab:` line; a sweep leaves that stack and profile out and says so (sweep.Spec).
    On Postgres, SQLite's knobs are not set (SQLITE_ONLY_KNOBS) and none is refused."""
    for name, c in (STACKS.get(stack, {}).get("cannot") or {}).items():
        value = knobs.get(name)
        if value is not None and str(value) in c["values"] and not (database != "sqlite" and name in SQLITE_ONLY_KNOBS):
            return f"{stack_title(stack)} cannot run {KNOB_ENV[name]}={value}: {c['why']}"
    return None


def stack_knobs(stack: str | None) -> dict[str, dict]:
    """The knobs only `stack` takes (its stack.toml's [knobs]), by name."""
    return dict(STACKS.get(stack, {}).get("knobs") or {}) if stack else {}


# Every stack-only knob, with the stacks that take it (in STACKS' order): servers/<stack>/stack.toml's
# [knobs] (ruby-puma's and ruby-rails' `yjit`: each stack declares its own).
STACK_ONLY_KNOBS: dict[str, tuple[str, ...]] = {
    name: tuple(stack for stack in STACKS if name in stack_knobs(stack))
    for stack in STACKS for name in stack_knobs(stack)}
_clash = sorted(set(STACK_ONLY_KNOBS) & set(KNOB_ENV))
if _clash:
    raise StackManifestError(f"stack-only knob(s) {', '.join(_clash)} are shared.toml's knobs too")


# Knobs that only mean something to SQLite: with LAB_DATABASE=postgres a profile's are left out
# (a servers' start-up error otherwise); its `synchronous` picks Postgres' durability instead
# (sqlitelab.infra.postgres.durability_for).
SQLITE_ONLY_KNOBS = ("pragmas", "txn_mode", "busy", "cache", "sql_log")
DATABASES = ("sqlite", "postgres")


class ServerStartError(RuntimeError):
    """A server did not come up; the message ends with the tail of its log."""


def load_profiles(path: Path = config.PROFILES_TOML) -> dict[str, dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)


def profile_title(profile: str) -> str:
    """A profile in plain words (its `title` in profiles.toml); an overlay `a+b`: both titles,
    "a's + b's"; a name profiles.toml does not know (or a part of one): the name itself."""
    profiles = load_profiles()
    titles = [profiles.get(name, {}).get("title") or name for name in str(profile).split("+")]
    return " + ".join(titles)


def profile_knobs(profile: str) -> dict:
    """The knobs of a named profile; `a+b` overlays profile b on a (b's knobs win), so a
    busy policy and a server shape can be combined: `rails71-retries+rails-dev`."""
    profiles = load_profiles()
    values: dict = {}
    for name in profile.split("+"):
        if name not in profiles:
            raise ValueError(f"unknown profile {name!r}; known: {', '.join(profiles)}")
        values.update({k: v for k, v in profiles[name].items()
                       if k in KNOB_ENV or k in STACK_ONLY_KNOBS})
    return values


def taking(profile: str | None, stacks: "list[str] | tuple[str, ...]") -> list[str]:
    """The stacks of `stacks` that take one of `profile`'s stack-only knobs: where the profile
    differs from the same profile without them."""
    if profile is None:
        return []
    own = set(profile_knobs(profile)) & set(STACK_ONLY_KNOBS)
    return [s for s in stacks if own & set(stack_knobs(s))]


def pragmas_with(profile: str, **changes) -> str:
    """A profile's LAB_PRAGMAS with some pragmas set to other values (or added):
    `pragmas_with("single-writer", synchronous="normal")`."""
    items = [i.split("=", 1) for i in profile_knobs(profile).get("pragmas", "").split(",") if "=" in i]
    out = {k.strip(): v.strip() for k, v in items}
    out.update({k: str(v) for k, v in changes.items()})
    return ",".join(f"{k}={v}" for k, v in out.items())


def synchronous_knobs(profile: str, synchronous: str | None) -> dict:
    """The knobs that run `profile` at PRAGMA synchronous=`synchronous` (off, normal, full or
    extra; None: the profile's own, {}): a run with that one knob changed (notebook 03's
    `synchronous`). Any other value is refused in one line."""
    if synchronous is None:
        return {}
    value = str(synchronous).strip().lower()
    if value not in SYNCHRONOUS.values():
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS.values())} "
                         f"(or None: the profile's), not {synchronous!r}")
    return {"pragmas": pragmas_with(profile, synchronous=value)}


def knob_env(profile: str | None = None, *, database: str = "sqlite", stack: str | None = None,
             **knobs) -> dict[str, str]:
    """LAB_* variables for a named profile, with knob overrides (None drops a knob). With
    `database="postgres"` the profile's SQLite-only knobs are left out; setting one is an error.
    A stack-only knob (STACK_ONLY_KNOBS) goes to its own `stack`: a profile's is left out for
    any other, and setting one for another stack is an error."""
    if database not in DATABASES:
        raise ValueError(f"database must be one of {'|'.join(DATABASES)}, not {database!r}")
    own = stack_knobs(stack)
    env_of = {**KNOB_ENV, **{name: k["env"] for name, k in own.items()}}
    values: dict = {}
    if profile is not None:
        values.update({k: v for k, v in profile_knobs(profile).items() if k in env_of})
    for k, v in knobs.items():
        if k in STACK_ONLY_KNOBS and k not in own:
            raise ValueError(f"knob {k!r} is taken by {', '.join(STACK_ONLY_KNOBS[k])} only; "
                             f"{stack or 'a server of no named stack'} does not take it")
        if k not in env_of:
            raise ValueError(f"unknown knob {k!r}; known: {', '.join(env_of)}")
        if database != "sqlite" and k in SQLITE_ONLY_KNOBS and v is not None:
            raise ValueError(f"knob {k!r} is SQLite's; it has no meaning with database={database!r}")
        values[k] = v
    if database != "sqlite":
        values = {k: v for k, v in values.items() if k not in SQLITE_ONLY_KNOBS}
    env = {env_of[k]: str(v) for k, v in values.items() if v is not None}
    if database != "sqlite":
        env["LAB_DATABASE"] = database
    return env


# --------------------------------------------------------------------------- processes

_LIVE: dict[int, "Server"] = {}


def _stop_all_live() -> None:
    for srv in list(_LIVE.values()):
        srv.stop()


atexit.register(_stop_all_live)


def build_env() -> dict[str, str]:
    """The environment a stack's `run` builds in: this one, and the machine's cache folder
    (`LAB_MACHINE_CACHE`, config.MACHINE_CACHE) where a stack may keep what every clone on this
    machine can reuse (rust-axum: cargo's build directory)."""
    return {**os.environ, "LAB_MACHINE_CACHE": os.fspath(config.MACHINE_CACHE)}


def build_server(stack: str, timeout: float = 900) -> None:
    """Build a stack once (cached by its `run` script); raises with the build log tail."""
    run = stack_dir(stack) / "run"
    if not run.exists():
        raise ServerStartError(f"unknown stack {stack!r}: {run} does not exist")
    proc = subprocess.run([str(run)], env={**build_env(), "LAB_BUILD_ONLY": "1"},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise ServerStartError(f"{stack}: build failed (exit {proc.returncode}):\n{tail}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kw):
        return None  # the 3xx comes back as an HTTPError: an answer, and no request elsewhere


_NOT_FOLLOWING = urllib.request.build_opener(_NoRedirect)


@dataclass
class Server:
    """One running server process, started by `start_server`; `db` is a SQLite file or a
    running sqlitelab.infra.postgres.Postgres."""
    stack: str
    db: "Path | postgres.Postgres"
    port: int
    env: dict[str, str]
    log_path: Path
    cpus: str | None = None
    host: str = "127.0.0.1"
    proc: subprocess.Popen | None = field(default=None, repr=False)  # here: the server, or its ssh client
    pinned: str | None = None
    health: dict | None = None
    runner: hosts.Host = field(default_factory=lambda: hosts.Host("local"))  # where it runs
    started: "hosts.Started | None" = field(default=None, repr=False)
    bind: str | None = None  # LAB_HOST when it is not `host` (an ssh host named by its name)
    host_cpus: int | None = None  # CPUs of an ssh host (`nproc` there)
    # an app of the user's (sqlitelab.infra.apps): its own command line instead of the stack's
    # `run`, started once any HTTP answer comes on `ready_path` (it has no /health of the lab's)
    command: list[str] | None = None
    ready_path: str | None = None
    attached: int | None = None  # an app already running (apps.reach): its PID; the lab stops nothing
    # its scratch folder (LAB_RUNTIME_DIR, on this machine): removed once it stopped, however it
    # ended (SIGKILLed too), and by this process's watchdog if this process dies first
    runtime_dir: Path | None = None
    # a share of its CPUs it is held to (a cgroup's CPU quota, processes.cap_command): the lab's
    # injected slowdown, the change its power check must see; None: not held
    cpu_cap: float | None = None
    cgroup: Path | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def database(self) -> str:
        return "postgres" if isinstance(self.db, postgres.Postgres) else "sqlite"

    @property
    def pid(self) -> int:
        """The server's PID on its own host."""
        if self.attached is not None:
            return self.attached
        assert self.started is not None
        return self.started.pid

    @property
    def pids(self) -> list[int]:
        """What its CPU and memory are: its own process tree and, on Postgres, the database's
        (SQLite's work happens inside the server's process; Postgres' in its backends)."""
        return [self.pid] + ([self.db.pid] if self.database == "postgres" else [])

    @property
    def cpu_count(self) -> int:
        """The CPUs it may use: its pinned set, or every CPU of its host."""
        if self.pinned:
            return len(layout.parse_cpus(self.pinned))
        return self.host_cpus or len(layout.available_cpus())

    def start(self, timeout: float = 60.0) -> "Server":
        run = stack_dir(self.stack) / "run"
        if self.command is None and not run.exists():
            raise ServerStartError(f"unknown stack {self.stack!r}: {run} does not exist")
        cmd = self.command or [str(run)]
        if self.cpu_cap is not None:
            if self.runner.kind == "ssh":
                raise ValueError("a CPU cap holds a server on this machine (a cgroup here)")
            cpus = layout.parse_cpus(self.cpus) if self.cpus else layout.available_cpus()
            cmd, self.cgroup = cap_command(cmd, self.cpu_cap, len(cpus))
        cmd, self.pinned = pin_command(cmd, self.cpus)
        env = {**build_env(), **self.env, "LAB_HOST": self.bind or self.host, "LAB_PORT": str(self.port)}
        for name in ("LAB_BUILD_ONLY", "LAB_DB", "LAB_DATABASE_URL"):
            env.pop(name, None)
        if self.command is not None:  # an app: its port and file only where its command puts them
            env = {k: v for k, v in env.items() if k not in ("LAB_HOST", "LAB_PORT")}
            env.update(self.env)
        elif self.database == "postgres":
            env["LAB_DATABASE_URL"] = self.db.server_dsn
        else:
            env["LAB_DB"] = os.fspath(self.db)  # on an ssh host: the same path there
        if self.runner.kind != "ssh":  # a folder on this machine's filesystem (a namespace's too)
            self.runtime_dir = Path(tempfile.mkdtemp(prefix=f"lab-server-{self.stack}-"))
            own_path(self.runtime_dir)
            env["LAB_RUNTIME_DIR"] = os.fspath(self.runtime_dir)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # Own session: the server and any workers it forks form a group we can signal (in a
        # namespace too: `ip netns exec` execs it, the same PID; over ssh, the PID its shell
        # reported, and the repository at the same path there builds and runs it).
        if self.runner.kind == "ssh":
            self.host_cpus = int(self.runner.run(["nproc"], timeout=20).strip())
        try:
            self.started = hosts.start(self.runner, cmd, env, self.log_path,
                                       cwd=str(config.PROJ_ROOT) if self.runner.kind == "ssh" else None)
        except BaseException:
            self.stop()  # nothing started: its folder goes
            raise
        self.proc = self.started.popen
        _LIVE[self.proc.pid] = self
        try:
            self.health = self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def get_json(self, path: str, timeout: float = 5.0) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return json.loads(r.read())

    def answers(self, path: str, timeout: float = 2.0) -> dict:
        """Any HTTP answer on `path` (an error status too: the app is up), as {"status": n};
        OSError while nothing answers."""
        try:
            with _NOT_FOLLOWING.open(self.url + path, timeout=timeout) as r:
                return {"status": r.status}
        except urllib.error.HTTPError as e:  # a redirect (never followed off this host) or an error
            e.close()
            return {"status": e.code}

    def wait_healthy(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"{self.stack} exited with status {code} before answering {self.ready_path or '/health'} "
                    f"(log {self.log_path}):\n{log_tail(self.log_path)}")
            try:
                if self.ready_path is not None:
                    return self.answers(self.ready_path)
                return self.get_json("/health", timeout=2.0)
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{self.stack} did not answer {self.ready_path or '/health'} within {timeout:.0f} s "
                    f"(log {self.log_path}):\n{log_tail(self.log_path)}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the server's process group, then SIGKILL; returns the exit status."""
        proc = self.proc
        try:
            if proc is None:
                return None
            try:
                return hosts.stop(self.started, grace)
            finally:
                _LIVE.pop(proc.pid, None)
        finally:
            if self.runtime_dir is not None:
                shutil.rmtree(self.runtime_dir, ignore_errors=True)
                release_path(self.runtime_dir)
            uncap(self.cgroup)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def follow_cpus(stack: str, env: dict[str, str], cpus: str | None) -> dict[str, str]:
    """A multi-process stack (`multiprocess = true` in its stack.toml) pinned to k CPUs runs k
    processes, unless a profile or knob sets LAB_PROCESSES or its write path is one process by
    design (`writer`, `batch`). The others follow their CPU set by themselves (tokio's workers,
    GOMAXPROCS: the process's affinity). One CPU: one process, the default."""
    if (cpus is None or not STACKS[stack]["multiprocess"] or "LAB_PROCESSES" in env
            or env.get("LAB_WRITE_PATH", "pool") != "pool"):
        return {}
    return {"LAB_PROCESSES": str(len(layout.parse_cpus(cpus)))}


def start_server(stack: str, db: Path | str, *, profile: str | None = None,
                 cpus: str | None = None, port: int | None = None,
                 log_path: Path | str | None = None, timeout: float = 60.0,
                 extra_env: dict[str, str] | None = None, host: "str | hosts.Host" = "local",
                 listen: str | None = None, cpu_cap: float | None = None, **knobs) -> Server:
    """Start `stack` on a free port with a profile and knob overrides; wait for /health. `db`:
    a SQLite file made by sqlitelab.infra.databases, or a running sqlitelab.infra.postgres.Postgres
    (LAB_DATABASE=postgres; the profile's SQLite-only knobs left out). On
    loopback by default; `host="netns:<name>"` starts it in that namespace, listening on the
    namespace's own address (sqlitelab.infra.hosts); `listen`: another address of this machine (one
    its Locust workers on other machines reach). `cpu_cap`: the share of its CPUs it is held to
    (a cgroup's quota: processes.cap_command), the lab's injected slowdown."""
    runner = hosts.Host.parse(host)
    runner.check()
    if listen is not None:
        if not runner.is_local:
            raise ValueError("listen= is for a server on this machine (a host listens on its own address)")
        hosts.check_target(listen, runner)
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}; known: {', '.join(STACKS)}")
    if isinstance(db, postgres.Postgres):
        if not runner.same_machine:
            raise ValueError("a server on Postgres runs on this machine (its Postgres does)")
        if not db.alive():
            raise ServerStartError(f"{stack}: its Postgres (port {db.port}) is not running")
        env = knob_env(profile, database="postgres", stack=stack, **knobs)
        default_log = Path(db.scratch) / f"{stack}.log"
    else:
        env = knob_env(profile, stack=stack, **knobs)
        if runner.kind == "ssh":
            if cpus is not None:
                raise ValueError("a server over ssh has its machine's CPUs (cpus=None)")
            if not isinstance(db, databases.OnHost):  # a file here: copied to the same path there
                hosts.push(runner, db)
                db = databases.OnHost(Path(db), runner)
            default_log = db.path.with_suffix(f".{stack}.log")
        else:
            db = Path(db)
            default_log = db.with_suffix(f".{stack}.log")
    env.update(extra_env or {})
    env.update(follow_cpus(stack, env, cpus))
    log_path = Path(log_path) if log_path else default_log
    address = listen or runner.address()
    bind = hosts.resolve(address) if runner.kind == "ssh" else None
    srv = Server(stack=stack, db=db, port=port or free_port(), env=env, log_path=log_path,
                 cpus=cpus, host=address, runner=runner, bind=bind, cpu_cap=cpu_cap)
    return srv.start(timeout=timeout)


def our_processes() -> list[int]:
    """PIDs of servers this interpreter started that are still alive."""
    return [pid for pid, s in _LIVE.items() if s.alive()]

