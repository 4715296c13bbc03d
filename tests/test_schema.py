"""sqlitelab.core.schema is the one declaration of the stored columns: what results.store_rows
types, what browse describes to Datasette and what browse.undescribed checks a file against."""
from __future__ import annotations

import re
import sqlite3
import string

from sqlitelab import browse
from sqlitelab.core import results, schema

# how sqlite-utils declares a Python type (a float: REAL in a new table, FLOAT when added)
SQL_TYPES = {int: {"INTEGER"}, float: {"REAL", "FLOAT"}, bool: {"INTEGER"}}


def _fields(text: str) -> set[str]:
    return {name.split(".")[0].split("[")[0]
            for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def _columns(path, table: str) -> dict[str, str]:
    con = sqlite3.connect(path)
    try:
        return {r[1]: r[2] for r in con.execute(f"PRAGMA table_info([{table}])")}
    finally:
        con.close()


RUN = {"run_id": "nb-run/sweep", "notebook": "nb", "notebook_run": "nb-run", "experiment": "sweep",
       "scale": "quick", "machine": "a box", "git_commit": "c0ffee", "parameters": {}}


def _a_run(path) -> None:
    results.store_run(RUN, [], path)


def _row(**columns) -> dict:
    """A row as the lab stores it: keyed by run_id, describing itself (schema.DESCRIBED)."""
    return {"run_id": RUN["run_id"], **{k: RUN[k] for k in schema.DESCRIBED}, **columns}


def test_every_column_the_schema_types_or_names_is_described():
    described = {c for t in schema.TABLES.values() for c, text in t["columns"].items() if text}
    assert not set(schema.TYPES) - described
    assert not set(schema.SECOND_KEYS) - set(schema.TABLES["seconds"]["columns"])
    assert schema.SECOND_KEYS[:1 + len(schema.DESCRIBED)] == ("run_id", *schema.DESCRIBED)
    for name, t in schema.TABLES.items():
        assert t["description"], name
        if "run_id" in t["columns"] and name != "runs":  # every row keyed by run_id describes itself
            assert set(schema.DESCRIBED) <= set(t["columns"]), name
    used = {c for t in schema.TABLES.values() for c in t["columns"]}
    assert not set(schema.SHARED) - used, "a shared meaning no table has"
    for name, t in schema.TABLES.items():  # an audited table names its failed rows by its own columns
        assert ("audit_ok" in t["columns"]) == (name in schema.audited()), name
        assert not set(t.get("audited", ())) - set(t["columns"]), name
    assert all(t in {int, float, bool} for t in schema.TYPES.values())


def test_store_rows_types_the_schemas_columns(tmp_path):
    """A typed column first stored empty gets the schema's type, in a new table and when added
    to one that exists; an untyped one does not."""
    db = tmp_path / "results.db"
    _a_run(db)
    typed = list(schema.TYPES)
    half = len(typed) // 2
    results.store_rows("points", [_row(untyped=None, **{c: None for c in typed[:half]})], db)
    results.store_rows("points", [_row(**{c: None for c in typed[half:]})], db)
    declared = _columns(db, "points")
    wrong = {c: declared[c] for c, t in schema.TYPES.items() if declared[c] not in SQL_TYPES[t]}
    assert not wrong
    assert declared["untyped"] == "TEXT"


def test_metadata_describes_exactly_the_schemas_columns(tmp_path):
    db = tmp_path / "results.db"
    _a_run(db)
    tables = browse.metadata(db)["databases"][browse.database_name(db)]["tables"]
    assert list(tables) == list(schema.TABLES)
    for name, t in schema.TABLES.items():
        assert tables[name]["description"] == t["description"]
        assert list(tables[name]["columns"]) == list(t["columns"]), name
        for column, text in t["columns"].items():
            shown = tables[name]["columns"][column]
            assert isinstance(shown, str) and shown, (name, column)
            if isinstance(text, schema.Filled):  # every field filled, nothing else changed
                assert _fields(text) <= set(browse.FILLS), (name, column)
                assert shown == text.format(**browse.FILLS) and not re.search(r"\{[A-Z_]+", shown)
            else:
                assert shown == text
    filled = {f for t in schema.TABLES.values() for text in t["columns"].values()
              if isinstance(text, schema.Filled) for f in _fields(text)}
    assert filled == set(browse.FILLS), "a FILLS entry no description uses, or one missing"
    assert set(browse.VIEW) <= set(schema.TABLES)
    for name, view in browse.VIEW.items():
        shown = set(view.get("facets", ())) | ({view.get("sort_desc")} - {None})
        assert shown <= set(schema.TABLES[name]["columns"]), name


def test_a_column_or_table_the_schema_does_not_know_is_undescribed(tmp_path):
    db = tmp_path / "results.db"
    _a_run(db)
    results.store_rows("points", [_row(server="s", rps=1.0)], db)
    assert browse.undescribed(db) == []
    results.store_rows("points", [_row(server="s", not_in_the_schema_ms=2.0)], db)
    results.store_rows("no_such_table", [_row(x=1)], db)
    assert browse.undescribed(db) == ["no_such_table", "points.not_in_the_schema_ms"]
