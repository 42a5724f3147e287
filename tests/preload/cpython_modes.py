"""A CPython with its own test package, and the modes it runs in beside libppipe.

Shared by test-cpython-fds.py and cpython-suite.py, which import this
module from their own directory.

find_python() looks for a CPython 3 whose test.test_subprocess imports
(Debian ships the test package apart, in libpython3.X-testsuite): the
Python running the caller, /usr/bin/python3, /usr/bin/python3.11, then
python3, python3.11 and python on PATH. A candidate counts by the
sys.executable it reports: a launcher (a version manager's shim) is run
once, and then the interpreter it started.

Modes runs a command in one of four modes:
  plain    no libppipe
  preload  LD_PRELOAD=LIBRARY, default options
  trust    LD_PRELOAD=LIBRARY, PPIPE_READERS=trust
  system   /etc/ld.so.preload names LIBRARY, no LD_PRELOAD, in a private
           mount namespace (syspreload.py): root only, and not a sanitizer build
LD_PRELOAD and every PPIPE_ variable of the caller's environment are left
out of all four.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import syspreload  # noqa: E402

MODES = ("plain", "preload", "trust", "system")
LABELS = {
    "plain": "plain",
    "preload": "LD_PRELOAD",
    "trust": "LD_PRELOAD, PPIPE_READERS=trust",
    "system": "/etc/ld.so.preload",
}
PROBE_TIMEOUT = 60      # seconds: a candidate importing its test package, a probe

# Run by each candidate: what it is, and the full names of the test cases
# test_pass_fds_redirected is defined in (in 3.11, POSIXProcessTestCase).
_ABOUT = r"""
import json, os, sys, unittest
about = {"executable": sys.executable, "version": sys.version.split()[0],
         "implementation": sys.implementation.name}
try:
    import test.test_subprocess as m
except BaseException as e:
    about["error"] = f"{type(e).__name__}: {e}"
else:
    about["test_dir"] = os.path.dirname(os.path.dirname(m.__file__))
    about["pass_fds_redirected"] = sorted(
        f"{m.__name__}.{name}.test_pass_fds_redirected" for name, c in vars(m).items()
        if isinstance(c, type) and issubclass(c, unittest.TestCase)
        and "test_pass_fds_redirected" in vars(c))
print(json.dumps(about))
"""


def clean_env(env=None):
    """The environment without LD_PRELOAD and PPIPE_ variables."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}


def candidates():
    names = [sys.executable, "/usr/bin/python3", "/usr/bin/python3.11"]
    names += [shutil.which(n) for n in ("python3", "python3.11", "python")]
    seen, out = set(), []
    for n in names:
        if n and n not in seen:
            seen.add(n)
            out.append(n)
    return out


def find_python(wanted=None, say=print):
    """The first candidate (or wanted alone) that is a CPython 3 whose
    test.test_subprocess imports: a dict with executable, version, test_dir
    and pass_fds_redirected (test ids), or None. Says why each other
    candidate does not count."""
    seen = set()
    for cand in [wanted] if wanted else candidates():
        if not os.path.exists(cand):
            say(f"note: {cand}: no such file")
            continue
        try:
            p = subprocess.run([cand, "-c", _ABOUT], env=clean_env(), capture_output=True,
                               text=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            say(f"note: {cand}: {exc}")
            continue
        try:
            about = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            say(f"note: {cand}: not a Python 3 that runs this probe (exit status "
                f"{p.returncode}, {p.stderr.strip()[-300:]!r})")
            continue
        exe = about["executable"]
        if exe in seen:
            continue
        seen.add(exe)
        where = f"{cand}" + (f" ({exe})" if exe != cand else "")
        if about["implementation"] != "cpython":
            say(f"note: {where}: {about['implementation']} {about['version']}, not CPython")
        elif "error" in about:
            say(f"note: {where}: Python {about['version']} cannot import test.test_subprocess "
                f"({about['error']}; on Debian it comes with libpython3.X-testsuite)")
        else:
            return about
    return None


class Result:
    """A finished command: returncode (None after a timeout), stdout,
    stderr (text) and seconds."""

    def __init__(self, argv, returncode, stdout, stderr, seconds, timed_out=False):
        self.argv, self.returncode, self.stdout, self.stderr = argv, returncode, stdout, stderr
        self.seconds, self.timed_out = seconds, timed_out

    def tail(self, n=1500):
        if self.timed_out:
            head = f"timed out after {self.seconds:.0f} s"
        else:
            head = f"exit status {self.returncode}"
        err = self.stderr.strip()
        return head + (f", stderr: {err[-n:]}" if err else "")


def run(argv, env, timeout, cwd=None, stdout=subprocess.PIPE):
    """Runs argv in a session of its own, stdin /dev/null, output captured
    (or stdout to a file object given); after timeout seconds its process
    group is killed. Never raises for the command's own failures."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE if stdout == subprocess.PIPE
                            else subprocess.STDOUT, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return Result(argv, None if timed_out else proc.returncode, _text(out), _text(err),
                  time.monotonic() - t0, timed_out)


def _text(b):
    return b.decode(errors="replace") if b else ""


class Modes:
    """Commands in the four modes; the system mode needs setup_system()."""

    def __init__(self, lib, work):
        self.lib, self.work = os.path.abspath(lib), work
        self.env = clean_env()
        self.etc = None             # the /etc copy of the system mode, once set up
        self.system_lib = None

    def setup_system(self, python):
        """Prepares the system mode: (True, note), or (None, why) when it
        cannot run here (a skip), or (False, why) when ld.so.preload in the
        namespace did not load the library into python (a failure)."""
        why = syspreload.unavailable()
        if why:
            return None, why
        try:
            ns = syspreload.prepare(self.work, self.lib, plain=False, timeout=PROBE_TIMEOUT)
        except (syspreload.SetupError, OSError, subprocess.TimeoutExpired) as exc:
            return False, str(exc)
        etc, lib, note = ns.etc, ns.lib, "; ".join(ns.notes)
        probe = run(syspreload.in_ns(etc, [python, "-c", "import sys; print(sys.argv[1] in "
                                      "open('/proc/self/maps').read())", os.path.realpath(lib)]),
                    self.env, PROBE_TIMEOUT)
        if probe.stdout.strip() == "True":
            self.etc, self.system_lib = etc, lib
            return True, note
        if syspreload.sanitizer_refused(probe.stderr):
            return None, f"a sanitizer build cannot be preloaded system-wide: {probe.tail(300)}"
        if probe.returncode != 0 and probe.stdout.strip() != "False":
            return None, f"cannot run in a private mount namespace with /etc bound: {probe.tail()}"
        return False, (f"/etc/ld.so.preload in the namespace did not load {lib} into "
                       f"{python}: {probe.stdout.strip()!r}, {probe.tail()}")

    def available(self):
        return [m for m in MODES if m != "system" or self.etc]

    def command(self, mode, argv, extra_env=None):
        """(argv, env) that run argv in mode; extra_env only where
        libppipe runs."""
        env = dict(self.env)
        if mode != "plain":
            env.update(extra_env or {})
        if mode in ("preload", "trust"):
            env["LD_PRELOAD"] = self.lib
        if mode == "trust":
            env["PPIPE_READERS"] = "trust"
        if mode == "system":
            return syspreload.in_ns(self.etc, argv), env
        return argv, env

    def run(self, mode, argv, timeout, extra_env=None, cwd=None, stdout=subprocess.PIPE):
        a, env = self.command(mode, argv, extra_env)
        return run(a, env, timeout, cwd=cwd, stdout=stdout)
