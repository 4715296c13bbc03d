"""Your own app (sqlitelab.infra.apps): what the lab is given for it is checked before any load,
and each refusal is one line that says what to change. Real SQLite files and real programs."""
from __future__ import annotations

import os
import sqlite3
import sys

import httpx
import psutil
import pytest

from sqlitelab.core import config, results
from sqlitelab.experiments import your_app
from sqlitelab.infra import apps, databases, servers
from sqlitelab.load import commands
from sqlitelab.infra.apps import AppError


@pytest.fixture
def app_db(tmp_path):
    """A SQLite file like an app's own: a table of orders, three rows, in WAL mode."""
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=wal")
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
    con.executemany("INSERT INTO orders (item) VALUES (?)", [("a",), ("b",), ("c",)])
    con.commit()
    con.close()
    return path


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text and text
    return text


def test_an_app_by_command_or_by_url(app_db):
    app = apps.App.of(command=f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1",
                      db=app_db, count_query="SELECT count(*) FROM orders")
    assert app.command[0] == sys.executable and app.db == app_db.resolve() and app.url is None
    assert apps.App.of(url="http://127.0.0.1:8123/").url == "http://127.0.0.1:8123"
    assert apps.App.of(url="http://localhost:8123").url == "http://localhost:8123"
    assert apps.App.of(url="http://[::1]:8123").url == "http://[::1]:8123"


@pytest.mark.parametrize("kw,says", [
    ({}, "not both and not neither"),
    ({"command": "x {port}", "url": "http://127.0.0.1:1"}, "not both and not neither"),
    ({"command": ""}, "with {port} where its port goes"),
    ({"command": "python3 -m http.server"}, "has no {port}"),
    ({"command": "python3 -m http.server {port} --directory {db}"}, "no database was given"),
    ({"command": "no-such-program-here --port {port}"}, "is not an executable program here"),
    ({"command": "/no/such/dir/app {port}"}, "is not an executable program here"),
    ({"command": "python3 'unclosed {port}"}, "cannot be split into words"),
    ({"url": "http://10.0.0.1:80"}, "loopback only"),
    ({"url": "http://example.com:80"}, "loopback only"),
    ({"url": "http://198.18.0.1:80"}, "loopback only"),
    ({"url": "https://127.0.0.1:8443"}, "plain http"),
    ({"url": "http://127.0.0.1"}, "names no port"),
    ({"url": "http://127.0.0.1:8000/api?x=1"}, "give the app's root"),
    ({"url": "http://127.0.0.1:99999"}, "is not a URL"),
    ({"url": "http://127.0.0.1:1", "ready_path": "health"}, "must be a path starting with /"),
    ({"url": "http://127.0.0.1:1", "env": {"A": 1}}, "env must map names to strings"),
    ({"url": "http://127.0.0.1:1", "count_query": "SELECT 1"}, "give db= too"),
])
def test_bad_app_parameters_are_refused_in_one_line(kw, says):
    with pytest.raises(AppError) as e:
        apps.App.of(**kw)
    assert says in one_line(e)


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    empty = tmp_path / "empty.db"
    empty.touch()
    for path, says in [(text, "is not a SQLite database"), (empty, "the file is empty"),
                       (tmp_path / "missing.db", "is not a file"), (tmp_path, "is not a file")]:
        with pytest.raises(AppError) as e:
            apps.App.of(url="http://127.0.0.1:1", db=path)
        assert says in one_line(e)
    assert not (tmp_path / "missing.db").exists(), "checking a missing file created it"


@pytest.mark.parametrize("query,says", [
    ("DELETE FROM orders", "must only read"),
    ("INSERT INTO orders (item) VALUES ('x')", "must only read"),
    ("PRAGMA journal_mode=delete", "must only read"),
    ("ATTACH DATABASE ':memory:' AS x", "must only read"),
    ("SELECT count(*) FROM orders; DELETE FROM orders", "must be one statement"),
    ("SELECT count(*) FROM no_such_table", "no such table"),
    ("SELECT id FROM orders", "one row of one integer"),
    ("SELECT count(*), 1 FROM orders", "one row of one integer"),
    ("SELECT 'three'", "one row of one integer"),
    ("SELECT count(* FROM orders", "syntax error"),
    ("", "must be a SELECT"),
])
def test_a_count_query_that_is_not_one_read_only_select_of_a_number_is_refused(app_db, query, says):
    before = app_db.read_bytes(), (app_db.with_name("app.db-wal").read_bytes()
                                   if app_db.with_name("app.db-wal").exists() else None)
    with pytest.raises(AppError) as e:
        apps.App.of(url="http://127.0.0.1:1", db=app_db, count_query=query)
    assert says in one_line(e)
    con = sqlite3.connect(app_db)
    assert con.execute("SELECT count(*) FROM orders").fetchone()[0] == 3
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    assert before[0] == app_db.read_bytes() or before[1] is not None  # nothing written to the file


def test_a_database_the_app_creates_is_allowed_for_an_app_the_lab_starts(tmp_path, app_db):
    """A missing or empty `db` is one the app creates: allowed with a command (its file and count
    query checked once the app answers, apps.check_started), refused with a url (that app is
    running: its file is there). A schema-less file waits for the app too."""
    command = f"{sys.executable} -m http.server {{port}}"
    empty = tmp_path / "empty.db"
    empty.touch()
    bare = tmp_path / "bare.db"
    sqlite3.connect(bare).execute("PRAGMA user_version = 1").connection.close()
    for db in (tmp_path / "missing.db", empty, bare):
        app = apps.App.of(command=command, db=db, count_query="SELECT count(*) FROM notes")
        assert app.db == db.resolve() and app.creates_db == (db != bare)
    assert not (tmp_path / "missing.db").exists(), "checking a missing file created it"
    with pytest.raises(AppError) as e:
        apps.App.of(url="http://127.0.0.1:1", db=tmp_path / "missing.db")
    assert "is not a file" in one_line(e)
    made = apps.App.of(command=command, db=tmp_path / "missing.db", count_query="SELECT count(*) FROM notes")
    with pytest.raises(AppError) as e:
        apps.check_started(made, tmp_path / "missing.db")
    assert one_line(e).startswith("once your app answered /: db ") and "does it, at start?" in str(e.value)
    with pytest.raises(AppError) as e:
        apps.check_started(apps.App.of(command=command, db=bare, count_query="SELECT count(*) FROM notes"), bare)
    assert "no such table: notes" in one_line(e) and "at start?" not in str(e.value)
    assert apps.check_started(apps.App.of(command=command, db=app_db, count_query="SELECT count(*) FROM orders"),
                              app_db) == 3
    copy = your_app.copy_database(tmp_path / "missing.db", tmp_path / "run" / "app" / "missing.db")
    assert not copy.exists() and your_app.copy_database(empty, tmp_path / "run" / "e.db").stat().st_size == 0


def test_never_the_wrong_app(tmp_path):
    """Settings of your own mean your app; an example named beside them is refused in one line
    naming both; settings that name no app (no command, no url) are refused; nothing given runs
    the example. The dict settings may come as JSON text (papermill's -p), bad JSON refused."""
    mine = {"command": f"{sys.executable} -m http.server {{port}}", "locustfile": "x.py"}
    app, load, example = your_app.setup(None, tmp_path, **mine, url=None)
    assert app.command[0] == sys.executable and load == {"locustfile": "x.py"} and example is None
    assert your_app.figures_dir(example, tmp_path / "run") == tmp_path / "run" / "figures"
    for example in ("datasette", "bundled"):
        with pytest.raises(ValueError) as e:
            your_app.setup(example, tmp_path, **mine)
        assert f"example {example!r} and settings of your own (command, locustfile)" in one_line(e)
    with pytest.raises(ValueError) as e:
        your_app.setup(None, tmp_path, db=str(tmp_path / "x.db"), locustfile="x.py")
    assert "name no app: give its command" in one_line(e)
    app, load, example = your_app.setup(None, tmp_path, command=None, url=None)
    assert example == your_app.DEFAULT_EXAMPLE and app.name == your_app.examples()[example]["name"]
    assert "locustfile" in load and your_app.figures_dir(example, tmp_path) is None  # the collection's
    _, load, _ = your_app.setup(None, tmp_path, **mine, writes='{"method": "POST", "path": "^/notes$", "status": [201]}',
                             lock='{"status": [500, 599]}')
    assert load["writes"] == {"method": "POST", "path": "^/notes$", "status": [201]} and load["lock"] == {"status": [500, 599]}
    for text, says in (('{"method": "POST",', "is text that is not JSON"), ('[201]', "must be a dict")):
        with pytest.raises(ValueError) as e:
            your_app.setup(None, tmp_path, **mine, writes=text)
        assert says in one_line(e)


def test_the_count_is_read_on_a_read_only_connection(app_db):
    query = "WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o"
    assert apps.check_count_query(app_db, query) == 3
    with apps.read_only(app_db) as con:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            con.execute("INSERT INTO orders (item) VALUES ('x')")
    assert apps.count(app_db, query) == 3


def test_the_command_gets_its_port_and_database_and_nothing_else_in_braces(app_db):
    argv = apps.check_command("sh -c 'echo {\"port\": {port}}' {db}", app_db)
    assert apps.command_line(argv, 18080, app_db) == [
        "sh", "-c", 'echo {"port": 18080}', os.fspath(app_db)]


# ------------------------------------------------------------------ contract: started by the lab

@pytest.mark.contract
def test_a_bundled_server_started_through_the_command_path_as_a_users_app(tmp_path):
    """go-nethttp started the way a user's app is: its own command line with {port} and {db}
    (the lab sets no LAB_* variable for an app), up once / answers, stopped with its group."""
    db = databases.prepare_database(tmp_path / "lab.db", users=10, items=10)
    run = config.SERVERS_DIR / "go-nethttp" / "run"
    app = apps.App.of(name="Go through a command", command=f"env LAB_PORT={{port}} LAB_DB={{db}} {run}",
                      db=db, count_query="SELECT count(*) FROM items")
    before = apps.count(app.db, app.count_query)
    with apps.start_app(app, app.db, cpus="0", log_path=tmp_path / "app.log") as srv:
        assert srv.health == {"status": 404} and srv.pinned == "0"
        assert httpx.post(srv.url + "/items", json={"payload": "x"}).status_code == 201
        assert apps.count(app.db, app.count_query) == before + 1
        pid = srv.pid
    assert not srv.alive() and not psutil.pid_exists(pid)


@pytest.mark.contract
def test_a_command_that_exits_or_never_listens_is_refused_with_its_log(tmp_path):
    exits = apps.App.of(command=f"{sys.executable} -c \"import sys; print('boom: no config', flush=True); "
                                f"sys.exit(3)\" {{port}}")
    with pytest.raises(servers.ServerStartError) as e:
        apps.start_app(exits, None, cpus=None, log_path=tmp_path / "exits.log")
    first, *tail = str(e.value).splitlines()
    assert "exited with status 3 before answering /" in first and "boom: no config" in tail
    silent = apps.App.of(command=f"{sys.executable} -c \"import time; print('listening soon', flush=True); "
                                 f"time.sleep(60)\" {{port}}")
    with pytest.raises(servers.ServerStartError) as e:
        apps.start_app(silent, None, cpus=None, log_path=tmp_path / "silent.log", timeout=1.0)
    first, *tail = str(e.value).splitlines()
    assert "did not answer / within 1 s" in first and "listening soon" in tail
    assert not servers.our_processes()


# ------------------------------------------------------------------ harness: measured by the lab

# A locustfile as Locust's documentation writes one (HttpUser, @task with weights, wait_time).
SHOP_LOCUSTFILE = '''
from locust import HttpUser, between, task


class ShopUser(HttpUser):
    wait_time = between(0, 0.002)

    @task(9)
    def read_item(self):
        self.client.get("/items/1")

    @task
    def add_item(self):
        self.client.post("/items", json={"payload": "a basket"})
'''
ADDS_ITEMS = {"method": "POST", "path": "^/items$", "status": [201]}
COUNTS_ITEMS = "SELECT count(*) FROM items"


def command_of(stack_dir, **env) -> str:
    """A stack's `run` started as a user's app: its port and file where the command puts them."""
    pairs = " ".join(f"{k}={v}" for k, v in {"LAB_PORT": "{port}", "LAB_DB": "{db}", **env}.items())
    return f"env {pairs} {stack_dir / 'run'}"


def measured(tmp_path, app, **plan):
    p = your_app.plan(app=app, duration=plan.pop("duration", 0.8), warmup=plan.pop("warmup", 0.2),
                      **plan)
    return your_app.measure(p, notebook="10-your-app", run_id=f"app-{tmp_path.name}",
                            results_db=tmp_path / "results.db", runs_dir=tmp_path / "runs",
                            progress=False, calibration=False)


@pytest.fixture
def shop_locustfile(tmp_path):
    path = tmp_path / "locustfile.py"
    path.write_text(SHOP_LOCUSTFILE)
    return path


@pytest.mark.harness
def test_a_users_locustfile_against_an_app_started_by_its_command(tmp_path, shop_locustfile):
    """go-nethttp started as a user's app, loaded by a user's locustfile: every acknowledged write
    is in the copy of the file (the user's own untouched), the WAL recorded second by second,
    the page cache's share and the integrity check stored with each level."""
    db = databases.prepare_database(tmp_path / "shop.db", items=100)
    app = apps.App.of(name="a shop", command=command_of(config.SERVERS_DIR / "go-nethttp"), db=db,
                      count_query=COUNTS_ITEMS, env=servers.knob_env("rails71", stack="go-nethttp"))
    pts = measured(tmp_path, app, levels=[1, 4], locustfile=shop_locustfile, writes=ADDS_ITEMS)
    assert list(pts["users"]) == [1, 4] and (pts["requests"] > 0).all()
    assert pts["audit_ok"].all() and (pts["acked_writes"] > 0).all()
    assert (pts["rows_written"] >= pts["acked_writes"]).all()
    assert (pts["integrity"] == "ok").all() and pts["db_cached_before"].notna().all()
    assert apps.count(db, COUNTS_ITEMS) == 100, "the user's own file was written"
    seconds = results.read_sql("SELECT * FROM seconds", (), tmp_path / "results.db")
    assert len(seconds) >= 2 and seconds["wal_bytes"].max() > 0
    assert set(results.load_points(tmp_path / "results.db")["notebook"]) == {"10-your-app"}


@pytest.mark.harness
def test_the_audit_catches_the_lossy_server_started_as_a_users_app(tmp_path, shop_locustfile):
    db = databases.prepare_database(tmp_path / "lossy.db", items=100)
    lossy = config.PROJ_ROOT / "tests" / "stacks" / "lossy-python"
    app = apps.App.of(name="a lossy app", db=db, count_query=COUNTS_ITEMS,
                      command=command_of(lossy, LAB_LOSSY_DROP="0.2", LAB_LOSSY_SEED="7"))
    pts = measured(tmp_path, app, levels=[4], locustfile=shop_locustfile, writes=ADDS_ITEMS)
    assert not pts["audit_ok"].any()
    assert (pts["rows_written"] < pts["acked_writes"]).all()


@pytest.mark.harness
def test_lock_errors_of_an_app_by_its_rule(tmp_path):
    """ruby-puma with Rails 7.1's retries (the misconfiguration of seed 001) started through the
    command path: its 503s with "database is locked" are lock errors by the default rule; a rule
    whose pattern its bodies do not match counts the same responses as other server errors."""
    env = {**servers.knob_env("rails71-retries", stack="ruby-puma"), "LAB_PROCESSES": "2"}
    db = databases.prepare_database(tmp_path / "metrics.db")
    app = apps.App.of(name="Puma with retries", db=db, env=env,
                      command=command_of(config.SERVERS_DIR / "ruby-puma"))
    pts = measured(tmp_path, app, levels=[16], scenario="metrics-writes", duration=1.5)
    assert pts["busy_errors"].iloc[0] > 0 and pts["server_errors"].iloc[0] == 0
    other = measured(tmp_path / "other", app, levels=[16], scenario="metrics-writes", duration=1.5,
                     lock={"pattern": "no such words in any body"})
    assert other["busy_errors"].iloc[0] == 0 and other["server_errors"].iloc[0] > 0


@pytest.mark.harness
def test_requests_off_the_app_are_refused_unsent_and_fail_the_audit(tmp_path, shop_locustfile):
    off = tmp_path / "off.py"
    off.write_text(SHOP_LOCUSTFILE + '''

class Elsewhere(HttpUser):
    wait_time = between(0.05, 0.1)

    @task
    def away(self):
        self.client.get("http://127.0.0.1:9/not-the-app")
''')
    db = databases.prepare_database(tmp_path / "shop.db", items=100)
    app = apps.App.of(command=command_of(config.SERVERS_DIR / "go-nethttp"), db=db,
                      count_query=COUNTS_ITEMS)
    pts = measured(tmp_path, app, levels=[4], locustfile=off, writes=ADDS_ITEMS)
    assert pts["off_host"].iloc[0] > 0 and not pts["audit_ok"].iloc[0]
    assert "off the app refused" in pts["audit_rule"].iloc[0]


@pytest.mark.harness
def test_an_app_already_listening_is_reached_by_its_url(tmp_path, shop_locustfile):
    db = databases.prepare_database(tmp_path / "shop.db", items=100)
    with servers.start_server("go-nethttp", db, profile="rails71", cpus="0") as srv:
        app = apps.App.of(url=srv.url, db=db, count_query=COUNTS_ITEMS)
        pts = measured(tmp_path, app, levels=[2], locustfile=shop_locustfile, writes=ADDS_ITEMS)
        assert srv.alive(), "the lab stopped an app it did not start"
    assert pts["audit_ok"].all() and pts["server_cpu_pct"].iloc[0] > 0
    with pytest.raises(AppError, match="nothing listens at"):
        your_app.measure(your_app.plan(app=app, levels=[1], duration=0.5, warmup=0.1,
                                       locustfile=shop_locustfile, writes=ADDS_ITEMS),
                         notebook="10-your-app", run_id="nothing", runs_dir=tmp_path / "none",
                         results_db=tmp_path / "none.db", progress=False)


def test_a_locustfile_that_cannot_run_is_refused_in_one_line(tmp_path):
    """Checked in a Python process of its own (it patches the HTTP clients), before any load."""
    cases = {
        "broken.py": ("import no_such_module_here\n", "No module named 'no_such_module_here'"),
        "nouser.py": ("from locust import HttpUser\nREADERS = 3\n", "defines no User class"),
        "shape.py": ("from locust import HttpUser, LoadTestShape, task\n\n"
                     "class U(HttpUser):\n    @task\n    def t(self):\n        self.client.get('/')\n\n"
                     "class Ramp(LoadTestShape):\n    def tick(self):\n        return None\n",
                     "Ramp is a LoadTestShape"),
    }
    for name, (text, says) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError) as e:
            commands.user_classes(tmp_path / name)
        assert says in one_line(e) and "cannot be run" in str(e.value)
    with pytest.raises(ValueError, match="is not a file"):
        commands.user_classes(tmp_path / "missing.py")
    (tmp_path / "good.py").write_text(SHOP_LOCUSTFILE)
    assert commands.user_classes(tmp_path / "good.py") == ["ShopUser"]


def test_a_plan_refuses_what_it_cannot_measure_in_one_line(app_db, tmp_path):
    (tmp_path / "good.py").write_text(SHOP_LOCUSTFILE)
    app = apps.App.of(command=f"{sys.executable} -m http.server {{port}}", db=app_db,
                      count_query="SELECT count(*) FROM orders")
    ok = dict(app=app, levels=[1], duration=1, warmup=0, scenario="mix",
              writes={"method": "POST", "path": "/orders$", "status": [201]})
    assert your_app.plan(**ok).levels == (1,)
    assert your_app.plan(**{**ok, "levels": None, "rates": [100, 200]}).rates == (100.0, 200.0)
    for change, says in [
        ({"levels": None}, "give levels"),
        ({"levels": [0]}, "levels must be a list of user counts >= 1"),
        ({"rates": [0]}, "rates must be a list of requests/s > 0"),
        ({"scenario": None, "locustfile": tmp_path / "good.py", "rates": [100]}, "rates (open loop) need the lab's scenario"),
        ({"scenario": None}, "a scenario (one of scenarios.toml's) or a locustfile"),
        ({"scenario": "no-such"}, "unknown scenario"),
        ({"writes": None}, "say which requests acknowledge one"),
        ({"writes": {"method": "POST", "path": "(", "status": [201]}}, "not a regular expression"),
        ({"writes": {"method": "POST", "path": "/x", "status": [99]}}, "status a list of HTTP statuses"),
        ({"lock": {"status": [503, 500]}}, "a range within 100-599"),
        ({"duration": 0}, "duration must be a number of seconds > 0"),
        ({"open_users": 0, "rates": [10]}, "open_users must be an integer >= 1"),
    ]:
        with pytest.raises(ValueError) as e:
            your_app.plan(**{**ok, **change})
        assert says in one_line(e), (change, str(e.value))
    bare = apps.App.of(command=f"{sys.executable} -m http.server {{port}}")
    with pytest.raises(ValueError, match="audited against the app's count_query"):
        your_app.plan(**{**ok, "app": bare})


def test_notebook_10_stores_every_parameter_it_declares():
    """What a run stores to be re-made where reports look (notebook_parameters) is every parameter
    the notebook's parameters cell declares but `replay` and `run_id`, in its order."""
    from sqlitelab import batch
    from sqlitelab.notebooks import your_app as notebook
    declared = [p for p in batch.parameters(batch.notebooks(["10"])[0]) if p not in ("replay", "run_id")]
    assert list(notebook.PARAMETERS) == declared
    assert notebook.notebook_parameters({"scale": "quick", "example": None}) == \
        {p: ("quick" if p == "scale" else None) for p in declared}
