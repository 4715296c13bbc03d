"""sweep(): servers × profiles × levels × repeats → a tidy DataFrame, stored and audited.

sweep's arguments become one `Spec` (checked, before anything starts); every step reads it.
The one way a notebook runs an experiment is `run(...)` of such specs: `run(spec(**kw))` for one
sweep (`sweep(**kw)` is the same), `run(this.specs(...))` of the sweeps a notebook's module builds
(07's, 08's: sqlitelab.notebooks), each checked before the first starts.
For each server and profile: a fresh database (copied from one seeded template), the server
started on its CPU set, a primer, then every level and repeat through `load.run_level` (a
generator process per level) or, where one local generator process in closed loop measures
them (`Spec.steps_levels`), through one `load.Session` per scenario (one process stepping
through the levels, with no load between them), each audited (rows written == acknowledged writes,
counted from the file: `Counts`) while the server still runs; then the server is stopped by
its PID and the file checked (`PRAGMA integrity_check`). Several scenarios (`scenario=[...]`) share the copy, each with its own
server start. Points go to data/results.db; raw Locust output, histograms and server logs
stay in data/runs/<run_id>/. Where the wall time went is kept too: `time_*` columns per point,
`server_timing` and `*_seconds` per run (sqlitelab.report.timing.phases sums them).

The generator is never the story (see sqlitelab.load.calibrate and verdicts.influence):
- every point says whether its generator was the limit (`generator_bound`: its CPU saturated)
  or plausibly set the pace (`generator_influenced`, with the reason in `influence`), from the
  generator's calibration on this machine (measured once, the first time it is needed);
- `confirm="loadgen"`: each level where Locust was bound or influenced is measured again, on the
  same server right after the sweep's levels, with loadgen; those points are the level's
  *headline* (`headline` true; the Locust ones false, `replaced_by` naming loadgen, and the
  loadgen ones carrying what they replaced in `replaced_*`). sweep() returns the headline
  points; results.db keeps all;
- `crosscheck=<users>` (or a list of levels): one point of the reference client per server,
  profile and level, stored in `crosschecks` beside the lab's own rate at the level
  (`analysis.crosscheck_table`), measured before the confirmation: a point of that level more
  than calibrate.TOLERANCE short of the client's rate is marked influenced (and so confirmed)
  too. `crosscheck_tool`: the client (sqlitelab.load.crosscheck.TOOLS): wrk, or an article's
  own tool, hey or oha.
  `confirm` naming the sweep's own generator confirms nothing (there is no other to ask), so a
  notebook can keep `confirm="loadgen"` whichever generator its scale runs.
"""
from __future__ import annotations

import dataclasses
from tqdm.auto import tqdm
import contextlib
import json
import math
import os
import random
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sqlitelab.load import calibrate, commands, crosscheck as crosschecks, driver as load, scenarios, verdicts
from sqlitelab.core import config, intervals, layout, machine, probe, results, schema, turns
from sqlitelab.infra import databases, hosts, link, operations, postgres
from sqlitelab.studies import scales
from sqlitelab.infra import servers as stacks
from sqlitelab.core.processes import log_tail, own_path, reap_orphans, release_path  # (sweep has a `processes` argument)


class AuditWarning(UserWarning):
    """Rows written differ from acknowledged writes, or the database failed its check."""


def _check_args(server_list, profile_list, scenario):
    """The stacks, profiles and scenarios a sweep names, each a known one, refused in one line."""
    stacks.chosen(server_list)  # each a known stack, none twice (servers.chosen: the one check)
    known = stacks.load_profiles()
    bad = [p for p in profile_list if any(part not in known for part in p.split("+"))]
    if bad:
        raise ValueError(f"unknown profiles {bad}; known: {list(known)} (and a+b overlays)")
    names = [scenario] if isinstance(scenario, str) else list(scenario or [])
    bad = [s for s in names if s not in load.SCENARIOS]
    if bad or not names or len(set(names)) != len(names):
        raise ValueError(f"unknown scenario {scenario!r} (one name, or a list of distinct names); "
                         f"known: {list(load.SCENARIOS)}")


# a level's window in seconds when a sweep is given none (`duration=None`: e.g. a sweep of N requests)
DURATION = 10.0


def _setting(default=dataclasses.MISSING, doc: str = "", accepts: str | None = None):
    """One of a sweep's settings: its default, what it means (sweep's documentation lists it) and
    what it accepts — the name of its check in scales.ACCEPTS, the one table of what each setting
    of the lab accepts — refused in one line naming both ("<name> must be <words>, not <value>").
    None is accepted where it is the default; elsewhere it is checked like any value. A setting
    without a check here is checked by Spec.of, against the registries (stacks, profiles...)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "accepts": accepts})


@dataclass(frozen=True)
class Settings:
    """What a sweep is asked: the keyword arguments of `sweep(...)` and `spec(...)`, each declared
    once here — its default, what it accepts (checked when a Settings is made, before anything
    starts) and what it means. `Spec.of(settings)` then checks how they go together and resolves
    them into the form each step reads."""
    notebook: str = _setting(doc="the notebook whose run this is (its ID, NN-title)")
    experiment: str | None = _setting(None, "the sweep's name within the notebook's run (several "
                                      "sweeps of one run are its experiments)")
    servers: list[str] | None = _setting(None, "stacks to sweep (servers/<stack>); None: python-fastapi")
    profiles: list[str] | None = _setting(None, "server profiles (servers/profiles.toml; a+b overlays); "
                                          "None: rails71")
    scenario: str | list[str] = _setting("rails-writes", "one scenario (scenarios.toml), or a list: each "
                                         "then stored as its own experiment (`<experiment>/<scenario>`, as "
                                         "one sweep per scenario would store it), run in turn on one copy of "
                                         "the database per server and profile, the server restarted for each")
    levels: tuple[int, ...] | list[int] = _setting((1, 2, 4), "concurrent users per level", "levels")
    repeats: int = _setting(1, "runs of each level", "repeats")
    server_repeats: dict[str, int] | None = _setting(None, "repeats per stack where they differ from "
                                                     "`repeats` (e.g. the article's stack three times, the "
                                                     "others once)")
    rounds: int = _setting(1, "rounds of the whole sweep: each round measures every stack, profile and "
                           "level once more (`repeats` runs each), its stacks and profiles and each one's "
                           "levels in an order shuffled per round (`order_seed`), every server started "
                           "afresh on a fresh copy, so that the machine's drift falls alike on every "
                           "alternative (randomised multiple interleaved trials); 1: one round, in the "
                           "order given", "rounds")
    order_seed: int | None = _setting(None, "the seed of the rounds' shuffle (None: a new one, stored "
                                      "with the run)", "order_seed")
    until_half_width: float | None = _setting(None, "rounds stop early once every level's rate has a 95 % "
                                              "interval (intervals.mean_interval over its runs) whose "
                                              "half-width is within this share of its mean, from the "
                                              "second round on (the runs row's sweep says which stopped "
                                              "them: `stopped_by`); None: every round runs", "half_width")
    server_levels: dict[str, list[int]] | None = _setting(None, "levels per stack where they differ from "
                                                          "`levels` (e.g. each stack's own peak, measured "
                                                          "again in rounds)")
    server_cpu_cap: float | None = _setting(config.SERVER_CPU_CAP, "the share of its CPUs every server "
                                            "is held to (a cgroup's CPU quota, processes.cap_command): "
                                            "the lab's injected slowdown; default LAB_SERVER_CPU_CAP "
                                            "(config), else None: not held", "cpu_cap")
    duration: float | None = _setting(None, f"seconds of each level's window (None: {DURATION:g})", "duration")
    warmup: float = _setting(2.0, "seconds of load before the window opens", "warmup")
    requests: int | None = _setting(None, "requests per level: the window ends at the last (None: "
                                    "a window of `duration`)", "requests")
    max_duration: float = _setting(300.0, "the most seconds a level of `requests` may take", "max_duration")
    pause: float = _setting(0.1, "seconds between levels", "pause")
    processes: int | str = _setting("auto", "Locust processes; \"auto\": one per generator CPU "
                                    "(sqlitelab.core.layout), loadgen one", "processes")
    server_cpus: str | None = _setting("auto", "CPUs the server is pinned to, e.g. \"0\"; \"auto\": "
                                       "the machine's layout (sqlitelab.core.layout: the server half, or "
                                       "the split the notebook's article used where it fits); None: not pinned")
    generator_cpus: str | None = _setting("auto", "CPUs the generator is pinned to; \"auto\": what "
                                          "the server's layout leaves; None: not pinned")
    server_split: int | None = _setting(None, "the server CPUs the notebook's article gave its server "
                                        "(its module's SERVER_SPLIT), which \"auto\" asks of the "
                                        "layout where the machine allows; None: the lab's own split")
    knobs: dict | None = _setting(None, "server knobs for every stack, over the profile's "
                                  "(servers/shared.toml)")
    server_knobs: dict[str, dict] | None = _setting(None, "knobs per stack, over `knobs`")
    seed_users: int = _setting(0, "rows of the users table before the load")
    seed_items: int = _setting(0, "rows of the items table before the load")
    payload_bytes: int = _setting(2048, "bytes of each item's payload")
    seed_user_bytes: int = _setting(0, "bytes of each seeded user's bio")
    scenario_params: dict | None = _setting(None, "what each scenario's generator is told "
                                            "(scenarios.lab_env), e.g. {\"write_share\": 0.1}")
    parameters: dict | None = _setting(None, "the notebook's parameters, stored with the run")
    progress: bool = _setting(True, "a progress bar")
    results_db: Path | None = _setting(None, "the results store (None: data/results.db)")
    runs_dir: Path | None = _setting(None, "where raw output goes (None: data/runs/)")
    run_id: str | None = _setting(None, "the notebook run's id (None: a new one)")
    generator: str = _setting("locust", "the load generator", "generator")
    keepalive: bool = _setting(True, "False: a new connection per request (`oha --disable-keepalive`, "
                               "load.run_level)")
    confirm: str | None = _setting(None, "re-measure each level where the generator was bound or "
                                   "influenced with this generator (the module's docstring); the "
                                   "sweep's own generator confirms nothing")
    crosscheck: int | list[int] | None = _setting(None, "the level (or levels) at which the reference "
                                                  "client also measures one point per server and profile",
                                                  "crosscheck_users")
    crosscheck_tool: str = _setting("wrk", "the cross-check's client (sqlitelab.load.crosscheck.TOOLS)")
    crosscheck_seconds: float | None = _setting(None, "the client's duration (None: the sweep's "
                                                "`duration`)", "crosscheck_seconds")
    calibration: bool = _setting(True, "False: no generator calibration, so no point is marked "
                                 "influenced by its CPU")
    server_host: str = _setting("local", "where the server runs (sqlitelab.infra.hosts: local, "
                                "netns:<name>, ssh:<host>)")
    generator_hosts: list[str] | None = _setting(None, "where Locust workers run (netns:<name>, "
                                                 "ssh:<host>); Locust then runs distributed, its "
                                                 "master here (load.run_level)")
    link_delay_us: int | None = _setting(None, "µs each direction of a link between the generator "
                                         "and the server (sqlitelab.infra.link; 0: the link's proxy "
                                         "alone), a new one for each level; None: direct")
    database: str = _setting("sqlite", "sqlite, or postgres: every server on a real Postgres the sweep "
                             "starts for it (sqlitelab.infra.postgres: one cluster per server and "
                             "profile, pinned to the server's CPUs, its durability the profile's "
                             "`synchronous`, seeded with the same rows), the profile's SQLite-only "
                             "knobs left out; the audit counts rows there")
    db_link_delay_us: int | None = _setting(None, "µs each direction of a link between the server "
                                            "and its Postgres (a database on a host of its own; the "
                                            "link pinned with the generator)")
    rates: list[float] | None = _setting(None, "open loop (load.run_level): each level of `levels` "
                                         "is then the most requests in flight, and each rate "
                                         "(requests/s) a point of its own; None: closed loop", "rates")
    arrivals: str = _setting("constant", "constant or poisson arrivals (open loop)")
    operation: dict | None = _setting(None, "{\"name\": one of operations.OPERATIONS, \"at_s\": s after "
                                      "the window opens, **its parameters}: run on the server's "
                                      "machine and CPUs during every level (sqlitelab.infra.operations); "
                                      "the point's `operation_*` columns say what it did and when")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value, accepts = getattr(self, f.name), f.metadata["accepts"]
            if accepts is None or (value is None and f.default is None):
                continue
            scales.refuse(f.name, value, accepts)

    @classmethod
    def of(cls, **arguments) -> "Settings":
        """Settings from keyword arguments; one it has no setting of, or a missing notebook, is
        refused naming the known ones."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise TypeError(f"sweep has no argument {', '.join(map(repr, unknown))} "
                            f"(known: {', '.join(known)})")
        if "notebook" not in arguments:
            raise TypeError("a sweep needs 'notebook'")
        return cls(**arguments)


def _arguments_doc() -> str:
    """Every setting's line of sweep's documentation: name, default, meaning."""
    lines = []
    for f in dataclasses.fields(Settings):
        default = "required" if f.default is dataclasses.MISSING else f"default {f.default!r}"
        lines.append(f"    {f.name} ({default}): {f.metadata['doc']}")
    return "\n".join(lines)


def sweep(**arguments) -> pd.DataFrame:
    return run(spec(**arguments))  # every argument checked before anything starts


sweep.__doc__ = f"""Run a sweep and return its headline points (one row per server, profile, scenario, level
    and repeat), each carrying its notebook, notebook run (`run_id`: the notebook's; None: a new
    one), experiment, scale, machine and commit (results.describe): `run(spec(**arguments))`.
    `confirm`, `crosscheck`, `crosscheck_tool`: see the module's docstring. Every point's window
    second by second goes to the `seconds` table (load.series). Its keyword arguments (Settings):

{_arguments_doc()}
    """


def spec(**arguments) -> "Spec":
    """One sweep, checked, not run: sweep's keyword arguments (Settings; its defaults for the
    rest), every one refused here in one line if it is wrong. An experiment is one or more of
    these, built and checked before any of them starts, then `run`."""
    return Spec.of(Settings.of(**arguments))


def run(*specs: "Spec | list[Spec]") -> pd.DataFrame:
    """The one way a notebook runs an experiment: its sweeps, each a checked `spec` (or a list of
    them, as 07's and 08's builders return), in turn; every headline point of them.
    What a killed kernel left behind is stopped and removed first. While a replay is on
    (results.replay), the points the replayed run stored for these sweeps, measuring nothing."""
    flat = [s for item in specs for s in (item if isinstance(item, (list, tuple)) else [item])]
    for s in flat:
        if not isinstance(s, Spec):
            raise TypeError(f"run takes sweeps checked by spec(...), not {type(s).__name__}")
    if results.replaying():
        frames = [results.replayed(s.run_id(name), s.parameters) for s in flat for name in s.scenarios]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    seen: dict[str, int] = {}
    for i, s in enumerate(flat):  # each sweep its own runs rows: a shared one is replaced
        for name in s.scenarios:
            key = s.run_id(name)
            if key in seen:
                raise ValueError(f"sweeps {seen[key] + 1} and {i + 1} of this run share the run id "
                                 f"{key!r}: give each its own experiment")
            seen[key] = i
    for line in reap_orphans():  # what a killed kernel left: its owner is dead
        print(f"sweep: stopped and removed what a dead run left: {line}", flush=True)
    frames = [_run(s, time.perf_counter()) for s in flat]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _check_database(s: Settings, server_list: list[str], profile_list: list[str], server_host: hosts.Host):
    """The database every server runs on, and every stack's knobs for it, before anything starts
    (a stack-only knob of another stack is refused; one a profile sets is left out)."""
    if s.database not in stacks.DATABASES:
        raise ValueError(f"database must be one of {', '.join(stacks.DATABASES)}, not {s.database!r}")
    for stack in server_list:
        for name in profile_list:
            stacks.knob_env(name, database=s.database, stack=stack,
                            **{**(s.knobs or {}), **(s.server_knobs or {}).get(stack, {})})
    if s.database == "postgres":
        if not server_host.same_machine:
            raise ValueError("database='postgres' runs its Postgres beside the server, on this machine")
        for name in profile_list:  # each profile's durability has a Postgres equivalent
            postgres.durability_for(stacks.profile_knobs(name).get("pragmas"))
        for k in {*(s.knobs or {}), *(kk for v in (s.server_knobs or {}).values() for kk in v)}:
            if k in stacks.SQLITE_ONLY_KNOBS:
                raise ValueError(f"knob {k!r} is SQLite's; it has no meaning with database='postgres'")
    if s.db_link_delay_us is not None:
        if s.database != "postgres":
            raise ValueError("db_link_delay_us puts a link between a server and its Postgres: "
                             "database='postgres' only (SQLite is in the server's process)")
        link.check_delay(s.db_link_delay_us)


def _cpus(s: Settings, server_host: hosts.Host) -> tuple[str | None, str | None, int, str]:
    """The server's and the generator's CPUs, the generator's processes and a note where the
    layout asked for did not fit: the machine's layout, or the split the notebook's article used
    where it fits (sqlitelab.core.layout); a server over ssh unpinned on its own machine."""
    server_cpus, generator_cpus, far_note = s.server_cpus, s.generator_cpus, ""
    if server_host.kind == "ssh":  # the server has a machine of its own, the generator this one
        if server_cpus not in ("auto", None):
            raise ValueError("a server over ssh runs on every CPU of its machine: leave server_cpus 'auto'")
        server_cpus = None
        if generator_cpus == "auto":
            generator_cpus = ",".join(map(str, layout.available_cpus()))
        far_note = (f"server on {server_host}, unpinned on its own machine; "
                    f"the generator on this machine's CPUs {generator_cpus}")
    lay = layout.resolve(server_cpus, generator_cpus, s.processes, server=s.server_split)
    processes = s.processes
    if processes == "auto":  # Locust: one process per generator CPU; loadgen is one process
        processes = lay.processes if s.generator == "locust" else 1
    commands.check_generator(s.generator, processes)
    return lay.server_cpus, lay.generator_cpus, processes, far_note or lay.note


def _generator_hosts(s: Settings, server_host: hosts.Host) -> tuple[hosts.Host, ...]:
    """The hosts Locust's workers run on (none: Locust on this machine), each reachable, and what
    goes with them (Locust alone; no cross-check, whose client runs here)."""
    if isinstance(s.generator_hosts, str):
        raise ValueError("generator_hosts is a list of hosts, e.g. ['netns:gen1']")
    generator_hosts = tuple(hosts.Host.parse(h) for h in (s.generator_hosts or ()))
    if any(h.is_local for h in generator_hosts):
        raise ValueError("generator_hosts names other hosts; leave it empty for this machine")
    if generator_hosts and (s.generator != "locust" or s.confirm not in (None, "locust")):
        raise ValueError("generator hosts run Locust workers: generator='locust', no confirmation")
    if (generator_hosts or not server_host.is_local) and s.crosscheck is not None:
        raise ValueError("the cross-check's client runs on this machine: not with other hosts")
    for h in (server_host, *generator_hosts):
        h.check()
    return generator_hosts


def _scenario_params(s: Settings, scenario: str) -> dict:
    """What `scenario`'s generator is told: the sweep's scenario_params, and what the database
    holds for the scenarios that read it (scenarios.toml's [env])."""
    seeded = {"LAB_ITEMS": s.seed_items, "LAB_PAYLOAD_BYTES": s.payload_bytes, "LAB_USERS_ROWS": s.seed_users}
    these = {**(s.scenario_params or {})}
    for var in load.SCENARIOS[scenario].env:
        if var in seeded:
            these.setdefault(var[4:].lower(), seeded[var])
    return these


@dataclass(frozen=True)
class Spec:
    """One sweep, checked and resolved: what sweep() was asked, in the form each step reads —
    CPU sets resolved, repeats per stack, each scenario's experiment, run id, folder and
    generator parameters. `Spec.of(Settings(...))` refuses bad input before anything
    starts; `_run` and the per-server and per-scenario steps read nothing else."""
    notebook: str
    notebook_run: str
    experiment: str | None
    one_scenario: bool      # `scenario` was one name (a list: an experiment per scenario)
    servers: tuple[str, ...]
    profiles: tuple[str, ...]
    scenarios: tuple[str, ...]
    levels: tuple[int, ...]
    repeats: int
    server_repeats: dict
    rounds: int
    order_seed: int | None  # the rounds' shuffle (None: one round, the order given)
    until_half_width: float | None  # rounds stop once every level's interval is this narrow
    server_levels: dict     # stack -> its levels, where they differ from `levels`
    cpu_cap: float | None   # the share of its CPUs every server is held to (None: not held)
    duration: float
    warmup: float
    requests: int | None
    max_duration: float
    pause: float
    processes: int
    server_cpus: str | None
    generator_cpus: str | None
    layout_note: str        # where the CPU layout asked for did not fit (layout.Layout.note)
    generator: str
    server_host: hosts.Host
    generator_hosts: tuple[hosts.Host, ...]  # none: Locust on this machine, as always
    link_delay_us: int | None  # µs each way through sqlitelab.infra.link's proxy (None: direct)
    database: str           # sqlite | postgres (servers.DATABASES)
    db_link_delay_us: int | None  # µs each way between the server and its Postgres (None: its socket)
    rates: tuple[float, ...] | None  # open loop: requests/s per point (None: closed loop)
    arrivals: str           # constant | poisson (open loop)
    operation: dict | None  # run during every level (sqlitelab.infra.operations)
    confirm: str | None
    keepalive: bool
    crosscheck: tuple[int, ...] | None  # the levels the reference client also measures
    crosscheck_tool: str    # sqlitelab.load.crosscheck.TOOLS
    crosscheck_seconds: float | None
    calibration: bool
    knobs: dict
    server_knobs: dict
    seed: dict              # databases.seeded_template's arguments
    scenario_params: dict   # scenario -> what its generator is told (scenarios.lab_env)
    parameters: dict        # the notebook's parameters, stored with the run
    progress: bool
    results_db: Path | None
    runs_dir: Path

    @classmethod
    def of(cls, s: Settings) -> "Spec":
        """The sweep `s` asks for, its settings checked together (each alone was checked when the
        Settings was made) and resolved: every refusal before anything starts."""
        server_list = list(s.servers or ["python-fastapi"])
        profile_list = list(s.profiles or ["rails71"])
        _check_args(server_list, profile_list, s.scenario)
        server_repeats = dict(s.server_repeats or {})
        server_levels = {stack: tuple(v) for stack, v in (s.server_levels or {}).items()}
        for stack, v in server_levels.items():
            _check_args([stack], profile_list, s.scenario)
            scales.refuse(f"server_levels[{stack!r}]", list(v), "levels")
        if s.until_half_width is not None and s.rounds < 3:
            raise ValueError("until_half_width stops rounds early: give rounds >= 3 (the most it may run)")
        for stack, n in server_repeats.items():
            _check_args([stack], profile_list, s.scenario)
            scales.refuse(f"server_repeats[{stack!r}]", n, "repeats")
        server_host = hosts.Host.parse(s.server_host)
        _check_database(s, server_list, profile_list, server_host)
        server_cpus, generator_cpus, processes, note = _cpus(s, server_host)
        generator_hosts = _generator_hosts(s, server_host)
        if s.link_delay_us is not None:
            link.check_delay(s.link_delay_us)
        if s.link_delay_us is not None and (generator_hosts or s.crosscheck is not None):
            raise ValueError("a delayed link is between this machine's generator and the server: "
                             "not with generator hosts or a cross-check (whose client goes direct)")
        confirm = s.confirm
        if confirm is not None:
            commands.check_generator(confirm)
            if confirm == s.generator:  # nothing to confirm with: the generator itself
                confirm = None
        crosscheck = None
        if s.crosscheck is not None:
            crosscheck = (s.crosscheck,) if isinstance(s.crosscheck, int) else tuple(s.crosscheck)
            crosschecks.tool(s.crosscheck_tool)
        rates = None
        if s.rates is not None:
            rates = tuple(s.rates)
            for r in rates:
                load.check_rate(r, s.arrivals, s.requests)
            if confirm is not None or crosscheck is not None:
                raise ValueError("an open-loop sweep (rates) has no confirmation or cross-check")
        elif s.arrivals != "constant":
            raise ValueError("arrivals is for an open-loop sweep: pass rates too")
        operation = s.operation
        if operation is not None:
            operation = operations.check(operation)
            if s.database != "sqlite" or not server_host.is_local:
                raise ValueError("an operation runs on the SQLite file of a server on this machine")
        scenario_list = [s.scenario] if isinstance(s.scenario, str) else list(s.scenario)
        made = cls(
            notebook=s.notebook, notebook_run=s.run_id or results.new_run_id(s.notebook),
            # several sweeps of one notebook run are its experiments; a list of scenarios: each
            # is stored as its own experiment (`<experiment>/<scenario>`), as separate sweeps
            # would store it, but they share the template, the calibration and each server's
            # copy of the database
            experiment=s.experiment or None, one_scenario=isinstance(s.scenario, str),
            servers=tuple(server_list), profiles=tuple(profile_list), scenarios=tuple(scenario_list),
            levels=tuple(s.levels), repeats=s.repeats, server_repeats=server_repeats,
            rounds=s.rounds, order_seed=(None if s.rounds == 1 else s.order_seed if s.order_seed is not None
                                         else random.SystemRandom().randrange(2**31)),
            until_half_width=s.until_half_width, server_levels=server_levels,
            cpu_cap=s.server_cpu_cap,
            # None: the default (a count's sweep needs none)
            duration=DURATION if s.duration is None else s.duration, warmup=s.warmup,
            requests=s.requests, max_duration=s.max_duration, pause=s.pause, processes=processes,
            server_cpus=server_cpus, generator_cpus=generator_cpus, layout_note=note,
            generator=s.generator, server_host=server_host, generator_hosts=generator_hosts,
            link_delay_us=s.link_delay_us, database=s.database, db_link_delay_us=s.db_link_delay_us,
            rates=rates, arrivals=s.arrivals, operation=operation, confirm=confirm,
            keepalive=s.keepalive, crosscheck=crosscheck, crosscheck_tool=s.crosscheck_tool,
            crosscheck_seconds=s.crosscheck_seconds, calibration=s.calibration,
            knobs=dict(s.knobs or {}), server_knobs=dict(s.server_knobs or {}),
            seed={"users": s.seed_users, "items": s.seed_items, "payload_bytes": s.payload_bytes,
                  "user_bytes": s.seed_user_bytes},
            scenario_params={name: _scenario_params(s, name) for name in scenario_list},
            parameters=dict(s.parameters or {}), progress=s.progress,
            results_db=s.results_db, runs_dir=Path(s.runs_dir or config.RUNS_DIR))
        if not made.pairs():  # every stack of it cannot run every profile of it (servers.cannot)
            raise ValueError("the sweep has nothing its stacks can run: " + "; ".join(made.sat_out().values()))
        return made

    def beyond(self, profile: str | None) -> "list[Spec]":
        """The same sweep with `profile`, on those of its stacks that take one of the profile's
        stack-only knobs (servers.taking): a variant beyond the article, run where it changes
        something; [] for None or where no stack takes it. Its own experiment,
        `<experiment>/<profile>` (so its own runs rows, wall time and timing: with the same run
        ids its rows replaced the sweep's own)."""
        taking = stacks.taking(profile, self.servers)
        if not taking:
            return []
        return [dataclasses.replace(self, servers=tuple(taking), profiles=(profile,),
                                    experiment="/".join(e for e in (self.experiment, profile) if e),
                                    server_repeats={s: n for s, n in self.server_repeats.items()
                                                    if s in taking})]

    def experiment_of(self, scenario: str) -> str | None:
        """A single scenario is the sweep's `experiment`; each of a list its own,
        `<experiment>/<scenario>`."""
        if self.one_scenario:
            return self.experiment or None
        return "/".join(e for e in (self.experiment, scenario) if e)

    def run_id(self, scenario: str) -> str:
        return results.sweep_id(self.notebook_run, self.experiment_of(scenario))

    def run_dir(self, scenario: str) -> Path:
        return self.runs_dir / self.run_id(scenario)

    @property
    def tmp_dir(self) -> Path:
        return config.TMP_DIR / results.sweep_id(self.notebook_run, self.experiment)

    @property
    def steps_levels(self) -> bool:
        """Its levels are measured by one generator process per server and scenario
        (load.Session) rather than a process each: one local process in closed loop against a
        server on this machine, each level a window of a duration with nothing run during it.
        Saves each level Locust's start-up and exit (~1.4 s), or loadgen's (~0.25 s)."""
        return (self.processes == 1 and not self.generator_hosts
                and self.server_host.same_machine and self.link_delay_us is None
                and self.rates is None and self.requests is None and self.operation is None)

    def repeats_of(self, stack: str) -> int:
        return self.server_repeats.get(stack, self.repeats)

    def _cannot(self, stack: str, profile: str) -> str | None:
        """Why `stack` cannot run `profile` with this sweep's knobs (servers.cannot), None: it can."""
        return stacks.cannot(stack, {**stacks.profile_knobs(profile), **self.knobs_for(stack)}, self.database)

    def pairs(self) -> list[tuple[str, str]]:
        """Every (stack, profile) the sweep runs, in the order given: each stack with each profile,
        but where the stack cannot run the profile (sat_out)."""
        return [(stack, profile) for stack in self.servers for profile in self.profiles
                if self._cannot(stack, profile) is None]

    def sat_out(self) -> dict[str, str]:
        """The stacks and profiles the sweep leaves out, `<stack> · <profile>`, and why in words:
        a stack whose stack.toml says it cannot honour one of the profile's knob values (node-sqlite
        and shared cache), which would refuse to start."""
        return {f"{stack} · {profile}": why for stack in self.servers for profile in self.profiles
                if (why := self._cannot(stack, profile))}

    def order(self) -> list[list[tuple[str, str, tuple[int, ...]]]]:
        """Each round's (stack, profile, levels) in the order they run: one round in the order
        given, or `rounds` rounds each shuffled anew (its stacks and profiles, and each one's
        levels) from `order_seed`, the same order again from the same seed."""
        pairs = self.pairs()
        if self.rounds == 1:
            return [[(stack, profile, self.levels_of(stack)) for stack, profile in pairs]]
        rng = random.Random(self.order_seed)
        out = []
        for _ in range(self.rounds):
            pairs = rng.sample(pairs, len(pairs))
            out.append([(stack, profile, tuple(rng.sample(self.levels_of(stack), len(self.levels_of(stack)))))
                        for stack, profile in pairs])
        return out

    def levels_of(self, stack: str) -> tuple[int, ...]:
        """A stack's levels: its own (`server_levels`) or the sweep's."""
        return tuple(self.server_levels.get(stack, self.levels))

    def knobs_for(self, stack: str) -> dict:
        return {**self.knobs, **self.server_knobs.get(stack, {})}

    def record(self) -> dict:
        """The sweep's arguments as its runs row stores them (`sweep`)."""
        return {"servers": list(self.servers), "profiles": list(self.profiles),
                "levels": list(self.levels), "repeats": self.repeats, "rounds": self.rounds,
                "order_seed": self.order_seed, "until_half_width": self.until_half_width,
                "server_levels": {k: list(v) for k, v in self.server_levels.items()},
                "server_cpu_cap": self.cpu_cap,
                "server_repeats": self.server_repeats, "duration": self.duration,
                "warmup": self.warmup, "requests": self.requests, "processes": self.processes,
                "layout_note": self.layout_note, "server_host": str(self.server_host),
                "generator_hosts": [str(h) for h in self.generator_hosts],
                "link_delay_us": self.link_delay_us, "database": self.database,
                "db_link_delay_us": self.db_link_delay_us,
                "rates": list(self.rates) if self.rates else None, "arrivals": self.arrivals,
                "operation": self.operation,
                "generator": self.generator, "keepalive": self.keepalive, "confirm": self.confirm,
                "crosscheck": list(self.crosscheck) if self.crosscheck else None,
                "crosscheck_tool": self.crosscheck_tool if self.crosscheck else None, "knobs": self.knobs,
                "server_knobs": self.server_knobs, "sat_out": self.sat_out(), "seed_users": self.seed["users"],
                "seed_user_bytes": self.seed["user_bytes"], "seed_items": self.seed["items"]}


def _run(spec: Spec, t_run: float) -> pd.DataFrame:
    """The sweep itself: calibration, the seeded template, each server and profile in turn
    (`_one_server`), then the runs, points and cross-checks stored and the audits reported."""
    run_dirs = {name: spec.run_dir(name) for name in spec.scenarios}
    for d in run_dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    spec.tmp_dir.mkdir(parents=True, exist_ok=True)
    own_path(spec.tmp_dir)  # removed by the watchdog, or the next sweep, if we die
    try:
        return _sweep_in(spec, t_run)
    finally:  # also when the calibration or the template fails
        shutil.rmtree(spec.tmp_dir, ignore_errors=True)
        release_path(spec.tmp_dir)


def _sweep_in(spec: Spec, t_run: float) -> pd.DataFrame:
    """_run's work, with its scratch folder made. Where runs take turns (sqlitelab.core.turns: the
    power check's), the sweep's start is a passing point, and so is each server's start: the same
    server is measured in every run before the next one starts; the time spent waiting is not the
    sweep's (its runs rows' wall_seconds leave it out)."""
    waited = turns.waited_here()
    turns.passing()
    described = {name: results.describe(spec.notebook, spec.notebook_run,
                                        spec.experiment_of(name), spec.parameters)
                 for name in spec.scenarios}
    common = {"notebook": spec.notebook, "started": results.now_iso(),
              "parameters": spec.parameters, "git_commit": results.git_commit(),
              "machine": machine.machine_label(), "machine_info": machine.machine(),
              "versions": results.versions(), "server_cpus": spec.server_cpus,
              "generator_cpus": spec.generator_cpus}
    runs = {name: {"run_id": spec.run_id(name), **described[name], **common, "scenario": name,
                   "sweep": {**spec.record(), "scenario_params": spec.scenario_params[name]}}
            for name in spec.scenarios}
    first = runs[spec.scenarios[0]]
    points: list[dict] = []
    checks: list[dict] = []
    timing: list[dict] = []  # one row per server, profile and scenario (sqlitelab.report.timing)
    used = [g for g in (spec.generator, spec.confirm) if g]
    if "loadgen" in used:
        commands.build_loadgen()
    t = time.perf_counter()
    cals = ({g: calibrate.ensure(g, spec.server_cpus, spec.generator_cpus, progress=spec.progress)
             for g in used} if spec.calibration else {})
    calibration_s = results.elapsed(t)
    onsets = {g: (cals[g]["onset_util"] if g in cals else None) for g in used}
    t = time.perf_counter()
    cached, seed_cached = databases.seeded_template(**spec.seed)
    template = spec.tmp_dir / "template.db"  # a link: the cache may prune its entry meanwhile
    try:
        os.link(cached, template)
    except OSError:
        shutil.copyfile(cached, template)
    seed_s = results.elapsed(t)
    for r in runs.values():  # what the sweep spent once, on its first scenario's row
        r.update({"calibrations": {g: c["calib_id"] for g, c in cals.items()},
                  "seed_cached": seed_cached, "calibration_seconds": 0.0, "seed_seconds": 0.0})
    first.update({"calibration_seconds": calibration_s, "seed_seconds": seed_s})

    total = (spec.rounds * len(spec.scenarios) * len(spec.rates or [None])
             * sum(spec.repeats_of(s) * len(spec.levels_of(s)) for s, _ in spec.pairs()))
    for why in spec.sat_out().values():
        print(f"{spec.notebook}: left out: {why}", flush=True)
    bar = tqdm(total=total, desc=spec.notebook, disable=not spec.progress, mininterval=0.5)
    stopped = {"rounds_run": 0, "stopped_by": "rounds"}
    try:
        for number, order in enumerate(spec.order(), start=1):
            for k, (stack, profile, levels) in enumerate(order):
                if number > 1 or k:
                    turns.passing()  # the sweep's start was the first server's
                got, check, st = _one_server(spec, stack, profile, template, bar, onsets,
                                             Round(number, levels))
                points += got
                checks += check
                timing += st
            stopped["rounds_run"] = number
            if spec.until_half_width is not None and number >= 2 and number < spec.rounds \
                    and settled(points, spec.until_half_width):
                stopped["stopped_by"] = "half-width"
                break
        slowed(points)
    finally:
        bar.close()
        wall = round(results.elapsed(t_run) - (turns.waited_here() - waited), 3)
        spent = {name: sum(v for row in timing if row["scenario"] == name
                           for k, v in row.items() if k.endswith("_s"))
                 for name in spec.scenarios}
        for name, r in runs.items():
            mine = [p for p in points if p["scenario"] == name]
            for p in mine:  # every point says what it is part of (results.describe)
                p.update(described[name])
            per_second = [{**row, **{k: p[k] for k in SECOND_KEYS}}
                          for p in mine for row in p.get("seconds") or ()]
            r["sweep"].update(stopped)
            r.update({"finished": results.now_iso(), "points": len(mine),
                      "server_timing": [row for row in timing if row["scenario"] == name]})
            # a sweep of several scenarios: each row its own servers' time, the first one the rest
            r["wall_seconds"] = (wall if len(runs) == 1 else
                                 round(spent[name] + (wall - sum(spent.values()) if r is first else 0), 3))
            results.store_run(r, [{k: v for k, v in p.items() if k != "seconds"} for p in mine],
                              spec.results_db)
            if per_second:
                results.store_rows("seconds", per_second, spec.results_db)
        if checks:
            for c in checks:
                c.update(described[c["scenario"]])
            results.store_rows("crosschecks", checks, spec.results_db)
    every = pd.DataFrame(points)
    if len(every) and not every["audit_ok"].all():
        bad = every.loc[~every["audit_ok"], [c for c in schema.TABLES["points"]["audited"] if c in every]]
        warnings.warn(f"AUDIT FAILED for {len(bad)} point(s): rows written outside acknowledged "
                      f"writes .. acknowledged + in flight + sent twice, or integrity_check != ok\n"
                      f"{bad.to_string(index=False)}",
                      AuditWarning, stacklevel=3)
    bad = [c for c in checks if c["audit_ok"] is False]
    if bad:
        warnings.warn(f"AUDIT FAILED for {len(bad)} cross-check(s): " + "; ".join(
            f"{c['server']}/{c['profile']}: {c['rows_written']} rows, {c['acked_responses']} "
            f"acknowledged, {c['unknown_outcomes']} unknown, integrity {c['integrity']}" for c in bad),
            AuditWarning, stacklevel=3)
    return every[every["headline"]].reset_index(drop=True) if len(every) else every


def settled(points: list[dict], target: float) -> bool:
    """Whether every level measured so far (stack, profile, scenario, users and rate, headline
    points) has a rate whose 95 % interval over its runs (intervals.mean_interval) is within
    `target` of its mean: what stops a sweep's rounds early (Spec.until_half_width). A level of
    one run, or whose mean is 0, is not."""
    runs: dict = {}
    for p in points:
        if p.get("headline", True):
            key = (p["scenario"], p["server"], p["profile"], p["users"], p.get("rate"))
            runs.setdefault(key, []).append(p["rps"])
    finite = all(isinstance(r, (int, float)) and math.isfinite(r) for v in runs.values() for r in v)
    return bool(runs) and finite and all(
        len(v) >= 2 and intervals.mean_interval(v).relative() <= target for v in runs.values())


def slowed(points: list[dict]) -> None:
    """Each point's core_slowdown and core_slowed (sqlitelab.core.probe): its server core's slower
    probe over the fastest probe of the sweep on that core."""
    fastest: dict = {}
    for p in points:
        for k in ("probe_server_before_ms", "probe_server_after_ms"):
            v = p.get(k)
            if v is not None and v == v:
                fastest[p.get("server_pinning")] = min(fastest.get(p.get("server_pinning"), v), v)
    for p in points:
        d = probe.slowdown(p.get("probe_server_before_ms", math.nan), p.get("probe_server_after_ms", math.nan),
                           fastest.get(p.get("server_pinning"), math.nan))
        p["core_slowdown"] = d
        p["core_slowed"] = bool(d > probe.SLOWED) if d == d else None


# What each row of the `seconds` table repeats of its point (declared with the stored columns).
SECOND_KEYS = schema.SECOND_KEYS


def audit(writes: "scenarios.Writes | None", point: dict, written: int, knobs: dict) -> dict:
    """Rows written against acknowledged writes. Exact (rows == acks × rows per ack) unless
    some writes' outcome is unknown: a write that ended in a transport error (status 0: the
    connection was reset or timed out, so the server may have committed it before the client
    gave up) may have added its rows or not, and so may a write still in flight when the
    generator stopped (at its count or its window's close: sent, never answered; counted by the
    generator, `inflight_writes`), and so may a write the generator sent a second time after its
    kept-alive connection dropped unanswered (`resent_writes`: the first sending may have
    reached the server); each allows up to rows_per_ack more (the bound wrk's
    cross-check uses, acked ≤ rows ≤ acked + unknown). And when the server saves a
    request's rows in separate transactions (`metrics_txn=record`, as ActiveRecord does), a
    request that failed may have committed some of its rows first: at most rows_per_ack − 1
    more per failed request. Every acknowledged row must be there in every case. `writes`: the
    scenario's (Scenario.writes) or an app's rule; None for a scenario that writes nothing."""
    per_ack = writes.rows_per_ack if writes is not None else 1
    expected = point["acked_writes"] * per_ack
    partial = per_ack > 1 and knobs.get("metrics_txn") == "record"
    unknown = failed = 0
    if writes is not None:
        _, unknown, failed = writes.counts(json.loads(point["run_counts"] or "{}"))
        failed = failed if partial else 0
    inflight = int(point.get("inflight_writes") or 0)
    resent = int(point.get("resent_writes") or 0)
    slack = per_ack * (unknown + inflight + resent) + (per_ack - 1) * failed
    rule = "partial" if partial else "exact"
    rule += f", {unknown} unknown" if unknown else ""
    rule += f", {inflight} in flight" if inflight else ""
    rule += f", {resent} sent twice" if resent else ""
    return {"rows_written": written, "expected_rows": expected,
            "audit_rule": rule,
            "unacked_rows": written - expected,
            "audit_ok": expected <= written <= expected + slack}


class Counts:
    """The one count a point's audit needs (databases.COUNTERS: what the scenario's acknowledged writes
    grow; none for a scenario that writes nothing), read from the file before and after the
    point, with the time it took. (Not the count after one point as the count before the next:
    a request the previous generator gave up on — wrk gives up on every request in flight at
    its stop — may still commit in between.)"""

    def __init__(self, db: Path, reader=None):
        self.db = db
        # (db, counter) -> the count: an app's query (apps.count); None: databases.count_rows,
        # looked up at each read
        self.reader = reader
        self.seconds = 0.0

    def read(self, counter: str | None) -> int:
        if counter is None:
            return 0
        t = time.perf_counter()
        try:
            return (self.reader or databases.count_rows)(self.db, counter)
        finally:
            self.seconds += time.perf_counter() - t

    before = after = read

    def settled(self, counter: str | None, before: int, inflight: int, rows_per_ack: int,
                quiet_s: float = 0.2, bound_s: float = 3.0) -> int:
        """Rows written since `before`, once the writes that were in flight at the generator's
        stop have landed or never will: at once when none was in flight, else when the count
        reaches its ceiling (each in-flight write committed) or has not moved for `quiet_s`
        (at most `bound_s`). So such a write is counted in its own level, not the next."""
        written = self.after(counter) - before
        if not inflight or counter is None:
            return written
        ceiling = written + inflight * rows_per_ack
        deadline, still = time.monotonic() + bound_s, time.monotonic() + quiet_s
        while time.monotonic() < min(deadline, still) and written < ceiling:
            time.sleep(0.02)
            now = self.after(counter) - before
            if now != written:
                written, still = now, time.monotonic() + quiet_s
        return written


@dataclass(frozen=True)
class Round:
    """Which round of the sweep a server's start is (Spec.order), and its levels' order there."""
    number: int
    levels: tuple[int, ...]

    def tag(self, spec: Spec) -> str:
        """What its files' names add ("" in a sweep of one round)."""
        return f"-round{self.number}" if spec.rounds > 1 else ""


def _one_server(spec: Spec, stack: str, profile: str, template: Path, bar,
                onsets: dict, rnd: Round) -> tuple[list[dict], list[dict], list[dict]]:
    """One server and profile in one round: one copy of the template for all `scenarios`, the
    server started afresh for each (seed 004 ran a server program per endpoint, all on one file),
    the file checked once at the end. Returns points, cross-checks and where the wall time
    went (one row per scenario, for sqlitelab.report.timing)."""
    with contextlib.ExitStack() as stack_of:
        t = time.perf_counter()
        if spec.database == "postgres":  # its own cluster, seeded with the template's rows
            pg = postgres.Postgres(spec.tmp_dir / f"{stack}-{profile}{rnd.tag(spec)}-pg", cpus=spec.server_cpus,
                                   durability=postgres.durability_for(
                                       stacks.profile_knobs(profile).get("pragmas")))
            db = stack_of.enter_context(pg).prepare(**spec.seed)
            if spec.db_link_delay_us is not None:  # the database on a host of its own
                pg.link = stack_of.enter_context(link.DelayLink(
                    f"http://127.0.0.1:{pg.port}", spec.db_link_delay_us, spec.generator_cpus,
                    spec.tmp_dir / f"{stack}-{profile}{rnd.tag(spec)}-dblink"))
        else:
            db = spec.tmp_dir / f"{stack}-{profile}{rnd.tag(spec)}.db"
            shutil.copyfile(template, db)
        if spec.server_host.kind == "ssh":  # copied to the same path there, read there from now on
            hosts.push(spec.server_host, db)
            db = databases.OnHost(db, spec.server_host)
        copy_s = time.perf_counter() - t
        counts = Counts(db)
        out: list[dict] = []
        checks: list[dict] = []
        timing: list[dict] = []
        for scenario in spec.scenarios:
            got, check, st = _one_scenario(spec, stack, profile, db, counts, scenario, bar, onsets, rnd)
            out += got
            checks += check
            timing.append(st)
        timing[0]["copy_s"] = copy_s
        t = time.perf_counter()
        integrity = databases.integrity_check(db)
        timing[-1]["integrity_s"] = time.perf_counter() - t
        size = databases.size(db)
        timing[-1]["db_mib"] = size / 2**20 if size is not None else None
    for p in out:
        p["integrity"] = integrity
        p["audit_ok"] = bool(p["audit_ok"] and integrity == "ok")
    for c in checks:
        c["integrity"] = integrity
        c["audit_ok"] = bool(c["audit_ok"] and integrity == "ok") if c["audit_ok"] is not None else None
    return out, checks, timing


def _one_scenario(spec: Spec, stack: str, profile: str, db: "Path | databases.OnHost", counts: "Counts",
                  scenario: str, bar, onsets: dict, rnd: Round) -> tuple[list[dict], list[dict], dict]:
    """One scenario on a fresh start of the server: the levels and repeats, the reference
    client's cross-check (in the first round only: a check of the generator, not a repeat), the
    confirmation of the levels the generator limited, each point audited."""
    # where the server's wall time goes (sqlitelab.report.timing): start, prime, levels, cross-check,
    # confirmation, stop; each point has its own `time_*`
    st = {"server": stack, "profile": profile, "scenario": scenario, "round": rnd.number, "copy_s": 0.0,
          "integrity_s": 0.0}
    log = spec.run_dir(scenario) / f"server-{stack}-{profile}{rnd.tag(spec)}.log"
    bar.set_postfix_str(f"{stack}/{profile}: starting")
    t = time.perf_counter()
    # a server here with workers on other machines listens where they reach this machine
    far = [h for h in spec.generator_hosts if not h.same_machine]
    listen = far[0].reach_back() if far and spec.server_host.is_local else None
    srv = stacks.start_server(stack, db, profile=profile, cpus=spec.server_cpus, log_path=log,
                              timeout=300, host=spec.server_host, listen=listen,
                              cpu_cap=spec.cpu_cap, **spec.knobs_for(stack))
    st["start_s"] = time.perf_counter() - t
    with srv:
        on = _OnServer(spec, stack, profile, scenario, db, counts, srv, bar, onsets or {}, rnd)
        t = time.perf_counter()
        load.prime(srv)
        st["prime_s"] = time.perf_counter() - t
        out = _levels(on, st)
        t = time.perf_counter()
        checks = [_crosscheck_level(on, out, users) for users in spec.crosscheck or ()
                  if rnd.number == 1]
        st["crosscheck_s"] = time.perf_counter() - t
        t = time.perf_counter()
        st["confirmed_levels"] = _confirm(on, out) if spec.confirm else 0
        st["confirm_s"] = time.perf_counter() - t
        if not srv.alive():
            raise stacks.ServerStartError(f"{stack} died during the sweep:\n"
                                           f"{log_tail(log)}")
        t = time.perf_counter()
    st["stop_s"] = time.perf_counter() - t
    return out, checks, st


@dataclass
class _OnServer:
    """One scenario on one running server: what each of its points shares (where it is stored,
    the server's own description of itself at its start, the generator's onsets), and `measure`,
    one point of it."""
    spec: Spec
    stack: str
    profile: str
    scenario: str
    db: "Path | databases.OnHost"
    counts: "Counts"
    srv: stacks.Server
    bar: tqdm
    onsets: dict
    rnd: Round

    def __post_init__(self):
        spec, srv, scenario = self.spec, self.srv, self.scenario
        self.sc = load.SCENARIOS[scenario]
        self.run_id, self.label = spec.run_id(scenario), machine.machine_label()
        self.dir = spec.run_dir(scenario) / self.stack / self.profile / scenario
        health = srv.health
        self.knobs = health["knobs"]
        self.server_part = {
            "knobs": json.dumps(self.knobs, sort_keys=True),
            "emulated": json.dumps(health.get("emulated", {}), sort_keys=True),
            "server_versions": json.dumps(health.get("versions", {}), sort_keys=True),
            "sqlite_version": health.get("sqlite_version"),
            "sqlite_options": (json.dumps(health["sqlite_compile_options"])
                               if isinstance(health.get("sqlite_compile_options"), list) else None),
            "database": health.get("database", "sqlite"),
            "database_version": health.get("database_version", health.get("sqlite_version")),
            "server_processes": self.knobs.get("processes"), "server_threads": self.knobs.get("threads"),
            "write_path": self.knobs.get("write_path"), "txn_mode": self.knobs.get("txn_mode"),
            "busy": self.knobs.get("busy")}

    def measure(self, users: int, rep: int, gen: str, rate: float | None = None,
                session: "load.Session | None" = None, last: bool = False) -> dict:
        """One point: the level's window (from the session's process, or a generator process of
        its own), its writes audited, the page cache around it, the cores' speed just before and
        after it (sqlitelab.core.probe), who set its pace. `rep`: its repeat in this round."""
        spec, db, counts, srv = self.spec, self.db, self.counts, self.srv
        rep += (self.rnd.number - 1) * spec.repeats_of(self.stack)  # its repeat in the sweep
        self.bar.set_postfix_str(f"{self.stack}/{self.profile}: {users} users"
                                 + (f", {rate:g}/s" if rate is not None else "") + f", repeat {rep}"
                                 + (f" ({gen})" if gen != spec.generator else ""))
        tp = time.perf_counter()
        counted = counts.seconds
        before = counts.before(self.sc.counter)
        t = time.perf_counter()
        cache_before = databases.page_cache(db)
        tk = time.perf_counter() - t
        tail = "" if gen == spec.generator else f"-{gen}"
        at = "" if rate is None else f"-at{rate:g}"
        level_dir = self.dir / f"u{users:04d}{at}-r{rep}{tail}"
        during = (operations.during(spec.operation, db, srv.pinned, level_dir / "operation")
                  if spec.operation else None)
        tq = time.perf_counter()
        before_probe = probe.around(srv.pinned, spec.generator_cpus)
        tq = time.perf_counter() - tq
        if session is not None:  # the same level, from the session's one process
            window = session.level(users, level_dir, duration=spec.duration, warmup=spec.warmup)
        else:
            window = load.run_level(srv, self.scenario, users, level_dir, duration=spec.duration,
                                    warmup=spec.warmup, requests=spec.requests,
                                    max_duration=spec.max_duration,
                                    processes=spec.processes if gen == "locust" else 1,
                                    cpus=spec.generator_cpus, scenario_params=spec.scenario_params[self.scenario],
                                    generator=gen, keepalive=spec.keepalive,
                                    workers=list(spec.generator_hosts),
                                    link_delay_us=spec.link_delay_us, rate=rate,
                                    arrivals=spec.arrivals, during=during)
        written = counts.settled(self.sc.counter, before, window.get("inflight_writes") or 0,
                                 self.sc.rows_per_ack)
        t = time.perf_counter()
        after_probe = probe.around(srv.pinned, spec.generator_cpus)
        tq += time.perf_counter() - t
        done = window.pop("during", None) or {}
        t = time.perf_counter()
        cache_after = databases.page_cache(db)
        tk += time.perf_counter() - t
        measured = schema.assemble(
            window,
            {"rate": rate, "operation": done.get("operation"),  # what ran during the window
             "operation_started_s": done.get("started_s"), "operation_seconds": done.get("seconds"),
             "operation_result": json.dumps(done, sort_keys=True, default=str) if done else None},
            audit(self.sc.writes, window, written, self.knobs),
            {"run_id": self.run_id, "server": self.stack, "profile": self.profile,  # where
             "scenario": self.scenario, "repeat": rep, "round": self.rnd.number,
             "integrity": None, "machine": self.label,
             "db_mib": cache_before[1] / 2**20 if cache_before else None,
             "db_cached_before": cache_before[0] / cache_before[1] if cache_before and cache_before[1] else None,
             "db_cached_after": cache_after[0] / cache_after[1] if cache_after and cache_after[1] else None,
             "server_pinning": srv.pinned, "layout_note": spec.layout_note or None,
             "server_host": str(spec.server_host)},
            self.server_part,  # what the server said of itself at its start
            {"postgres_settings": (json.dumps(db.settings(), sort_keys=True)
                                   if databases.is_postgres(db) else None),
             "db_link_delay_us": spec.db_link_delay_us, **_db_link_stats(db)},
            {"probe_server_before_ms": before_probe["server"], "probe_server_after_ms": after_probe["server"],
             "probe_generator_before_ms": before_probe["generator"],
             "probe_generator_after_ms": after_probe["generator"], "server_cpu_cap": spec.cpu_cap})
        why = verdicts.influence(measured, self.onsets.get(gen))
        self.bar.update(1)
        t = time.perf_counter()
        # a pause between levels, none after a server's last: it is stopped next, or the
        # cross-check and the confirmation follow with warm-ups of their own
        time.sleep(0.0 if last else spec.pause)
        return schema.assemble(
            measured,
            {"generator_influenced": why is not None, "influence": why,  # the verdicts
             "outlasted": verdicts.outlasted(measured),
             "gen_onset_util": self.onsets.get(gen), "headline": True, "replaced_by": None},
            {"time_counts_s": counts.seconds - counted, "time_cache_s": tk, "time_probe_s": tq,
             "time_pause_s": time.perf_counter() - t, "time_point_s": time.perf_counter() - tp})


def _levels(on: _OnServer, st: dict) -> list[dict]:
    """Every level, rate and repeat of the sweep, in turn: from one generator process stepping
    through them (Spec.steps_levels) or a process each."""
    spec = on.spec
    t = time.perf_counter()
    out = []
    with (load.Session(on.srv, on.scenario, on.dir / f"{spec.generator}-session{on.rnd.tag(spec)}",
                       cpus=spec.generator_cpus, scenario_params=spec.scenario_params[on.scenario],
                       keepalive=spec.keepalive, generator=spec.generator)
          if spec.steps_levels else contextlib.nullcontext()) as session:
        steps = [(users, rate, rep) for users in on.rnd.levels for rate in spec.rates or [None]
                 for rep in range(1, spec.repeats_of(on.stack) + 1)]
        for i, (users, rate, rep) in enumerate(steps):
            out.append(on.measure(users, rep, spec.generator, rate, session, last=i == len(steps) - 1))
        st["levels_s"] = time.perf_counter() - t
    st["generator_exit_s"] = session.exit_s if session is not None else 0.0
    return out


def _crosscheck_level(on: _OnServer, out: list[dict], users: int) -> dict:
    """The reference client's point at `users`, measured before the confirmation: a point of that
    level more than calibrate.TOLERANCE short of the client's rate, its generator busy enough to
    set the pace (verdicts.generator_busy), is marked influenced (and so confirmed) too, its rate
    counted as the client counts it (hey: its whole run). Short with an idle generator is the
    clients' difference or the server's stall, shown beside (analysis.crosscheck_table), not
    blamed on the generator."""
    spec = on.spec
    check = _crosscheck(on.srv, on.counts, on.sc, on.scenario, users, spec.scenario_params[on.scenario], spec,
                        on.dir / f"u{users:04d}-{spec.crosscheck_tool}",
                        {"run_id": on.run_id, "server": on.stack, "profile": on.profile,
                         "machine": on.label})
    counted_as = crosschecks.TOOLS[spec.crosscheck_tool].COUNTED_AS
    for p in out:
        rate = p.get(counted_as) or p["rps"]
        short = check.get("rps") and p["users"] == users and \
            rate < (1 - calibrate.TOLERANCE) * check["rps"]
        if short and verdicts.generator_busy(p) and not (p["generator_bound"] or p["generator_influenced"]):
            p.update({"generator_influenced": True, "influence":
                      f"{rate / check['rps']:.2f} of {spec.crosscheck_tool}'s rate at this "
                      f"level (cross-check), generator at {p['gen_cpu_pct']:.0f} % CPU"})
    return check


def _confirm(on: _OnServer, out: list[dict]) -> int:
    """The levels the generator limited, measured again with the `confirm` generator: those
    points are the level's headline, the first ones say what replaced them. Returns how many
    levels were measured again."""
    spec = on.spec
    repeats = spec.repeats_of(on.stack)
    flagged = [u for u in on.rnd.levels
               if any(p["generator_bound"] or p["generator_influenced"] for p in out if p["users"] == u)]
    on.bar.total += len(flagged) * repeats
    for users in flagged:
        first = [p for p in out if p["users"] == users]
        for p in first:
            p.update({"headline": False, "replaced_by": spec.confirm})
        for rep in range(1, repeats + 1):
            q = on.measure(users, rep, spec.confirm)
            was = first[rep - 1]
            q.update({"replaced_generator": spec.generator, "replaced_rps": was["rps"],
                      "replaced_p99_ms": was["p99_ms"],
                      "replaced_gen_cpu_pct": was["gen_cpu_pct"],
                      "replaced_reason": ("generator-bound" if was["generator_bound"]
                                          else was["influence"])})
            out.append(q)
    return len(flagged)


def _db_link_stats(db) -> dict:
    """How late the server-to-Postgres link ran so far (its proxy's counters since the server's
    database started; None without one)."""
    stats = db.link.stats() if getattr(db, "link", None) is not None else {}
    return {"db_link_late_mean_us": stats.get("late_mean_us"),
            "db_link_late_max_us": stats.get("late_max_us")}


def _crosscheck(srv, counts, sc, scenario, users, scenario_params, spec: "Spec", out_dir,
                ident: dict) -> dict:
    """One point of the reference client (`spec.crosscheck_tool`) at `users` on the running
    server, audited: every 2xx/3xx it saw of a write is a row, plus at most the requests whose
    outcome it never learnt."""
    client = crosschecks.TOOLS[spec.crosscheck_tool]
    why = client.expressible(scenario, scenario_params, spec.keepalive)
    row = {**ident, "scenario": scenario, "users": users, "skipped": why,
           "generator": spec.crosscheck_tool}
    if why:
        return {**row, "audit_ok": None}
    before = counts.before(sc.counter)
    p = client.run_point(srv, scenario, users, out_dir, duration=spec.crosscheck_seconds or spec.duration,
                         warmup=spec.warmup, cpus=spec.generator_cpus,
                         scenario_params=scenario_params, keepalive=spec.keepalive)
    # a client may give up on requests in flight at its stop: let those land before the next point
    written = counts.settled(sc.counter, before, p["unknown_outcomes"], sc.rows_per_ack)
    only_writes = scenarios.only_writes(scenario, scenarios.lab_env(scenario_params))
    if not sc.write:
        ok, rule = written == 0, "no writes"
    elif only_writes:  # every response was a write's (rows_per_ack rows each)
        lo = p["acked_responses"] * sc.rows_per_ack
        # a server that saves a request's rows in separate transactions (metrics_txn=record, as
        # ActiveRecord does) keeps up to rows_per_ack - 1 rows of a request it failed (audit's rule)
        partial = sc.rows_per_ack > 1 and (srv.health or {}).get("knobs", {}).get("metrics_txn") == "record"
        failed = p.get("status_errors", 0) if partial else 0
        hi = lo + p["unknown_outcomes"] * sc.rows_per_ack + (sc.rows_per_ack - 1) * failed
        ok = lo <= written <= hi
        rule = "acked ≤ rows ≤ acked + unknown" + (f" + {sc.rows_per_ack - 1} per failed request (record)"
                                                   if partial else "")
    else:  # the client does not tell a write's response from a read's: an upper bound only
        ok = written <= (p["acked_responses"] + p["unknown_outcomes"]) * sc.rows_per_ack
        rule = "rows ≤ responses + unknown (reads and writes not told apart)"
    return {**row, **{k: v for k, v in p.items() if k != "users"}, "rows_written": written,
            "audit_rule": rule, "audit_ok": bool(ok)}
