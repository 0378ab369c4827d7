"""Stand-in for the filelock package: an exclusive fcntl lock on a file, as a context manager."""
import fcntl
import os


class FileLock:
    def __init__(self, path, timeout=-1):
        self.path = path
        self._fd = None

    def __enter__(self):
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        return False
