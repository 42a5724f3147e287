"""A private mount namespace whose /etc/ld.so.preload names a library.

Shared by tests/preload/test-system-preload.py, the CPython tests
(tests/preload/cpython_modes.py, cpython-suite.py) and ppipe-soak
--system-preload (installed beside ppipe-soak's other private files). The
host's /etc is never written: a command runs in a mount namespace of its own
(unshare(1), root only), where a copy of /etc, made under a temporary
directory, is bind-mounted over /etc. So the dynamic linker loads the library
into every dynamically linked program started there, as it would on a host
that turned libppipe on system-wide, with no LD_PRELOAD.

    root, why = work_root([tempfile.gettempdir(), "/var/tmp"])
    with tempfile.TemporaryDirectory(dir=root) as work:
        os.chmod(work, 0o755)
        ns = prepare(work, lib)          # ns.etc, ns.etc_plain, ns.lib, ns.notes
        subprocess.run(in_ns(ns.etc, argv), env=env_without_preload(os.environ))
"""
import os
import shutil
import stat
import subprocess

TOOLS = ("unshare", "mount")


class SetupError(Exception):
    """The namespace's /etc could not be made."""


class Namespace:
    """What prepare() made: etc (ld.so.preload names lib), etc_plain (no
    ld.so.preload at all), lib (the path named, a copy when others could not
    read the original) and notes (lines worth printing)."""

    def __init__(self, etc, etc_plain, lib, notes):
        self.etc, self.etc_plain, self.lib, self.notes = etc, etc_plain, lib, notes


def missing_tools():
    """The programs a namespace needs that are not on PATH."""
    return [t for t in TOOLS if not shutil.which(t)]


def unavailable():
    """Why commands cannot run in such a namespace here (a sentence), or None.
    Whether unshare and mount are allowed shows only when a command runs."""
    if os.geteuid() != 0:
        return "needs root (a private mount namespace, a bind mount over /etc)"
    missing = missing_tools()
    return f"{missing[0]} is not installed" if missing else None


def sanitizer_refused(stderr):
    """Whether a program's stderr says a sanitizer runtime refused to start:
    a sanitizer build cannot be preloaded system-wide (its runtime must come
    first in every program, and a program of the system was not built with it)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    return "Sanitizer" in text or "ASan" in text


def in_ns(etc, argv):
    """argv in a private mount namespace of its own, with etc over /etc.

    The sh that binds it starts under the host's /etc; the program it execs
    starts under etc, so etc's ld.so.preload applies from argv[0] on."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc && exec "$@"', etc] + list(argv)


def env_without_preload(env):
    """env without LD_PRELOAD and every PPIPE_ variable."""
    return {k: v for k, v in env.items() if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}


def preload_state():
    """The host's /etc/ld.so.preload (bytes), or None when there is none:
    to check at the end that it is as it was."""
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


def work_root(candidates):
    """A directory for the temporary tree: setuid honoured, reachable by
    nobody. Returns (directory or None, [why each other candidate was not])."""
    why = []
    for d in candidates:
        if not d or not os.path.isdir(d):
            continue
        if os.statvfs(d).f_flag & os.ST_NOSUID:
            why.append(f"{d}: mounted nosuid")
            continue
        if not others_can_reach(os.path.join(d, "x")):
            why.append(f"{d}: not reachable by other users")
            continue
        return d, why
    return None, why


def reachable_library(lib, work):
    """The library as a system-wide preload names it: lib itself where every
    user can read it, else a copy in work/lib, work made o+x (the dynamic
    linker of a program run by another user, or of a setuid one, could not
    load it, and says so on stderr). Returns (path, a note or "")."""
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


def prepare(work, lib, plain=True, timeout=60):
    """Makes work/etc (a copy of /etc whose ld.so.preload names lib) and,
    with plain, work/etc-plain (a copy without ld.so.preload; else
    etc_plain is None). A library other users cannot read is copied first
    (reachable_library), and the copy named. Raises SetupError."""
    preload_lib, note = reachable_library(lib, work)
    notes = [note] if note else []
    etc = os.path.join(work, "etc")
    etc_plain = os.path.join(work, "etc-plain") if plain else None
    for d in [etc] + ([etc_plain] if plain else []):
        p = subprocess.run(["cp", "-a", "/etc", d], capture_output=True, text=True,
                           timeout=timeout)
        if not os.path.isdir(d):
            raise SetupError(f"cannot copy /etc: {p.stderr.strip()}")
        if p.returncode:
            notes.append(f"cp -a /etc {d}: {p.stderr.strip()[:500]}")
    with open(os.path.join(etc, "ld.so.preload"), "w") as f:
        f.write(preload_lib + "\n")
    if plain and os.path.lexists(os.path.join(etc_plain, "ld.so.preload")):
        os.unlink(os.path.join(etc_plain, "ld.so.preload"))
    return Namespace(etc, etc_plain, preload_lib, notes)
