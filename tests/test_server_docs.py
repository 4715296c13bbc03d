"""Each server's README links its source lines (`[`name`](main.go#L950)`), and those links
point where they say: a label that names a definition (`Service.health`, `App#route`,
`Config::from_env`) must land on the line that defines it, any other label (`when "retries"`)
on a line that holds it verbatim. Every folder of servers/ has a README (servers/README.md
says so), and servers/README.md's pragma list and knob table, and openapi.yaml's /health
knobs, are servers/shared.toml's.

A source edit moves lines: `python tests/test_server_docs.py --fix` moves each link to the
nearest line that satisfies it, and says what it could not place."""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

SERVERS = Path(__file__).resolve().parents[1] / "servers"
STACK_DIRS = sorted(p for p in SERVERS.iterdir() if (p / "run").is_file())
LINK = re.compile(r"\[`([^`\]]+)`\]\(([^)#\s]+)#L(\d+)\)")
DEFINES = (r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?(?:fn|func|def|class|struct|enum|type|trait|"
           r"const|static|mod|module|var|impl(?:<[^>]*>)?)\s+(?:\([^)]*\)\s*)?(?:self\.)?{name}\b")


def _name(label: str) -> str | None:
    """The defined name a label points at (`Service.health` → health), or None for a label
    that is a piece of code rather than a name."""
    if not re.fullmatch(r"[A-Za-z_][\w]*(?:(?:\.|#|::)[A-Za-z_]\w*)*", label):
        return None
    return re.split(r"\.|#|::", label)[-1]


def _fits(label: str, line: str) -> bool:
    name = _name(label)
    if name is None:
        return label in line
    return re.search(DEFINES.format(name=re.escape(name)), line) is not None or \
        (name != label and "impl " in line and name in line)  # `Config::from_env` → `impl Config`


def links(readme: Path) -> list[tuple[re.Match, list[str]]]:
    out = []
    for m in LINK.finditer(readme.read_text()):
        out.append((m, (readme.parent / m.group(2)).read_text().splitlines()))
    return out


def broken(readme: Path) -> list[str]:
    bad = []
    for m, lines in links(readme):
        label, target, n = m.group(1), m.group(2), int(m.group(3))
        if not (1 <= n <= len(lines) and _fits(label, lines[n - 1])):
            near = [i + 1 for i, line in enumerate(lines) if _fits(label, line)]
            bad.append(f"{readme.parent.name}/README.md: [{label}]({target}#L{n}) — "
                       f"{'now at ' + ', '.join(f'L{i}' for i in near) if near else 'not found'}")
    return bad


@pytest.mark.parametrize("stack", STACK_DIRS, ids=lambda p: p.name)
def test_every_server_has_a_readme_whose_line_links_point_where_they_say(stack):
    readme = stack / "README.md"
    assert readme.is_file(), f"servers/{stack.name} has no README.md (servers/README.md says each has one)"
    assert links(readme), f"{readme} links no source line"
    assert not broken(readme), "\n".join(broken(readme)) + "\n(python tests/test_server_docs.py --fix)"


def test_readme_pragma_list_is_shared_toml():
    shared = tomllib.loads((SERVERS / "shared.toml").read_text())
    text = (SERVERS / "README.md").read_text()
    listed = re.search(r"allowed: ([a-z_, ]+)\)", text).group(1).split(", ")
    assert listed == sorted(shared["pragmas"])
    for name, values in shared["pragmas"].items():
        if values == "integer":
            assert f"`{name}`" in text
        else:
            assert f"`{name}` ∈ {'|'.join(values)}" in text, name


def test_readme_knob_table_is_shared_toml():
    """servers/README.md's configuration table: a row per knob of shared.toml, its values (the
    list, in order, or the form) and its default."""
    knobs = tomllib.loads((SERVERS / "shared.toml").read_text())["knobs"]
    rows = {m.group(1): (m.group(2), m.group(3)) for m in
            re.finditer(r"^\| `(LAB_[A-Z_]+)` \| (.*?) \| (.*?) \|$", (SERVERS / "README.md").read_text(), re.M)}
    for name, k in knobs.items():
        assert k["env"] in rows, f"servers/README.md has no row for {k['env']} ({name})"
        values, default = rows[k["env"]]
        want = " \\| ".join(f"`{v}`" for v in k["values"]) if "values" in k else k["form"]
        assert values.startswith(want), (k["env"], values, want)
        if "default" in k:
            want = "empty" if k["default"] == "" else (f"`{k['default']}`" if isinstance(k["default"], str)
                                                      else str(k["default"]))
            assert default.startswith(want), (k["env"], default, want)


def test_openapi_health_knobs_are_shared_toml():
    """/health's `knobs` in openapi.yaml: every knob of shared.toml (and the database), each
    listed one with shared.toml's values (null besides where the knob means nothing on Postgres)."""
    knobs = tomllib.loads((SERVERS / "shared.toml").read_text())["knobs"]
    spec = yaml.safe_load((SERVERS / "openapi.yaml").read_text())
    found = [v for v in _walk(spec) if isinstance(v, dict) and "knobs" in v.get("properties", {})]
    assert len(found) == 1
    schema = found[0]["properties"]["knobs"]
    assert schema["required"] == ["database", *knobs]
    assert set(schema["properties"]) == {"database", *knobs}
    for name, k in knobs.items():
        if "values" in k:
            assert [v for v in schema["properties"][name]["enum"] if v is not None] == k["values"], name


def _walk(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def fix() -> int:
    """Move each broken link to the nearest line that fits it; print what could not be placed."""
    left = 0
    for stack in STACK_DIRS:
        readme = stack / "README.md"
        if not readme.is_file():
            continue
        text = readme.read_text()

        def move(m: re.Match) -> str:
            nonlocal left
            label, target, n = m.group(1), m.group(2), int(m.group(3))
            lines = (stack / target).read_text().splitlines()
            if 1 <= n <= len(lines) and _fits(label, lines[n - 1]):
                return m.group(0)
            near = sorted((abs(i + 1 - n), i + 1) for i, line in enumerate(lines) if _fits(label, line))
            if not near:
                left += 1
                print(f"{stack.name}: cannot place [{label}]({target}#L{n})")
                return m.group(0)
            return f"[`{label}`]({target}#L{near[0][1]})"
        readme.write_text(LINK.sub(move, text))
    return 1 if left else 0


if __name__ == "__main__" and sys.argv[1:] == ["--fix"]:
    sys.exit(fix())
