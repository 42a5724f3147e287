"""System-wide preloading without touching the host: /etc/ld.so.preload in a
private mount namespace.

Shared by test-system-preload.py, test-cpython-fds.py and cpython-suite.py,
which import this module from their own directory. A test copies /etc
(copy_etc()) into its temporary directory and runs each command through
in_ns(): unshare(1) gives the command a private mount namespace of its own,
in which the copy is bind-mounted over /etc. The host's /etc is never
written, and the mount ends with the command.
"""
import os
import shutil
import stat
import subprocess

COPY_TIMEOUT = 60       # seconds, cp -a /etc


def unavailable():
    """Why commands cannot run in such a namespace here (a sentence), or None.
    Whether unshare and mount are allowed shows only when a command runs."""
    if os.geteuid() != 0:
        return "needs root (a private mount namespace, a bind mount over /etc)"
    for tool in ("unshare", "mount"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    return None


def in_ns(etc, argv):
    """argv in a private mount namespace of its own, with etc over /etc."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc && exec "$@"', etc] + argv


def copy_etc(dest, preload):
    """Copies /etc to dest; its ld.so.preload then names preload (a path),
    or, with preload None, is removed. Returns what cp complained about
    ("" when nothing); raises OSError when there is no copy."""
    p = subprocess.run(["cp", "-a", "/etc", dest], capture_output=True, text=True,
                       timeout=COPY_TIMEOUT)
    if not os.path.isdir(dest):
        raise OSError(f"cannot copy /etc to {dest}: {p.stderr.strip()}")
    name = os.path.join(dest, "ld.so.preload")
    if preload is not None:
        with open(name, "w") as f:
            f.write(preload + "\n")
    elif os.path.lexists(name):
        os.unlink(name)
    return p.stderr.strip() if p.returncode else ""


def preload_state():
    """The host's /etc/ld.so.preload (bytes), or None when there is none."""
    try:
        with open("/etc/ld.so.preload", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def others_can_reach(path, want_read=False):
    """Every directory on the way is o+x (and the file o+r)."""
    path = os.path.abspath(path)
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == "/":
            break
        d = os.path.dirname(d)
    return not want_read or bool(os.stat(path).st_mode & stat.S_IROTH)


def reachable_library(lib, work):
    """The library as a system-wide preload names it: lib itself where every
    user can read it, else a copy in work/lib, work made o+x (the dynamic
    linker of a program run by another user could not load it, and says so
    on stderr). Returns (path, a note or "")."""
    if others_can_reach(lib, want_read=True):
        return lib, ""
    os.chmod(work, 0o755)
    libdir = os.path.join(work, "lib")
    os.makedirs(libdir, exist_ok=True)
    os.chmod(libdir, 0o755)
    copy = os.path.join(libdir, os.path.basename(lib))
    shutil.copy2(lib, copy)
    os.chmod(copy, 0o755)
    return copy, f"{lib} is not readable by other users: preloading a copy, {copy}"


def sanitizer_refused(stderr):
    """Whether a program's stderr says a sanitizer runtime refused to start:
    a sanitizer build cannot be preloaded system-wide (its runtime must come
    first in every program, and a program of the system was not built with it)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    return "Sanitizer" in text or "ASan" in text
