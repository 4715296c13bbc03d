"""A filesystem that loses what was not fsync'ed: the lab's power cut.

    with lazyfs.Mount(backing, mnt) as m:      # FUSE over `backing`, mounted at `mnt`
        ...                                    # clients read and write files under mnt
        m.cut(clients=[pid, ...])              # the power goes: clients killed, the mount gone
    # `backing` now holds what a disk would after the cut: open it directly

`kill -9` leaves the operating system's page cache intact, so everything a process wrote reaches
the disk anyway. A power cut (or a VM that dies) loses what was written but not yet synced. This
filesystem keeps every write and truncate in an in-memory overlay per file, in pages of PAGE bytes;
only `fsync`/`fdatasync` of a file writes its pages to the backing directory (and fsyncs them
there). A directory operation (create, unlink, rename, mkdir, rmdir) is applied to the backing
directory at once but stays pending until its directory is fsync'ed (`fsyncdir`): a cut undoes the
pending ones, newest first (an unlinked file waits in a trash folder until then). That is the worst
case a POSIX filesystem allows — more than ext4 usually loses, and the point of a bound.

A cut (`echo crash > MNT/.lazyfs`, what Mount.cut writes) writes back a seeded share of the dirty
pages (`writeback`, 0: none, the worst case; `torn`: each page written back may stop after a
random number of its 512-byte sectors), drops the rest, undoes the pending directory operations
and fails every later operation with EIO. The page cache above a FUSE mount outlives the cut,
so Mount.cut then kills every client and unmounts: nothing read after it can come from memory.

Mounted with libfuse3's defaults (no `direct_io`: SQLite's shared mmap of `-shm` needs the page
cache), single-threaded, and with no `lock` operation, so the kernel keeps POSIX locks itself
(an attribute of the operations named like a FUSE operation would register it: none is).
`Overlay` is the model itself, without FUSE (tests/test_lazyfs.py tests it on its own).

    python -m sqlitelab.infra.lazyfs BACKING MOUNTPOINT [--writeback SHARE] [--seed N] [--torn]
"""
from __future__ import annotations

import argparse
import errno
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sqlitelab.core import processes

PAGE = 4096          # the overlay's unit: a write dirties the pages it touches
SECTOR = 512         # a torn page stops after a whole number of these
CONTROL = ".lazyfs"  # the control file at the mount's root: "crash" cuts the power
TRASH = ".lazyfs-trash"  # in the backing directory: unlinked files until their directory is synced


class Crashed(OSError):
    """The power was cut: every operation fails with EIO."""

    def __init__(self) -> None:
        super().__init__(errno.EIO, "lazyfs: the power was cut")


class Overlay:
    """The model: a backing directory, the unsynced pages of each file above it, and the
    directory operations not yet made durable. Paths are relative to the backing root ("a/b.db").

    `writeback`: the share of dirty pages a cut writes back (seeded by `seed`); `torn`: a page
    written back at a cut may stop after some of its sectors; `ignore_fsync`: fsync writes
    nothing back (a broken filesystem: what the lab's tests must catch)."""

    def __init__(self, root: Path | str, *, writeback: float = 0.0, seed: int = 0, torn: bool = False,
                 ignore_fsync: bool = False) -> None:
        self.check_writeback(writeback)
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValueError(f"{self.root} is not a directory (the backing directory)")
        self.writeback, self.torn, self.ignore_fsync = float(writeback), bool(torn), bool(ignore_fsync)
        self.rng = random.Random(seed)
        self.files: dict[str, dict] = {}   # path -> {"pages": {n: bytearray}, "size": int}
        self.pending: list[tuple] = []      # directory operations since their directory's fsync
        self.crashed = False
        self.trash = self.root / TRASH
        self.trash.mkdir(exist_ok=True)
        self._trashed = 0

    # ----------------------------------------------------------------- reading the state
    @staticmethod
    def check_writeback(writeback) -> None:
        """A share of dirty pages a cut writes back, 0 to 1; anything else refused in one line."""
        if isinstance(writeback, bool) or not (isinstance(writeback, (int, float)) and 0.0 <= writeback <= 1.0):
            raise ValueError(f"writeback must be a share from 0 to 1, not {writeback!r}")

    def real(self, path: str) -> Path:
        return self.root / path

    def _alive(self) -> None:
        if self.crashed:
            raise Crashed()

    def size(self, path: str) -> int:
        """The file's size as its readers see it (the overlay's, else the backing file's)."""
        self._alive()
        f = self.files.get(path)
        return f["size"] if f is not None else self.real(path).stat().st_size

    def dirty(self) -> int:
        """Pages written and not yet synced, over every file."""
        return sum(len(f["pages"]) for f in self.files.values())

    def _backing_page(self, path: str, n: int) -> bytearray:
        page = bytearray(PAGE)
        try:
            with open(self.real(path), "rb") as fh:
                fh.seek(n * PAGE)
                got = fh.read(PAGE)
        except FileNotFoundError:
            got = b""
        page[:len(got)] = got
        return page

    def _file(self, path: str) -> dict:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = {"pages": {}, "size": self.real(path).stat().st_size,
                                    "backing_size": self.real(path).stat().st_size}
        return f

    def _view(self, path: str, f: dict, n: int) -> bytearray:
        """Page n of the file as readers see it: the overlay's, else the backing file's with
        every byte past what is still valid of it zero (a truncate, then an extend)."""
        page = f["pages"].get(n)
        if page is None:
            page = self._backing_page(path, n)
            valid = min(f["backing_size"], f["size"]) - n * PAGE
            if valid < PAGE:
                page[max(valid, 0):] = bytes(PAGE - max(valid, 0))
        return page

    def _page(self, path: str, f: dict, n: int) -> bytearray:
        """Page n of the file as readers see it, made the overlay's own (to change it)."""
        if n not in f["pages"]:
            f["pages"][n] = self._view(path, f, n)
        return f["pages"][n]

    def read(self, path: str, size: int, offset: int) -> bytes:
        self._alive()
        f = self.files.get(path)
        if f is None:
            with open(self.real(path), "rb") as fh:
                fh.seek(offset)
                return fh.read(size)
        end = min(offset + size, f["size"])
        out = bytearray()
        pos = offset
        while pos < end:
            n, at = divmod(pos, PAGE)
            take = min(PAGE - at, end - pos)
            out += self._view(path, f, n)[at:at + take]
            pos += take
        return bytes(out)

    # ----------------------------------------------------------------- changing it
    def write(self, path: str, data: bytes, offset: int) -> int:
        self._alive()
        f = self._file(path)
        pos, i = offset, 0
        while i < len(data):
            n, at = divmod(pos, PAGE)
            take = min(PAGE - at, len(data) - i)
            self._page(path, f, n)[at:at + take] = data[i:i + take]
            pos += take
            i += take
        f["size"] = max(f["size"], offset + len(data))
        return len(data)

    def truncate(self, path: str, length: int) -> None:
        self._alive()
        f = self._file(path)
        if length < f["size"]:
            for n in [n for n in f["pages"] if n * PAGE >= length]:
                del f["pages"][n]
            if length % PAGE:
                page = self._page(path, f, length // PAGE)
                page[length % PAGE:] = bytes(PAGE - length % PAGE)
            f["backing_size"] = min(f["backing_size"], length)
        f["size"] = length

    def fsync(self, path: str) -> None:
        """The file's pages and size to the backing file, synced there: durable."""
        self._alive()
        f = self.files.get(path)
        if f is None or self.ignore_fsync:
            return
        self._write_back(path, f, list(f["pages"]), torn=False, size=True)
        del self.files[path]

    def _write_back(self, path: str, f: dict, pages: list[int], *, torn: bool, size: bool) -> None:
        fd = os.open(self.real(path), os.O_WRONLY)
        try:
            if size:  # what is left of the backing file, then zeros up to the size readers see
                os.ftruncate(fd, min(f["backing_size"], f["size"]))
                os.ftruncate(fd, f["size"])
            for n in sorted(pages):
                page = f["pages"][n]
                length = min(PAGE, f["size"] - n * PAGE) if size else PAGE
                if length <= 0:
                    continue
                if torn:
                    length = min(length, SECTOR * self.rng.randint(0, PAGE // SECTOR))
                os.pwrite(fd, bytes(page[:length]), n * PAGE)
            os.fsync(fd)
        finally:
            os.close(fd)

    # ----------------------------------------------------------------- directories
    def created(self, path: str) -> None:
        """A file or directory `path` was made in the backing directory: pending until its
        directory's fsync."""
        self._alive()
        self.pending.append(("created", path))

    def unlink(self, path: str) -> None:
        """Remove `path`: into the trash until its directory's fsync (a cut puts it back)."""
        self._alive()
        self._trashed += 1
        kept = self.trash / f"{self._trashed}"
        os.rename(self.real(path), kept)
        moved = self.files.pop(path, None)
        self.pending.append(("unlinked", path, kept, moved))

    def rename(self, old: str, new: str) -> None:
        self._alive()
        if self.real(new).exists() or self.real(new).is_symlink():
            self.unlink(new)
        os.rename(self.real(old), self.real(new))
        if old in self.files:
            self.files[new] = self.files.pop(old)
        self.pending.append(("renamed", old, new))

    def fsyncdir(self, directory: str) -> None:
        """The directory's pending operations made durable (those whose entry is in it)."""
        self._alive()
        parent = lambda p: str(Path(p).parent) if Path(p).parent != Path(".") else ""  # noqa: E731
        keep = []
        for op in self.pending:
            names = [op[1]] if op[0] != "renamed" else [op[1], op[2]]
            if any(parent(p) == directory.strip("/") for p in names):
                if op[0] == "unlinked":
                    _remove(op[2])
            else:
                keep.append(op)
        self.pending = keep

    # ----------------------------------------------------------------- the cut
    def cut(self) -> dict:
        """The power goes: a seeded share of the dirty pages written back (torn ones cut short),
        the rest lost, the pending directory operations undone newest first; every later
        operation fails. What happened, counted."""
        self._alive()
        kept = lost = 0
        for path, f in list(self.files.items()):
            if not self.real(path).exists():
                continue
            back = [n for n in sorted(f["pages"]) if self.rng.random() < self.writeback]
            kept += len(back)
            lost += len(f["pages"]) - len(back)
            if back:
                # a grown file's size goes with its pages; a shrunk one keeps its backing size
                f["size"] = max(f["size"], f["backing_size"])
                self._write_back(path, f, back, torn=self.torn, size=False)
        self.files.clear()
        undone = 0
        for op in reversed(self.pending):
            undone += 1
            if op[0] == "created":
                _remove(self.real(op[1]))
            elif op[0] == "unlinked":
                _remove(self.real(op[1]))
                os.rename(op[2], self.real(op[1]))
            elif op[0] == "renamed":
                os.rename(self.real(op[2]), self.real(op[1]))
        self.pending.clear()
        shutil.rmtree(self.trash, ignore_errors=True)
        self.crashed = True
        return {"pages_written_back": kept, "pages_lost": lost, "directory_ops_undone": undone}


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


# --------------------------------------------------------------------------- FUSE

def _rel(path: str) -> str:
    return path.lstrip("/")


class _Ops:
    """The FUSE operations over an Overlay (mfusepy calls them; an OSError's errno is the
    answer: Crashed is EIO). No attribute is named like an operation it does not mean to be."""

    use_ns = True

    def __init__(self, model: Overlay) -> None:
        self.model = model

    def getattr(self, path, fh=None):
        p, m = _rel(path), self.model
        if p == CONTROL:
            return {"st_mode": 0o100600, "st_nlink": 1, "st_size": 0}
        m._alive()
        st = os.lstat(m.real(p))
        return {"st_mode": st.st_mode, "st_nlink": st.st_nlink, "st_uid": st.st_uid, "st_gid": st.st_gid,
                "st_ino": st.st_ino, "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns,
                "st_ctime": st.st_ctime_ns, "st_size": m.size(p) if p in m.files else st.st_size}

    def readdir(self, path, fh):
        self.model._alive()
        names = [n for n in os.listdir(self.model.real(_rel(path))) if n != TRASH]
        return [".", ".."] + names + ([CONTROL] if _rel(path) == "" else [])

    def open(self, path, flags):
        if _rel(path) != CONTROL:
            self.model._alive()
            os.stat(self.model.real(_rel(path)))
            if flags & os.O_TRUNC:
                self.model.truncate(_rel(path), 0)
        return 0

    def create(self, path, mode, fi=None):
        self.model._alive()
        os.close(os.open(self.model.real(_rel(path)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))
        self.model.created(_rel(path))
        return 0

    def read(self, path, size, offset, fh):
        return self.model.read(_rel(path), size, offset)

    def write(self, path, data, offset, fh):
        if _rel(path) == CONTROL:
            if bytes(data).strip() == b"crash":
                self.model.cut()
            return len(data)
        return self.model.write(_rel(path), bytes(data), offset)

    def truncate(self, path, length, fh=None):
        if _rel(path) != CONTROL:
            self.model.truncate(_rel(path), length)
        return 0

    def fsync(self, path, datasync, fh):
        self.model.fsync(_rel(path))
        return 0

    def fsyncdir(self, path, datasync, fh):
        self.model.fsyncdir(_rel(path))
        return 0

    def flush(self, path, fh):
        if _rel(path) != CONTROL:
            self.model._alive()
        return 0

    def release(self, path, fh):
        return 0

    def unlink(self, path):
        self.model.unlink(_rel(path))
        return 0

    def rename(self, old, new, flags=0):
        self.model.rename(_rel(old), _rel(new))
        return 0

    def mkdir(self, path, mode):
        self.model._alive()
        os.mkdir(self.model.real(_rel(path)), mode)
        self.model.created(_rel(path))
        return 0

    def rmdir(self, path):
        self.model.unlink(_rel(path))
        return 0

    def chmod(self, path, mode):
        self.model._alive()
        os.chmod(self.model.real(_rel(path)), mode)
        return 0

    def utimens(self, path, times=None):
        self.model._alive()
        os.utime(self.model.real(_rel(path)), ns=times) if times else os.utime(self.model.real(_rel(path)))
        return 0

    def statfs(self, path):
        st = os.statvfs(self.model.root)
        return {k: getattr(st, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                            "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}


def serve(backing: str, mountpoint: str, *, writeback: float = 0.0, seed: int = 0, torn: bool = False,
          ignore_fsync: bool = False) -> None:
    """Mount the lazy filesystem over `backing` at `mountpoint` in the foreground, until unmounted."""
    import mfusepy as fuse  # lazy: the daemon's alone; a lab that never mounts one needs none of it
    model = Overlay(backing, writeback=writeback, seed=seed, torn=torn, ignore_fsync=ignore_fsync)
    ops = type("LazyOps", (_Ops, fuse.Operations), {})(model)  # mfusepy's defaults for the rest
    fuse.FUSE(ops, mountpoint, foreground=True, nothreads=True, fsname="lazyfs")


# --------------------------------------------------------------------------- from the lab

class Mount:
    """The lazy filesystem mounted for the length of a `with` block: its daemon started (and
    registered to die with its starter, sqlitelab.core.processes), the mount awaited; unmounted
    at the end. `cut(clients)`: the power cut (the control file), every client killed, the mount
    gone; `backing` then holds what a disk would."""

    def __init__(self, backing: Path | str, mountpoint: Path | str, *, writeback: float = 0.0, seed: int = 0,
                 torn: bool = False, ignore_fsync: bool = False, timeout: float = 10.0) -> None:
        Overlay(backing, writeback=writeback)  # the daemon's refusals, before anything starts
        self.backing, self.mountpoint = Path(backing), Path(mountpoint)
        self.args = ["--writeback", str(writeback), "--seed", str(seed)] + (["--torn"] if torn else []) + (
            ["--ignore-fsync"] if ignore_fsync else [])
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.log = self.backing.parent / f"lazyfs-{self.backing.name}.log"

    def __enter__(self) -> "Mount":
        if not Path("/dev/fuse").exists() or shutil.which("fusermount3") is None:
            raise RuntimeError("lazyfs needs /dev/fuse and fusermount3 (Debian's fuse3: make setup)")
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = processes.spawn([sys.executable, "-m", "sqlitelab.infra.lazyfs", str(self.backing),
                                         str(self.mountpoint), *self.args], "lazyfs",
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-2000:]
                self._stop()
                raise RuntimeError(f"lazyfs did not mount {self.mountpoint} within {self.timeout:g} s: {tail}")
            time.sleep(0.05)
        return self

    def cut(self, clients: list[int] = ()) -> float:
        """The power cut: the control file's "crash", then every client killed (SIGKILL) and the
        mount gone (the page cache above it with it). Returns the moment the power went
        (time.monotonic(), once the filesystem took the "crash")."""
        with open(self.mountpoint / CONTROL, "w") as f:
            f.write("crash")
        at = time.monotonic()
        for pid in clients:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self._stop()
        return at

    def _stop(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, timeout=10)
        if self.proc is not None:
            processes.stop(self.proc)
            self.proc = None

    def __exit__(self, *exc) -> None:
        self._stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.infra.lazyfs", description=__doc__.split("\n")[0])
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--writeback", type=float, default=0.0, help="share of dirty pages a cut writes back")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torn", action="store_true", help="a page written back at a cut may be cut short")
    ap.add_argument("--ignore-fsync", action="store_true", help="a broken filesystem, for tests")
    a = ap.parse_args(argv)
    try:
        serve(a.backing, a.mountpoint, writeback=a.writeback, seed=a.seed, torn=a.torn, ignore_fsync=a.ignore_fsync)
    except (ValueError, RuntimeError) as e:
        print(f"lazyfs: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
