"""The lazy filesystem (sqlitelab.infra.lazyfs): its model of pages and fsyncs on its own, against a
plain reference of what was written and what was synced, then mounted, with SQLite writing through
it from another process and the power cut."""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sqlitelab.infra import lazyfs
from sqlitelab.infra.lazyfs import PAGE, SECTOR, Crashed, Overlay


def backed(tmp_path: Path, name: str = "f", content: bytes = b"") -> tuple[Overlay, Path]:
    root = tmp_path / "disk"
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(content)
    return Overlay(root), root / name


def test_a_write_is_read_back_at_once_and_reaches_the_disk_only_at_fsync(tmp_path):
    fs, disk = backed(tmp_path, content=b"x" * 10)
    fs.write("f", b"hello", 3)
    assert fs.read("f", 100, 0) == b"xxxhelloxx" and fs.size("f") == 10
    assert disk.read_bytes() == b"x" * 10, "nothing reached the disk before the fsync"
    fs.write("f", b"!", PAGE + 5)  # a second page, past the end: the gap reads as zeros
    assert fs.size("f") == PAGE + 6 and fs.read("f", 4, 10) == b"\0" * 4 and fs.dirty() == 2
    fs.fsync("f")
    assert disk.read_bytes() == b"xxxhelloxx" + b"\0" * (PAGE - 5) + b"!" and fs.dirty() == 0


def test_the_cut_loses_what_was_not_synced_and_keeps_what_was_then_fails_every_operation(tmp_path):
    fs, disk = backed(tmp_path, content=b"a" * PAGE)
    fs.write("f", b"b" * PAGE, 0)
    fs.fsync("f")
    fs.write("f", b"c" * 100, 0)
    fs.write("f", b"d" * 100, PAGE)
    done = fs.cut()
    assert done == {"pages_written_back": 0, "pages_lost": 2, "directory_ops_undone": 0}
    assert disk.read_bytes() == b"b" * PAGE
    for call in (lambda: fs.read("f", 1, 0), lambda: fs.write("f", b"x", 0), lambda: fs.fsync("f"),
                 lambda: fs.truncate("f", 0), lambda: fs.size("f"), lambda: fs.cut()):
        with pytest.raises(Crashed):
            call()


def test_a_truncate_then_an_extend_reads_zeros_and_fsync_leaves_the_disk_so(tmp_path):
    fs, disk = backed(tmp_path, content=bytes(range(256)) * 40)  # 10,240 bytes, 3 pages
    fs.truncate("f", 100)
    assert fs.size("f") == 100 and fs.read("f", 1000, 0) == bytes(range(100))
    fs.truncate("f", 3 * PAGE)
    assert fs.read("f", 3 * PAGE, 0) == bytes(range(100)) + b"\0" * (3 * PAGE - 100)
    assert disk.stat().st_size == 10_240, "the disk keeps its size until the fsync"
    fs.fsync("f")
    assert disk.read_bytes() == bytes(range(100)) + b"\0" * (3 * PAGE - 100)


def test_directory_operations_are_durable_only_after_their_directorys_fsync(tmp_path):
    fs, disk = backed(tmp_path, content=b"old")
    root = disk.parent
    (root / "sub").mkdir()
    (root / "sub" / "kept").write_bytes(b"k")
    (root / "new").write_bytes(b"")
    fs.created("new")                      # as the mount's create does
    (root / "sub" / "j").write_bytes(b"")
    fs.created("sub/j")
    fs.fsyncdir("sub")                     # sub/j is durable, new is not
    fs.unlink("f")                         # into the trash until the root's fsync
    assert not disk.exists()
    fs.rename("sub/kept", "sub/moved")
    fs.cut()
    assert disk.read_bytes() == b"old", "an unlink not synced comes back"
    assert not (root / "new").exists(), "a file created, its directory never synced, is gone"
    assert (root / "sub" / "j").exists() and (root / "sub" / "kept").read_bytes() == b"k"
    assert not (root / "sub" / "moved").exists() and not (root / lazyfs.TRASH).exists()
    fs2, disk2 = backed(tmp_path / "b", content=b"x")
    fs2.unlink("f")
    fs2.fsyncdir("")
    fs2.cut()
    assert not disk2.exists(), "an unlink whose directory was synced stays"


def test_a_seeded_share_of_dirty_pages_is_written_back_and_torn_pages_stop_at_a_sector(tmp_path):
    runs = iter(range(100))

    def run(share, seed, torn=False):
        root = tmp_path / f"r{next(runs)}"
        root.mkdir()
        (root / "f").write_bytes(b"\0" * 64 * PAGE)
        fs = Overlay(root, writeback=share, seed=seed, torn=torn)
        for n in range(64):
            fs.write("f", b"\1" * PAGE, n * PAGE)
        done = fs.cut()
        return done, (root / "f").read_bytes()
    assert run(1.0, 1)[0]["pages_lost"] == 0 and run(1.0, 2)[1] == b"\1" * 64 * PAGE
    assert run(0.0, 1)[1] == b"\0" * 64 * PAGE
    half, data = run(0.5, 7)
    assert 10 < half["pages_written_back"] < 54 and data.count(b"\1" * PAGE) == half["pages_written_back"]
    assert run(0.5, 7)[1] == data, "the same seed writes back the same pages"
    assert run(0.5, 8)[1] != data
    _, torn = run(1.0, 3, torn=True)
    written = [len(torn[n * PAGE:(n + 1) * PAGE].rstrip(b"\0")) for n in range(64)]
    assert all(w % SECTOR == 0 for w in written) and len(set(written)) > 2, "pages cut at sectors, unevenly"


def test_a_filesystem_that_ignores_fsync_keeps_nothing(tmp_path):
    root = tmp_path / "disk"
    root.mkdir()
    (root / "f").write_bytes(b"a")
    fs = Overlay(root, ignore_fsync=True)
    fs.write("f", b"b", 0)
    fs.fsync("f")
    fs.cut()
    assert (root / "f").read_bytes() == b"a"


@pytest.mark.parametrize("seed", range(5))
def test_the_model_matches_a_plain_reference_of_writes_and_syncs(tmp_path, seed):
    """Random writes, truncates and fsyncs of one file: every read is what was last written, and
    after a cut with nothing written back the disk is what was last synced."""
    rng = random.Random(seed)
    start = bytes(rng.randrange(256) for _ in range(rng.randrange(3 * PAGE)))
    fs, disk = backed(tmp_path, content=start)
    current, durable = bytearray(start), bytes(start)
    for _ in range(300):
        op = rng.random()
        if op < 0.55:
            off, n = rng.randrange(4 * PAGE), rng.randrange(1, 2 * PAGE)
            data = bytes(rng.randrange(256) for _ in range(n))
            fs.write("f", data, off)
            if off > len(current):
                current += bytes(off - len(current))
            current[off:off + n] = data
        elif op < 0.7:
            length = rng.randrange(5 * PAGE)
            fs.truncate("f", length)
            current = current[:length] + bytes(max(0, length - len(current)))
        elif op < 0.8:
            fs.fsync("f")
            durable = bytes(current)
        else:
            off, n = rng.randrange(5 * PAGE), rng.randrange(1, 2 * PAGE)
            assert fs.read("f", n, off) == bytes(current[off:off + n])
        assert fs.size("f") == len(current)
    fs.cut()
    assert disk.read_bytes() == durable


def test_bad_settings_are_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="^writeback must be a share from 0 to 1, not 2"):
        Overlay(tmp_path, writeback=2)
    with pytest.raises(ValueError, match="is not a directory"):
        Overlay(tmp_path / "nope")
    with pytest.raises(ValueError, match="^writeback must be a share"):
        lazyfs.Mount(tmp_path, tmp_path / "mnt", writeback=-0.1)


# --------------------------------------------------------------------------- mounted

FUSE = Path("/dev/fuse").exists() and shutil.which("fusermount3") is not None
mounted = pytest.mark.skipif(not FUSE, reason="needs /dev/fuse and fusermount3 (Debian's fuse3: make setup)")

# A client that commits `n` one-row transactions and then waits to be killed (a closed WAL
# connection checkpoints: a power cut never lets it)
WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    db, n, sync, journal = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    con = sqlite3.connect(db, isolation_level=None)
    con.execute(f"PRAGMA journal_mode={journal}")
    con.execute(f"PRAGMA synchronous={sync}")
    for i in range(n):
        con.execute("INSERT INTO t(v) VALUES (?)", (i,))
    print("done", flush=True)
    time.sleep(60)
""")


def cut_after_writes(tmp_path: Path, n: int, sync: str, journal: str = "wal", **kw) -> tuple[int, str]:
    """`n` acknowledged commits through the mount at `sync`, then the power cut: the rows the
    disk kept and its integrity_check."""
    disk, mnt = tmp_path / "disk", tmp_path / "mnt"
    disk.mkdir(parents=True)
    con = sqlite3.connect(disk / "app.db")  # the file as it was made durable before the load
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)")
    con.commit()
    con.close()
    with lazyfs.Mount(disk, mnt, **kw) as m:
        client = subprocess.Popen([sys.executable, "-c", WRITER, str(mnt / "app.db"), str(n), sync, journal],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert client.stdout.readline().strip() == "done"
            m.cut(clients=[client.pid])
        finally:
            client.kill()
            client.wait()
    assert not os.path.ismount(mnt)
    con = sqlite3.connect(disk / "app.db")
    try:
        return con.execute("SELECT count(*) FROM t").fetchone()[0], con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@mounted
def test_sqlite_at_full_keeps_every_acknowledged_commit_through_a_cut(tmp_path):
    assert cut_after_writes(tmp_path, 200, "full") == (200, "ok")


@mounted
def test_the_check_fails_where_fsync_is_ignored(tmp_path):
    """The same cut on a filesystem that ignores fsync: FULL's commits are lost, so the check
    above can fail."""
    kept, integrity = cut_after_writes(tmp_path, 200, "full", ignore_fsync=True)
    assert kept < 200 and integrity == "ok"


@mounted
def test_sqlite_at_normal_loses_the_commits_since_its_last_checkpoint(tmp_path):
    kept, integrity = cut_after_writes(tmp_path, 200, "normal")  # fewer frames than a checkpoint
    assert kept == 0 and integrity == "ok"


@mounted
def test_a_mount_that_cannot_start_says_why_in_its_log_tail(tmp_path):
    (tmp_path / "disk").mkdir()
    m = lazyfs.Mount(tmp_path / "disk", tmp_path / "mnt", timeout=10)
    shutil.rmtree(tmp_path / "disk")  # gone between the check and the start: the daemon refuses it
    with pytest.raises(RuntimeError, match=r"lazyfs did not mount .*is not a directory"):
        with m:
            pass
    assert not os.path.ismount(tmp_path / "mnt")


@mounted
def test_in_delete_mode_full_can_lose_the_last_commit_and_extra_cannot(tmp_path):
    """SQLite's own words for EXTRA: "the directory containing a rollback journal is synced after
    that journal is unlinked to commit a transaction in DELETE mode". At FULL the journal's unlink
    is not synced: the cut brings the journal back, hot, and the next open rolls the last commit
    back. The filesystem holds directory operations until their directory's fsync, so it shows."""
    assert cut_after_writes(tmp_path / "full", 50, "full", "delete") == (49, "ok")
    assert cut_after_writes(tmp_path / "extra", 50, "extra", "delete") == (50, "ok")


@mounted
def test_a_killed_starter_leaves_no_daemon_and_no_mount(tmp_path):
    """The daemon dies with its starter (sqlitelab.core.processes' watchdog: SIGTERM, on which
    libfuse unmounts), even when the starter is killed outright."""
    (tmp_path / "disk").mkdir()
    starter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from sqlitelab.infra import lazyfs
        with lazyfs.Mount({str(tmp_path / "disk")!r}, {str(tmp_path / "mnt")!r}):
            print("mounted", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert starter.stdout.readline().strip() == "mounted" and os.path.ismount(tmp_path / "mnt")
    starter.kill()
    starter.wait()
    deadline = time.monotonic() + 15
    while os.path.ismount(tmp_path / "mnt") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.ismount(tmp_path / "mnt")

    def left() -> str:  # the daemon unmounts first, then exits: it may take a moment on a busy machine
        return subprocess.run(["pgrep", "-f", f"sqlitelab.infra.lazyfs {tmp_path / 'disk'}"],
                              capture_output=True, text=True).stdout.strip()
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left() == "", f"a lazyfs daemon outlived its starter: {left()}"
