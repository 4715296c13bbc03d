"""Hosts and runners (sqlitelab.infra.hosts), the namespace network (sqlitelab.infra.netns), and a sweep
whose server and Locust workers run in network namespaces this test makes and removes."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sqlitelab.infra import hosts, netns
from sqlitelab.load import commands, verdicts
from sqlitelab.core import processes
from sqlitelab.experiments import sweep

root_only = pytest.mark.skipif(os.geteuid() != 0 or not hosts.shutil.which("ip"),
                               reason="network namespaces need root and iproute2 (CAP_NET_ADMIN)")


@pytest.mark.parametrize("spec, kind, name", [
    ("local", "local", None), (None, "local", None), ("netns:srv", "netns", "srv"),
    ("ssh:lab@gen1.example", "ssh", "lab@gen1.example")])
def test_a_host_is_local_netns_or_ssh(spec, kind, name):
    h = hosts.Host.parse(spec)
    assert (h.kind, h.name) == (kind, name)
    assert hosts.Host.parse(str(h)) == h


@pytest.mark.parametrize("spec", ["", "docker:x", "netns:", "netns:a b", "local:x", 3, "ssh"])
def test_other_hosts_are_refused_in_one_line(spec):
    with pytest.raises(ValueError, match="a host is 'local'"):
        hosts.Host.parse(spec)


def test_each_runner_says_how_it_runs_a_command():
    assert hosts.Host.parse("local").command(["run"]) == ["run"]
    assert hosts.Host.parse("netns:s").command(["run", "x"]) == ["ip", "netns", "exec", "s", "run", "x"]
    cmd = hosts.Host.parse("ssh:me@m").command(["./run"], {"LAB_DB": "/d b", "PATH": "/x"}, cwd="/lab")
    assert cmd[0] == "ssh" and cmd[-2] == "me@m" and "BatchMode=yes" in cmd
    # only the lab's variables travel, quoted; the remote PID is reported for stop()
    assert "LAB_DB='/d b'" in cmd[-1] and "PATH" not in cmd[-1]
    assert cmd[-1].startswith("cd /lab && { env") and "setsid ./run </dev/null & echo LABPID $!" in cmd[-1]


@pytest.mark.parametrize("host, target", [
    ("local", "198.18.0.2"), ("local", "10.0.0.1"), ("local", "example.com"),
    ("ssh:m1", "m2")])
def test_load_goes_only_to_the_host_the_run_named(host, target):
    with pytest.raises(ValueError, match="load goes to the host the run named"):
        hosts.check_target(target, hosts.Host.parse(host))


def test_loopback_is_a_local_target():
    hosts.check_target("127.0.0.1", hosts.Host.parse("local"))
    hosts.check_target("m1", hosts.Host.parse("ssh:lab@m1"))


@pytest.mark.parametrize("processes, workers, each", [
    (1, ["netns:a", "netns:b"], [1, 1]), (8, ["netns:a", "netns:b"], [4, 4]), (3, ["netns:a"], [3]),
    (4, ["ssh:m1", "ssh:m2"], [16, 16]), (2, ["netns:a", "ssh:m1"], [2, 16])])
def test_workers_on_this_machine_share_its_generator_cpus(processes, workers, each):
    """A machine of its own runs one process per CPU it has (here: 16, as `nproc` says there)."""
    got = commands.worker_processes(processes, [hosts.Host.parse(w) for w in workers], cpus_of=lambda h: 16)
    assert list(got.values()) == each


@pytest.mark.parametrize("kwargs, message", [
    ({"server_host": "ssh:m1", "server_cpus": "0"}, "every CPU of its machine"),
    ({"generator_hosts": "netns:g"}, "list of hosts"),
    ({"generator_hosts": ["local"]}, "leave it empty"),
    ({"generator_hosts": ["netns:g"], "generator": "loadgen"}, "run Locust workers"),
    ({"server_host": "netns:nope-not-here"}, "no network namespace"),
    ({"server_host": "nowhere"}, "a host is 'local'"),
])
def test_bad_hosts_are_refused_before_anything_starts(kwargs, message, tmp_path):
    with pytest.raises((ValueError, hosts.HostError), match=message):
        sweep.sweep(notebook="test-hosts", servers=["go-nethttp"], levels=[1], progress=False,
                    results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                    **kwargs)


@root_only
def test_a_network_of_namespaces_is_made_and_removed():
    with netns.Network(["srv", "gen"]) as net:
        made = netns.ours()
        assert {net.namespace("srv"), net.namespace("gen")} <= set(made)
        srv = net.host("srv")
        assert srv.address() == net.address("srv") and srv.reach_back() == net.gateway
        # the benchmarking range and nothing else: the namespace's own /24, no default route
        routes = subprocess.run(["ip", "-n", srv.name, "-j", "route"], capture_output=True,
                                text=True).stdout
        assert [r["dst"] for r in json.loads(routes)] == [str(net.net)]
        assert net.net.subnet_of(hosts.BENCH_NET)
        srv.check()
    assert not {net.namespace("srv"), net.namespace("gen")} & set(netns.ours())
    links = subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout
    assert not [l["ifname"] for l in json.loads(links) if net.tag in l["ifname"]]


@pytest.fixture
def net():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CAP_NET_ADMIN)")
    with netns.Network(["srv", "gen1", "gen2"]) as n:
        yield n
        for name in n.names:  # nothing the lab started is left in any namespace
            assert netns.namespace_pids(n.namespace(name)) == []
    assert not [ns for ns in netns.ours() if ns.startswith(f"{netns.PREFIX}{n.tag}-")]


@pytest.mark.harness
def test_a_sweep_across_namespaces_is_distributed_and_audited(net, tmp_path):
    """The server in one namespace, Locust's master here and a worker in each of two others:
    points audited like any other, the request count within 1 % of the server's own."""
    df = sweep.sweep(notebook="test-hosts", servers=["go-nethttp"], profiles=["single-writer"],
                     scenario="rails-writes-noredirect", levels=[8], duration=3, warmup=1, progress=False,
                     results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                     server_host=str(net.host("srv")),
                     generator_hosts=[str(net.host("gen1")), str(net.host("gen2"))])
    assert len(df) == 1
    p = df.iloc[0]
    assert p.audit_ok and p.integrity == "ok" and p.rows_written == p.acked_writes > 0
    assert p.server_host == str(net.host("srv"))
    assert p.generator_hosts == f"{net.host('gen1')},{net.host('gen2')}"
    assert p.processes == 2  # one worker per generator namespace on this machine's generator CPUs
    assert verdicts.counts_agree(p), p
    assert not p.ramp_in_window  # the window opened once both workers' users had spawned
    level = next((tmp_path / "runs").rglob("u0008-r1"))
    procs = [json.loads(f.read_text()) for f in level.glob("proc-*.json")]
    assert len(procs) == 2 and all(q["count"] > 0 for q in procs)
    assert (level / "locust-worker1.log").exists() and (level / "locust-worker2.log").exists()


@pytest.mark.harness
def test_an_interrupted_namespaced_sweep_leaves_nothing_running(net, tmp_path):
    """SIGINT (an interrupted notebook cell) in the middle of a distributed level: the server,
    the master and every worker are stopped by their PIDs."""
    script = textwrap.dedent(f"""
        import signal
        # a shell that starts the tests in the background (`make test &`) passes SIGINT on
        # ignored, and Python then keeps ignoring it: take it as a notebook kernel does
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from sqlitelab.experiments import sweep
        sweep.sweep(notebook="test-hosts", servers=["go-nethttp"], profiles=["single-writer"],
                    scenario="rails-writes-noredirect", levels=[4], duration=60, progress=False,
                    results_db={str(tmp_path / 'r.db')!r}, runs_dir={str(tmp_path / 'runs')!r},
                    calibration=False, server_host={str(net.host('srv'))!r},
                    generator_hosts=[{str(net.host('gen1'))!r}, {str(net.host('gen2'))!r}])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        # wait until the server and both workers are up in their namespaces
        while time.monotonic() < deadline and not all(
                netns.namespace_pids(net.namespace(n)) for n in net.names):
            time.sleep(0.2)
        in_ns = {n: netns.namespace_pids(net.namespace(n)) for n in net.names}
        assert all(in_ns.values()), f"not everything started: {in_ns}"
        time.sleep(2)  # inside the level
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert b"KeyboardInterrupt" in out
    for n in net.names:
        assert netns.namespace_pids(net.namespace(n)) == [], f"left running in {n}"
    started = [pid for pids in in_ns.values() for pid in pids]
    assert not [pid for pid in started if os.path.exists(f"/proc/{pid}")]


# ---------------------------------------------------------------------------- ssh runner

@pytest.fixture
def sshd(net, tmp_path):
    """A real sshd in the server namespace, with a throw-away host key and client key; yields
    the Host that reaches it (root@<namespace address>, the client key, a known_hosts of its own)."""
    with running_sshd(net, "srv", tmp_path) as host:
        yield host


@contextlib.contextmanager
def running_sshd(net, name, tmp_path):
    """sshd in namespace `name`, stopped by its PID on exit (its sessions end with it)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    sshd_bin = hosts.shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd_bin) or not hosts.shutil.which("ssh-keygen"):
        pytest.skip("openssh-server and openssh-client are needed (make setup installs them)")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / key)],
                       check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client_key.pub").read_text())
    addr = net.address(name)
    (tmp_path / "sshd_config").write_text(textwrap.dedent(f"""
        ListenAddress {addr}:22
        HostKey {tmp_path / 'host_key'}
        AuthorizedKeysFile {tmp_path / 'authorized_keys'}
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        UsePAM no
        StrictModes no
        PidFile none
    """))
    os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen(["ip", "netns", "exec", net.namespace(name), sshd_bin, "-D", "-e",
                             "-f", str(tmp_path / "sshd_config")], start_new_session=True,
                            stdout=open(tmp_path / "sshd.log", "wb"), stderr=subprocess.STDOUT)
    try:
        import socket
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((addr, 22), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("sshd did not start:\n" + (tmp_path / "sshd.log").read_text())
                time.sleep(0.05)
        yield hosts.Host.parse(f"ssh:root@{addr}", ssh_options=(
            "-i", str(tmp_path / "client_key"), "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}"))
    finally:
        processes.stop(proc, grace=5)
        deadline = time.monotonic() + 10  # a session's own sshd ends once its client has gone
        while netns.namespace_pids(net.namespace(name)) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.mark.contract
def test_the_ssh_runner_runs_commands_on_a_real_sshd(sshd, net):
    sshd.check()
    assert sshd.run(["echo", "over ssh"]) == "over ssh\n"
    assert sshd.address() == net.address("srv")
    assert sshd.reach_back() == net.gateway  # where its Locust workers would find the master


@pytest.mark.contract
def test_the_ssh_runner_stops_what_it_started_by_its_remote_pid(sshd, net, tmp_path):
    got = hosts.start(sshd, ["sleep", "600"], {"LAB_X": "a b", "PATH": os.environ["PATH"]},
                      tmp_path / "sleep.log", cwd=str(tmp_path))
    assert got.remote_pid and got.remote_pid != got.popen.pid
    assert got.remote_pid in netns.namespace_pids(net.namespace("srv"))  # it runs in sshd's host
    deadline = time.monotonic() + 5  # env and setsid exec in turn: the same PID becomes sleep
    while not open(f"/proc/{got.remote_pid}/cmdline").read().startswith("sleep"):
        assert time.monotonic() < deadline, open(f"/proc/{got.remote_pid}/cmdline").read()
        time.sleep(0.02)
    hosts.stop(got, grace=5)
    assert not os.path.exists(f"/proc/{got.remote_pid}") and got.popen.poll() is not None


@pytest.mark.contract
def test_an_ssh_host_that_refuses_is_one_clear_line(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")],
                   check=True)
    stranger = hosts.Host.parse(str(sshd), ssh_options=(
        "-i", str(tmp_path / "other"), "-o", f"UserKnownHostsFile={tmp_path / 'kh'}"))
    with pytest.raises(hosts.HostError, match=r"ssh:root@198\.18\.\d+\.2: true exited 255"):
        stranger.check()


@pytest.mark.harness
def test_a_locust_worker_over_ssh_reports_its_own_measurements_and_cpu(net, tmp_path):
    """One worker over ssh (a real sshd in a generator namespace), one in a namespace: the ssh
    worker's spec is pushed to it and its measurement file fetched back; it reports its own CPU."""
    with running_sshd(net, "gen1", tmp_path / "sshd") as gen1:
        df = sweep.sweep(notebook="test-hosts", servers=["go-nethttp"], profiles=["single-writer"],
                         scenario="rails-writes-noredirect", levels=[8], duration=3, warmup=1, progress=False,
                         results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                         server_host=str(net.host("srv")),
                         generator_hosts=[gen1, str(net.host("gen2"))])
    p = df.iloc[0]
    assert p.audit_ok and p.rows_written == p.acked_writes > 0
    assert p.generator_hosts == f"{gen1},{net.host('gen2')}"
    assert verdicts.counts_agree(p), p
    level = next((tmp_path / "runs").rglob("u0008-r1"))
    procs = [json.loads(f.read_text()) for f in level.glob("proc-*.json")]
    ssh = [q for q in procs if q["remote_host"]]
    # one process per CPU of the ssh host (`nproc` there), one for the namespace on this machine
    assert len(ssh) == os.cpu_count() and len(procs) == len(ssh) + 1 == p.processes
    assert {q["remote_host"] for q in ssh} == {str(gen1)} and all(q["count"] > 0 for q in ssh)
    assert all(q["cpu_t1"] > q["cpu_t0"] >= 0 and q["cpus"] >= 1 for q in ssh)
    assert p.gen_cpus == 1 + ssh[0]["cpus"]  # this machine's generator CPU, and the ssh host's


@pytest.mark.harness
def test_a_server_over_ssh_is_audited_and_sampled_on_its_host(net, tmp_path):
    """The server behind a real sshd (in the server namespace): its database pushed to the same
    path there, started by its own `run` with the remote PID, its CPU sampled there, the audit's
    counts and integrity_check run there; a Locust worker in another namespace. Stopped by the
    remote PID: nothing left in the namespace afterwards (the `net` fixture checks)."""
    with running_sshd(net, "srv", tmp_path / "sshd") as srv_host:
        df = sweep.sweep(notebook="test-hosts", servers=["go-nethttp"], profiles=["single-writer"],
                         scenario="rails-writes-noredirect", levels=[8], duration=3, warmup=1,
                         progress=False, results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs",
                         calibration=False, server_host=srv_host,
                         generator_hosts=[str(net.host("gen1"))])
        left = [open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
                for pid in netns.namespace_pids(net.namespace("srv")) if os.path.exists(f"/proc/{pid}")]
    assert not [c for c in left if "go-nethttp" in c or "sample-tree" in c or "bin/server" in c], left
    p = df.iloc[0]
    assert p.server_host == str(srv_host) and p.server_pinning is None
    assert p.audit_ok and p.integrity == "ok" and p.rows_written == p.acked_writes > 0
    assert verdicts.counts_agree(p), p
    assert p.server_cpu_pct > 0 and p.server_rss_mb > 0   # sampled on its host
    assert p.server_util == pytest.approx(p.server_cpu_pct / 100 / os.cpu_count())  # `nproc` there
    assert "unpinned on its own machine" in p.layout_note
    level = next((tmp_path / "runs").rglob("u0008-r1"))
    lines = [l for l in (level / "server-cpu.log").read_text().splitlines() if l.startswith("tree ")]
    assert len(lines) >= 3 * 10  # every 50 ms through the 3-s window
    server_log = next((tmp_path / "runs").rglob("server-go-nethttp-single-writer.log")).read_text()
    assert server_log.startswith("LABPID ")  # started by the ssh runner, which reported its PID
