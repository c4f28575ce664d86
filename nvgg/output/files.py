"""Files nvgg writes (result JSON, Markdown, JUnit XML, config maps, traces, plots), written through
what the path names and checked before any work (`ready`):

- a regular file, or a new one: atomically (a temporary file beside it, renamed over it), so a
  reader never sees half a file; a file that existed keeps its permission bits;
- a symbolic link: through it to what it points to, the link left a link;
- a descriptor of this process (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, or a link to
  one): through the descriptor the process holds, never opened anew, so `>> log` appends after
  what is there and `| cat` reads it, in order with what nvgg prints there;
- a FIFO, a character device or a socket: opened as it is (never truncated, never replaced) and
  written once. A FIFO is opened only once a process reads it: an open without a reader waits for
  ever, so `ready` waits FIFO_WAIT_S for one and raises ENXIO, and keeps the FIFO open until its
  write (a reader that saw the FIFO opened and closed would take that as the end).

Everything raises OSError for the caller to say in one line, naming the option the path came from.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

from ..atomic import replace_whole, write_all

FIFO_WAIT_S = 2.0  # how long a FIFO is given to find its reader (one started beside nvgg)
_HELD: dict[str, int] = {}  # FIFOs opened by `ready`, by real path, until their write


def descriptor(path: str | Path) -> int | None:
    """The file descriptor of this process that `path` names, following links (/dev/stdout ->
    /proc/self/fd/1), or None for any other path."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        folder, name = os.path.split(current)
        current = os.path.join(os.path.realpath(folder), name)
        found = re.fullmatch(r"/proc/(self|\d+)/fd/(\d+)", current)
        if found and found.group(1) in ("self", str(os.getpid())):
            return int(found.group(2))
        if not os.path.islink(current):
            return None
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return None


def output_target(path: str | Path) -> Path:
    """Where writing `path` lands: through a symbolic link to what it points to (a link stays a
    link), otherwise the path itself."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _kind(path: str | Path) -> str:
    """"descriptor", "stream" (a FIFO, a device, a socket) or "file" (regular, or none yet);
    OSError where the path cannot be reached (a loop of links, a file as a folder) and
    IsADirectoryError for a folder."""
    if descriptor(path) is not None:
        return "descriptor"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "file"
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return "file" if stat.S_ISREG(mode) else "stream"


def streams(path: str | Path) -> bool:
    """Whether `path` is written in place and once (a descriptor, a FIFO, a device), rather than
    replaced as often as asked (a regular file)."""
    try:
        return _kind(path) != "file"
    except OSError:  # the write says why
        return False


def ready(path: str | Path) -> None:
    """Whether `path` can be written, found out before any work: OSError (with its errno) where it
    cannot. A FIFO is opened here and held for its write (`_open_stream`)."""
    kind = _kind(path)
    if kind == "descriptor":
        fd = descriptor(path)
        import fcntl
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:  # EBADF where it is not open
            raise OSError(errno.EBADF, f"descriptor {fd} is open for reading only", str(path))
        return
    target = output_target(path)
    if kind == "stream":
        if stat.S_ISFIFO(os.stat(target).st_mode):
            key = os.path.realpath(target)
            if key not in _HELD:
                _HELD[key] = _open_fifo(target)
        elif not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return
    folder = target.parent
    while not folder.exists():  # written into the nearest folder that exists, the rest made
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    if target.exists() and not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    # what the file is written through, tried: some folders pass os.access and refuse it (/proc,
    # read-only mounts)
    fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    os.close(fd)
    os.unlink(probe)
    if os.statvfs(folder).f_bavail == 0:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder))


def write_bytes(path: str | Path, data: bytes) -> None:
    """`data` to `path`, through what the path is (the module's docstring)."""
    kind = _kind(path)
    if kind == "descriptor":
        _to_descriptor(descriptor(path), data)
    elif kind == "stream":
        fd = _open_stream(output_target(path))
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    else:
        replace_whole(output_target(path), data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, payload) -> None:
    write_text(path, json.dumps(payload, indent=2, default=str) + "\n")


def reason(exc: OSError) -> str:
    """Why a path could not be written, in a few words."""
    said = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "over the disk quota",
            errno.EPIPE: "its reader is gone", errno.ENXIO: "no process reads it",
            errno.ELOOP: "its symbolic links loop", errno.EROFS: "a read-only file system"}
    return said.get(exc.errno) or exc.strerror or str(exc)


def _to_descriptor(fd: int, data: bytes) -> None:
    """Through nvgg's own stdout or stderr where `fd` is one (after what was printed there), else
    straight to the descriptor; never closed."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    if stream is not None:
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
            return
    write_all(fd, data)


def _open_stream(target: Path) -> int:
    """A descriptor to write a FIFO or a device through: the FIFO's held since `ready`, else
    opened now (a FIFO only once it has a reader)."""
    held = _HELD.pop(os.path.realpath(target), None)
    if held is not None:
        return held
    if stat.S_ISFIFO(os.stat(target).st_mode):
        return _open_fifo(target)
    return os.open(target, os.O_WRONLY)


def _open_fifo(target: Path) -> int:
    """The FIFO opened for writing once a process reads it (FIFO_WAIT_S at most: ENXIO after)."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
    os.set_blocking(fd, True)  # the writes wait for a slow reader, as a shell's would
    return fd


@atexit.register
def _close_held() -> None:
    """FIFOs checked but never written (the command stopped before): their readers see the end."""
    for fd in _HELD.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()
