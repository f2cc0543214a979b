"""One data dir, one Skiff: an exclusive flock on DATA_DIR/skiff.lock, held for the life
of the process that runs the embedded redis-server. The OS drops the lock when that
process dies (even by SIGKILL), so a held lock means a live owner, and a free lock means
whatever redis-server is left in the data dir belongs to a dead one."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "skiff.lock"


class DataDirInUse(Exception):
    """Another live process holds the data dir's lock."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock and record our pid in it, or raise DataDirInUse naming the owner.
        The file is never deleted: unlinking it would let a third process lock a new
        inode while the owner still holds the old one."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RuntimeError(
                f"cannot use --data-dir {self.path.parent}: {exc.strerror} ({self.path})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirInUse(
                f"--data-dir {self.path.parent} is in use by Skiff pid {owner} (it holds "
                f"{self.path}); stop that one first or pass another --data-dir"
            ) from None
        except OSError as exc:  # a filesystem without flock (some network mounts)
            os.close(fd)
            raise RuntimeError(
                f"cannot lock {self.path}: {exc.strerror}; put --data-dir on a local filesystem"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None
