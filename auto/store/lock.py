"""The compile lock of a store: one compile at a time allocates a store's next generation.

A generation number is the store's highest plus one, read when a compile starts and written
when it ends; two compiles of one store at once would both take the same number. The lock is an
exclusive ``fcntl.flock`` on ``<store>.compile.lock``: released when its holder closes it or its
process dies (a killed compiler never blocks the others). A ratchet takes it without waiting
(another process compiling is a reason to skip); ``auto compile`` waits for it.
"""

from __future__ import annotations

import fcntl
import os

from auto.errors import StoreError


class CompileLock:
    """The exclusive compile lock of the store at ``store_path`` (its file ``<store>.compile.lock``).

    Raises:
        StoreError: from :meth:`acquire`, when the lock file cannot be created or opened, or
            a blocking wait fails.
    """

    def __init__(self, store_path: str | os.PathLike) -> None:
        self.path = f"{os.fspath(store_path)}.compile.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, blocking: bool = False) -> bool:
        """Take the lock; returns False when another holder has it and ``blocking`` is False
        (with ``blocking`` True, waits until it is free). Taking a lock this object already
        holds returns True."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot open the compile lock ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as e:
            os.close(fd)
            if blocking:
                raise StoreError(f"{self.path}: cannot take the compile lock ({e.strerror or e})") from None
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the lock back (nothing when it is not held)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
