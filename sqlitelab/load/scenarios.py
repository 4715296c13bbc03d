"""The scenario registry: scenarios.toml, loaded and checked once, compiled for one level.

    SCENARIOS["mix"].write          # "POST POST /items": the acknowledged write, as recorded
    compile("mix", {"LAB_WRITE_SHARE": "0.5"})   # what every generator sends at one level

`compile` turns a scenario and the LAB_* environment of a level into a *spec*: every value
resolved except the random ones, so a generator only draws numbers and joins pieces.
load.run_level writes it to <out_dir>/scenario.json, and both generators read that one file
(Locust through LAB_SPEC, loadgen through -spec); wrk.script writes it as Lua. A spec:

    {"scenario": "mix", "max_id": 1000, "requests": [
        {"method": "POST", "name": "POST /items", "path": [{"lit": "/items"}],
         "body": [{"lit": "{\\"payload\\": \\"pp…\\"}"}], "json": true, "follow": true,
         "share": 0.1, "track_max_id": true},
        {"method": "GET", "name": "GET /items/{id}", "path": [{"lit": "/items/"}, {"int_to_max_id": 1}],
         "body": null, "json": false, "follow": true, "share": null, "track_max_id": false}]}

A piece is {"lit": text}, {"int": [lo, hi]} (a uniform integer, both ends included) or
{"int_to_max_id": lo} (uniform in lo..max(lo, the largest id seen), which starts at `max_id`
and grows with every 201 of a `track_max_id` request). A request is drawn once per task: the
first whose cumulative `share` exceeds a uniform [0, 1) draw, else the last.

`python -m sqlitelab.load.scenarios NAME [VAR=VALUE ...]` prints a spec (to run loadgen or
Locust by hand).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

REGISTRY = Path(__file__).with_name("scenarios.toml")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
REQUEST_KEYS = {"method", "path", "name", "body", "follow", "redirects", "share", "track_max_id"}
SCENARIO_KEYS = {"title", "description", "family", "requests", "write"}
FAMILIES = ("no-database", "reads", "writes", "mix")  # a scenario's `family`
WRITE_KEYS = {"request", "acked", "counter", "rows_per_ack"}


@dataclass(frozen=True)
class Writes:
    """Which requests acknowledge a write, as the audit counts them: a request is recorded as
    "<METHOD> <name> <status>" (its name as Locust names it: by default its path); it is a write
    when its method is `method` and `name` is its name (`exact`, the lab's scenarios) or a regular
    expression found in it (an app's rule, sqlitelab.infra.apps), and acknowledged when its status
    is in `acked`. Each acknowledged write adds `rows_per_ack` to the count the audit reads."""
    method: str
    name: str
    acked: tuple[int, ...]
    rows_per_ack: int = 1
    exact: bool = True

    def __post_init__(self):
        if not self.exact:
            try:
                re.compile(self.name)
            except re.error as e:
                raise ValueError(f"the writes' path pattern {self.name!r} is not a regular expression: {e}") from None

    def is_write(self, request: str) -> bool:
        """`request`: "<METHOD> <name>" as recorded."""
        method, _, name = request.partition(" ")
        if method.upper() != self.method.upper():
            return False
        return name == self.name if self.exact else re.search(self.name, name) is not None

    def counts(self, run_counts: dict[str, int]) -> tuple[int, int, int]:
        """(acknowledged, outcome unknown: status 0, failed: any other status) among the
        recorded "<METHOD> <name> <status>" counts."""
        acked = unknown = failed = 0
        for key, n in run_counts.items():
            request, status = key.rsplit(" ", 1)
            if not self.is_write(request):
                continue
            if int(status) in self.acked:
                acked += n
            elif int(status) == 0:
                unknown += n
            else:
                failed += n
        return acked, unknown, failed

    def in_flight(self, run_inflight: dict[str, int]) -> int:
        """The writes sent and never answered when the generator stopped (by "<METHOD> <name>")."""
        return sum(n for request, n in run_inflight.items() if self.is_write(request))


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str                        # in plain words, for figures and tables (scenario_title)
    description: str
    requests: tuple[dict, ...]
    write: str | None = None          # the acknowledged write, "<method> <name>" as recorded
    acked: tuple[int, ...] = ()       # statuses that acknowledge it
    counter: str | None = None        # what it grows (databases.COUNTERS)
    rows_per_ack: int = 1
    family: str = "mix"               # FAMILIES: what kind of work (the noise band's family)

    @property
    def writes(self) -> Writes | None:
        """Its acknowledged write as the audit's rule (None: it writes nothing)."""
        if self.write is None:
            return None
        method, name = self.write.split(" ", 1)
        return Writes(method, name, self.acked, self.rows_per_ack)

    @property
    def env(self) -> list[str]:
        """Every LAB_* variable this scenario reads, in registry order."""
        used = set()
        for r in self.requests:
            for text in (r["path"], r.get("body") or ""):
                for value in PLACEHOLDER.findall(text):
                    used |= _value_env(value)
                    if "max_id" in VALUES[value].get("random_int", ()):
                        used.add(MAX_ID_START)
            for key in ("share", "follow"):
                if isinstance(r.get(key), str):
                    used.add(r[key])
        return [name for name in ENV if name in used]


def _value_env(value: str) -> set[str]:
    spec = VALUES[value]
    args = spec.get("random_int") or spec.get("repeat") or [spec.get("env")]
    return {a for a in args if isinstance(a, str) and a.startswith("LAB_")}


class RegistryError(ValueError):
    pass


def _check(raw: dict) -> tuple[dict, dict, dict[str, Scenario], str]:
    env, values = raw.get("env", {}), raw.get("values", {})
    if raw.get("max_id_start") not in env:
        raise RegistryError("max_id_start must name a variable of [env]")
    for name, v in values.items():
        kinds = [k for k in ("random_int", "env", "repeat") if k in v]
        if len(kinds) != 1:
            raise RegistryError(f"value {name!r} needs one of random_int, env, repeat")
        args = v[kinds[0]] if kinds[0] != "env" else [v["env"]]
        for a in args:
            if isinstance(a, str) and a.startswith("LAB_") and a not in env:
                raise RegistryError(f"value {name!r} reads {a}, which [env] does not declare")
    out = {}
    for name, s in raw.get("scenarios", {}).items():
        if set(s) - SCENARIO_KEYS or not s.get("requests") or not s.get("title"):
            raise RegistryError(f"scenario {name!r}: keys {sorted(s)} (allowed {sorted(SCENARIO_KEYS)}, "
                                "title and requests required)")
        if s.get("family") not in FAMILIES:
            raise RegistryError(f"scenario {name!r}: family must be one of {', '.join(FAMILIES)}, "
                                f"not {s.get('family')!r}")
        for r in s["requests"]:
            if set(r) - REQUEST_KEYS or not {"method", "path", "name"} <= set(r):
                raise RegistryError(f"scenario {name!r}: request keys {sorted(r)} "
                                    f"(allowed {sorted(REQUEST_KEYS)}; method, path, name required)")
            for v in PLACEHOLDER.findall(r["path"] + (r.get("body") or "")):
                if v not in values:
                    raise RegistryError(f"scenario {name!r}: {{{{{v}}}}} is not in [values]")
            for key in ("share", "follow"):
                if isinstance(r.get(key), str) and r[key] not in env:
                    raise RegistryError(f"scenario {name!r}: {key} reads {r[key]}, which [env] does not declare")
        if "share" in s["requests"][-1]:
            raise RegistryError(f"scenario {name!r}: the last request takes the share the others leave")
        w = s.get("write")
        write = None
        if w:
            if set(w) - WRITE_KEYS or not {"request", "acked", "counter"} <= set(w):
                raise RegistryError(f"scenario {name!r}: write keys {sorted(w)}")
            methods = {r["name"]: r["method"] for r in s["requests"]}
            if w["request"] not in methods:
                raise RegistryError(f"scenario {name!r}: write names {w['request']!r}, not one of its requests")
            write = f"{methods[w['request']]} {w['request']}"
        out[name] = Scenario(name, s["title"], s["description"], tuple(s["requests"]), write,
                             tuple(w["acked"]) if w else (), w["counter"] if w else None,
                             int(w.get("rows_per_ack", 1)) if w else 1, s["family"])
    return env, values, out, raw["max_id_start"]


ENV, VALUES, SCENARIOS, MAX_ID_START = _check(tomllib.loads(REGISTRY.read_text()))


def scenario_title(name: str) -> str:
    """A scenario in plain words (its `title`); a name the registry does not know, as it is."""
    s = SCENARIOS.get(str(name))
    return s.title if s else str(name)


def params_words(scenario_params: Mapping | None) -> str:
    """A scenario's parameters in words after its name: ", write share 0.5" ("" for none)."""
    return "".join(f", {k.replace('_', ' ')} {v}" for k, v in sorted((scenario_params or {}).items()))


def lab_env(scenario_params: Mapping | None) -> dict[str, str]:
    """A level's scenario_params as the LAB_* environment of its generator: {"write_share": 0.5} is
    LAB_WRITE_SHARE=0.5."""
    return {f"LAB_{k.upper()}": str(v) for k, v in (scenario_params or {}).items()}


def env_value(name: str, env: Mapping[str, str]):
    """A LAB_* variable of [env] from `env` (empty or missing: its default), checked against its
    range; an int where the default is one, else a float."""
    decl = ENV[name]
    raw = str(env.get(name, "")).strip()
    kind = int if isinstance(decl["default"], int) else float
    if raw == "":
        return decl["default"]
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'} "
                         f"({decl['about']})") from None
    if not decl["min"] <= value <= decl["max"] or value != value:
        raise ValueError(f"{name}={raw!r} must be in {decl['min']}..{decl['max']} ({decl['about']})")
    return value


def _pieces(text: str, env: Mapping[str, str]) -> list[dict]:
    out: list[dict] = []

    def lit(s: str) -> None:
        if not s:
            return
        if out and "lit" in out[-1]:
            out[-1] = {"lit": out[-1]["lit"] + s}
        else:
            out.append({"lit": s})
    pos = 0
    for m in PLACEHOLDER.finditer(text):
        lit(text[pos:m.start()])
        pos = m.end()
        v = VALUES[m.group(1)]
        if "env" in v:
            lit(str(env_value(v["env"], env)))
        elif "repeat" in v:
            unit, count = v["repeat"]
            lit(unit * (env_value(count, env) if isinstance(count, str) else count))
        else:
            lo, hi = (env_value(a, env) if isinstance(a, str) and a.startswith("LAB_") else a
                      for a in v["random_int"])
            out.append({"int_to_max_id": lo} if hi == "max_id" else {"int": [lo, hi]})
    lit(text[pos:])
    return out


def compile(name: str, env: Mapping[str, str] | None = None) -> dict:
    """The spec of scenario `name` under the LAB_* environment `env` (default: os.environ)."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    env = os.environ if env is None else env
    reqs = []
    for r in SCENARIOS[name].requests:
        follow = r.get("follow", True)
        share = r.get("share")
        reqs.append({
            "method": r["method"], "name": r["name"], "path": _pieces(r["path"], env),
            "body": _pieces(r["body"], env) or [{"lit": ""}] if "body" in r else None,
            "json": "body" in r,
            "follow": bool(env_value(follow, env)) if isinstance(follow, str) else bool(follow),
            "share": (float(env_value(share, env)) if isinstance(share, str) else
                      float(share) if share is not None else None),
            "track_max_id": bool(r.get("track_max_id", False)),
            "redirects": bool(r.get("redirects", False)),
        })
    return {"scenario": name, "max_id": env_value(MAX_ID_START, env), "requests": reqs}


def reachable(spec: dict) -> list[dict]:
    """The requests of a spec a draw can reach: up to the first whose shares add up to 1."""
    out, cum = [], 0.0
    for r in spec["requests"]:
        out.append(r)
        cum += r["share"] if r["share"] is not None else 1.0
        if cum >= 1.0:
            break
    return out


def only_writes(name: str, env: Mapping[str, str]) -> bool:
    """Every request the scenario sends under `env` is its acknowledged write."""
    sc = SCENARIOS[name]
    return sc.write is not None and all(f"{r['method']} {r['name']}" == sc.write
                                        for r in reachable(compile(name, env)))


def write_spec(name: str, env: Mapping[str, str], path: Path) -> Path:
    path.write_text(json.dumps(compile(name, env), indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in SCENARIOS:
        print(f"usage: python -m sqlitelab.load.scenarios NAME [LAB_VAR=VALUE ...]; NAME one of "
              f"{', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    try:
        env = dict(a.split("=", 1) for a in args[1:])
        print(json.dumps(compile(args[0], env), indent=1))
    except ValueError as e:
        print(f"scenarios: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
