"""One scenario registry (sqlitelab/load/scenarios.toml) from which every generator takes what it
sends (issue 13). The registry is checked as it loads; both generators are run against a
recording loopback server and must send the same requests: same methods, paths, bodies,
headers, redirects followed, ids in range. Change how one generator reads a scenario and the
other no longer agrees."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sqlitelab.core import config, processes
from sqlitelab.infra import databases
from sqlitelab.load import commands, driver as load, scenarios, wrk

REQUESTS = 24  # per generator and scenario: enough that a 50 % draw shows both requests
ENV = {"LAB_USERS_ROWS": "3", "LAB_ITEMS": "2", "LAB_PAYLOAD_BYTES": "5", "LAB_WRITE_SHARE": "0.5",
       "LAB_DELAY_MS": "7", "LAB_FOLLOW_REDIRECTS": "1"}


class Recorder(BaseHTTPRequestHandler):
    """Answers as the contract does, as far as a generator can tell, and records each request."""
    protocol_version = "HTTP/1.1"
    seen: list = []
    next_id = [100]

    def log_message(self, *a):
        pass

    def _answer(self, status: int, body: bytes = b"ok", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else None
        self.seen.append((self.command, self.path, body, self.headers.get("Content-Type")))
        if self.command == "POST" and self.path == "/requests":
            return self._answer(302, b"", {"Location": "/requests/1"})
        if self.command == "POST" and self.path == "/items":
            self.next_id[0] += 1
            return self._answer(201, json.dumps({"id": self.next_id[0]}).encode(),
                                {"Content-Type": "application/json"})
        if self.command == "POST" and self.path == "/metrics":
            return self._answer(201, b'{"ids": []}', {"Content-Type": "application/json"})
        return self._answer(200)

    do_GET = do_POST = _handle


def recorder() -> ThreadingHTTPServer:
    """A recording server of its own (its own list of requests seen), on a loopback port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("OwnRecorder", (Recorder,), {"seen": []}))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def command(generator: str, scenario: str, url: str, out) -> tuple[list, dict]:
    """The command line and environment that make `generator` send REQUESTS requests of
    `scenario` with 2 users."""
    spec = scenarios.write_spec(scenario, ENV, out / "scenario.json")
    env = {**os.environ, **ENV, "LAB_SPEC": str(spec), "LAB_OUT_DIR": str(out), "LAB_T0": "0",
           "LAB_T1": repr(time.time() + 60), "LAB_TARGET": str(REQUESTS)}
    if generator == "locust":
        cmd = [sys.executable, "-m", "locust", "-f", str(commands.LOCUSTFILE), "--headless", "-u", "2",
               "-r", "2", "--run-time", "30s", "--stop-timeout", "5", "--host", url,
               "--only-summary", "--loglevel", "WARNING", "LabScenario"]
    else:
        cmd = [str(config.LOADGEN_BIN), "-spec", str(spec), "-users", "2", "-host", url,
               "-max-seconds", "30"]
    return cmd, env


@pytest.fixture(scope="module")
def sent(tmp_path_factory) -> dict:
    """What each generator sent for each scenario, as recorded: every (generator, scenario)
    runs at once, each against a recorder of its own (Locust's start-up dominates, so one at a
    time would take half a minute). Every process is stopped by its group, also on failure."""
    commands.build_loadgen()
    runs = {}
    try:
        for generator in commands.GENERATORS:
            for scenario in scenarios.SCENARIOS:
                out = tmp_path_factory.mktemp(f"{generator}-{scenario}")
                httpd = recorder()
                cmd, env = command(generator, scenario, f"http://127.0.0.1:{httpd.server_address[1]}", out)
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                runs[generator, scenario] = (httpd, proc)
        got = {}
        for key, (httpd, proc) in runs.items():
            log, _ = proc.communicate(timeout=90)
            got[key] = (proc.returncode, log.decode()[-2000:], list(httpd.RequestHandlerClass.seen))
        return got
    finally:
        for httpd, proc in runs.values():
            processes.stop(proc)
            httpd.shutdown()
            httpd.server_close()


def shape(request: tuple) -> tuple:
    method, path, body, ctype = request
    return method, re.sub(r"\d+", "N", path), body and re.sub(r"\d+", "N", body), ctype


@pytest.mark.harness  # starts a Locust and a loadgen per scenario (`sent`)
@pytest.mark.parametrize("scenario", list(scenarios.SCENARIOS))
def test_locust_and_loadgen_send_the_same_requests(scenario, sent):
    got = {}
    for g in commands.GENERATORS:
        returncode, log, got[g] = sent[g, scenario]
        assert returncode == 0, (g, log)
    shapes = {g: {shape(r) for r in reqs} for g, reqs in got.items()}
    assert shapes["locust"] == shapes["loadgen"], shapes
    spec = scenarios.compile(scenario, ENV)
    assert len(shapes["locust"]) >= len(spec["requests"]), shapes  # every request drawn (mix: both)
    for g, reqs in got.items():
        assert len(reqs) >= REQUESTS, (g, len(reqs))
        for method, path, body, ctype in reqs:
            if path.startswith("/users/"):
                assert 1 <= int(path.split("/")[2]) <= 3, (g, path)
            if path.startswith("/items/"):  # existing ids: 1..2, then those POST /items returned
                assert 1 <= int(path.split("/")[2]) <= Recorder.next_id[0], (g, path)
            if body is not None:
                json.loads(body)
                assert ctype == "application/json", (g, path, ctype)


def test_registry_declares_each_scenario_once_and_compiles():
    assert list(load.SCENARIOS) == list(scenarios.SCENARIOS)
    for name, sc in scenarios.SCENARIOS.items():
        spec = scenarios.compile(name, {})
        names = [f"{r['method']} {r['name']}" for r in spec["requests"]]
        assert sc.write is None or sc.write in names
        assert sc.counter is None or sc.counter in databases.COUNTERS
    mix = scenarios.compile("mix", {"LAB_PAYLOAD_BYTES": "3", "LAB_WRITE_SHARE": "0.25"})
    assert mix["requests"][0]["body"] == [{"lit": json.dumps({"payload": "ppp"})}]  # json.dumps' form
    assert mix["requests"][0]["share"] == 0.25 and mix["max_id"] == 1000
    assert scenarios.SCENARIOS["mix"].env == ["LAB_ITEMS", "LAB_PAYLOAD_BYTES", "LAB_WRITE_SHARE"]
    assert scenarios.only_writes("mix", {"LAB_WRITE_SHARE": "1"}) and not scenarios.only_writes("mix", {})


@pytest.mark.parametrize("env,message", [
    ({"LAB_USERS_ROWS": "0"}, "LAB_USERS_ROWS='0' must be in 1.."),
    ({"LAB_WRITE_SHARE": "often"}, "LAB_WRITE_SHARE='often' is not a number"),
    ({"LAB_DELAY_MS": "10001"}, "LAB_DELAY_MS='10001' must be in 0..10000"),
])
def test_a_bad_value_is_refused_in_one_line(env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        for name in scenarios.SCENARIOS:
            scenarios.compile(name, env)


def test_a_registry_that_contradicts_itself_is_refused():
    import tomllib
    raw = tomllib.loads(scenarios.REGISTRY.read_text())
    raw["scenarios"]["mix"]["write"]["request"] = "POST /itemz"
    with pytest.raises(scenarios.RegistryError, match="not one of its requests"):
        scenarios._check(raw)
    raw = tomllib.loads(scenarios.REGISTRY.read_text())
    raw["scenarios"]["hello"]["requests"][0]["path"] = "/hello/{{nobody}}"
    with pytest.raises(scenarios.RegistryError, match="nobody"):
        scenarios._check(raw)


def test_wrk_scripts_come_from_the_registry_too():
    lua = wrk.script("user-update", {"users_rows": 3})
    assert '"/users/" .. math.random(1, 3)' in lua and 'math.random(1, 999)' in lua
    assert wrk.expressible("rails-writes", {}) == "wrk does not follow the redirect"
