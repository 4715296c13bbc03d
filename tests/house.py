"""The house's shape in numbers, for a change that moves code (not a test: a measurement).

    python tests/house.py [CHECKOUT]      # default: this checkout

Prints the longest chain of module-level imports between sqlitelab's modules (each module
imports the next), the functions longer than 100 lines and those taking ten or more parameters.
For the same numbers before a change: `git worktree add /tmp/before REV` and pass its path.
"""
from __future__ import annotations

import argparse
import ast
import functools
from pathlib import Path

LONG_LINES = 100
MANY_PARAMETERS = 10


def modules(root: Path) -> dict[str, Path]:
    """Every module of the sqlitelab package under `root`, by its dotted name."""
    found = {}
    for f in (root / "sqlitelab").rglob("*.py"):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = f
    return found


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the package's own modules (a name imported from a package is its
    submodule where it is one)."""
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, f in mods.items():
        deps: set[str | None] = set()
        package = f.name == "__init__.py"
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Import):
                deps.update(resolve(a.name) for a in n.names if a.name.startswith("sqlitelab"))
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = m.split(".") if package else m.split(".")[:-1]
                    base = base[:len(base) - (n.level - 1)]
                    mod = ".".join(base + ([n.module] if n.module else []))
                else:
                    mod = n.module or ""
                if mod.startswith("sqlitelab"):
                    deps.update(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else resolve(mod)
                                for a in n.names)
        graph[m] = {d for d in deps if d not in (None, m, "sqlitelab")}
    return graph


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports (the layers' contract keeps the graph free of cycles)."""
    @functools.cache
    def from_(m: str) -> tuple[str, ...]:
        return max(((m, *from_(d)) for d in graph[m]), key=len, default=(m,))
    return list(max((from_(m) for m in graph), key=len))


def functions(mods: dict[str, Path]) -> list[tuple[int, int, str]]:
    """(lines, parameters, module.function) of every function."""
    out = []
    for m, f in mods.items():
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                out.append((n.end_lineno - n.lineno + 1, params, f"{m}.{n.name}"))
    return sorted(out, reverse=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    root = ap.parse_args(argv).checkout
    mods = modules(root)
    chain = longest_chain(imports(mods))
    fns = functions(mods)
    print(f"{len(mods)} modules; longest import chain {len(chain)}: {' -> '.join(chain)}")
    long = [f for f in fns if f[0] > LONG_LINES]
    print(f"{len(long)} functions over {LONG_LINES} lines: "
          + (", ".join(f"{name} ({lines})" for lines, _, name in long) or "none"))
    many = sorted((f for f in fns if f[1] >= MANY_PARAMETERS), key=lambda f: -f[1])
    print(f"{len(many)} functions of {MANY_PARAMETERS} or more parameters: "
          + ", ".join(f"{name} ({params})" for _, params, name in many))


if __name__ == "__main__":
    main()
