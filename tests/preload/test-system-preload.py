#!/usr/bin/env python3
"""System-wide preloading: libppipe named in /etc/ld.so.preload, no LD_PRELOAD.

usage: test-system-preload.py LIBRARY STATIC_COPY SYSPRE_COPY

Every command runs in a private mount namespace of its own (unshare(1)),
where a copy of /etc whose ld.so.preload names LIBRARY is bind-mounted over
/etc; the host's /etc is never written, and the temporary directory goes at
the end. LD_PRELOAD and every PPIPE_ variable are unset. strace (-ff -y),
from inside the namespace, counts the bytes each process put into pipes:
by vmsplice(), and by write()/writev() calls of at least 16384 bytes
("large write"); pipes a task made and closed alone (libppipe's probes) are
left out. Every case checks the data (sha256 of 48 MiB of random bytes).

  1  sh: dd | cat | cat > FILE           >= 90% of the large bytes by vmsplice
  2  Python subprocess, child -> parent and parent -> child: >= 90% each
  3  dd | STATIC_COPY | sha256sum        a static reader: dd's pipe stays plain
  4  dd | SETUID COPY | sha256sum        owned by nobody, mode 4755, run by root:
                                         AT_SECURE, libppipe loaded, no vmsplice
                                         into its pipe, no PPIPE_STATS file
  5  dd | unshare -m (an /etc without ld.so.preload) SYSPRE_COPY | sha256sum
                                         a reader without libppipe: plain
  6  dd | pv -q | sha256sum              a splicing reader: data intact only
  7  meson setup + ninja of a small C project, with and without the system
     preload: same output; wall times reported, not judged
  8  case 3 with PPIPE_DEBUG=1: dd's stderr says why its pipe stays plain

Exit status: 0 pass, 1 fail, 77 skip (not root, no strace, no unshare or
mount permission, or a library that cannot be preloaded system-wide).
"""
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pyshapes

# The namespace's set-up is shared with ppipe-soak --system-preload.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import syspreload  # noqa: E402
from syspreload import in_ns, preload_state, work_root  # noqa: E402

MIN_WRITE = 16384
SIZE = 48 << 20
REACH_MIN = 90.0        # percent, where every process runs libppipe
PLAIN_MAX = 1.0         # percent of the writer's bytes, where the reader cannot
TIMEOUT = 60            # seconds, any one command
BUILD_TIMEOUT = 120

CALL = re.compile(r"^(\w+)\((.*)\)\s+= (-?\d+)")
PIPE_FD = re.compile(r"^(\d+)<pipe:\[(\d+)\]>")
PIPE_PAIR = re.compile(r"^\[(\d+)<pipe:\[(\d+)\]>, (\d+)<pipe:\[\d+\]>\]")
SPLICE_OUT = re.compile(r"^\d+<[^>]*>, (?:NULL|\[\d+\]), \d+<pipe:\[(\d+)\]>")
HELPER = re.compile(r"syspre-copy: pid=(\d+) at_secure=(\d+) uid=(\d+) euid=(\d+) "
                    r"libppipe=(\d)")
TRACED = ["execve", "write", "writev", "vmsplice", "splice", "pipe2", "?pipe", "close",
          "dup", "?dup2", "dup3", "clone", "?clone3", "?fork", "?vfork"]
CLONES = ("clone", "clone3", "fork", "vfork")



PROJECT = {
    "meson.build": """project('syspre-demo', 'c')
cc = meson.get_compiler('c')
conf = configuration_data()
foreach h : ['stdio.h', 'stdlib.h', 'string.h', 'unistd.h', 'fcntl.h', 'sys/uio.h']
  assert(cc.has_header(h), h)
endforeach
foreach f : ['vmsplice', 'splice', 'pipe2', 'memfd_create']
  conf.set10('HAVE_' + f.to_upper(), cc.has_function(f,
    prefix: '#define _GNU_SOURCE\\n#include <fcntl.h>\\n#include <sys/mman.h>'))
endforeach
conf.set('ROUNDS', 1000)
configure_file(output: 'config.h', configuration: conf)
executable('syspre-demo', 'main.c', 'sum.c', 'text.c')
""",
    "sum.c": """#include "config.h"
unsigned long syspre_sum(unsigned long seed)
{
	unsigned long h = seed;
	for (int i = 0; i < ROUNDS; i++)
		h = h * 6364136223846793005UL + 1442695040888963407UL;
	return h;
}
""",
    "text.c": """const char *syspre_text(void)
{
	return "system preload demo";
}
""",
    "main.c": """#include <stdio.h>
#include "config.h"
unsigned long syspre_sum(unsigned long seed);
const char *syspre_text(void);
int main(void)
{
	printf("%s: %lx vmsplice=%d splice=%d pipe2=%d memfd=%d\\n", syspre_text(),
	       syspre_sum(42), HAVE_VMSPLICE, HAVE_SPLICE, HAVE_PIPE2, HAVE_MEMFD_CREATE);
	return 0;
}
""",
}


# ------------------------------------------------------------------ results

RESULTS = []    # (case, check, verdict, detail); verdict True, False or None (skipped)
NUMBERS = []    # (case, what, vmsplice B, large write B, share %)


def check(case, what, ok, detail=""):
    """Records and prints one check."""
    RESULTS.append((case, what, ok, detail))
    tag = {True: "ok  ", False: "FAIL", None: "SKIP"}[ok]
    print(f"{tag} [{case}] {what}" + (f": {detail}" if detail else ""), flush=True)


def number(case, what, c):
    NUMBERS.append((case, what, c.vm, c.large, c.share()))


# ---------------------------------------------------------------- counting


class Counts:
    """Bytes into pipes: by vmsplice, large and small writes, by splice."""

    def __init__(self):
        self.vm = self.large = self.small = self.splice = 0

    def add(self, o):
        self.vm += o.vm
        self.large += o.large
        self.small += o.small
        self.splice += o.splice

    def share(self):
        return 100.0 * self.vm / (self.vm + self.large) if self.vm + self.large else 0.0

    def text(self):
        s = (f"vmsplice {self.vm} B, large write {self.large} B, "
             f"{self.share():.1f}% by vmsplice")
        return s + (f", splice {self.splice} B" if self.splice else "")


def requested(name, args, ret):
    """Bytes a write call asked for (at least what it moved)."""
    if name == "write":
        m = re.search(r", (\d+)$", args)
        want = int(m.group(1)) if m else 0
    else:
        want = sum(int(n) for n in re.findall(r"iov_len=(\d+)", args))
    return max(want, ret)


def program_of(args):
    m = re.search(r'"((?:[^"\\]|\\.)*)"', args)
    return os.path.basename(m.group(1)) if m else "?"


def account(path, rows, image):
    """One task's trace: its pipe writes into rows[(pid, program)], except
    on pipes it made and closed alone. Returns {child tid: image}."""
    tid = int(path.rpartition(".")[2])
    pending = {}            # inode -> [fds, Counts]: made here, not shared yet
    children = {}

    def row():
        return rows.setdefault((tid, image), Counts())

    def release():
        for _, c in pending.values():
            row().add(c)
        pending.clear()

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = CALL.match(line)
            if not m:
                continue
            name, args, ret = m.group(1), m.group(2), int(m.group(3))
            if name in CLONES:
                if ret > 0:
                    release()
                    children[ret] = image
                continue
            if name == "execve":
                if ret == 0:
                    release()
                    image = program_of(args)
                continue
            if name in ("pipe", "pipe2"):
                p = PIPE_PAIR.match(args)
                if ret == 0 and p:
                    pending[p.group(2)] = [{p.group(1), p.group(3)}, Counts()]
                continue
            if name == "splice":
                p = SPLICE_OUT.match(args)
                if p and ret > 0:
                    (pending[p.group(1)][1] if p.group(1) in pending else row()).splice += ret
                continue
            p = PIPE_FD.match(args)
            if not p:
                continue
            fd, ino = p.groups()
            if name in ("dup", "dup2", "dup3"):
                if ret >= 0 and ino in pending:
                    pending[ino][0].add(str(ret))
                continue
            if name == "close":
                if ret == 0 and ino in pending:
                    pending[ino][0].discard(fd)
                    if not pending[ino][0]:
                        del pending[ino]        # a scratch pipe: not counted
                continue
            if ret <= 0:
                continue
            c = pending[ino][1] if ino in pending else row()
            if name == "vmsplice":
                c.vm += ret
            elif requested(name, args, ret) >= MIN_WRITE:
                c.large += ret
            else:
                c.small += ret
    release()
    return children


def analyse(folder):
    """{(pid, program): Counts} from strace -ff's files trace.TID."""
    files = {}
    for name in os.listdir(folder):
        head, _, tid = name.rpartition(".")
        if head == "trace" and tid.isdigit():
            files[int(tid)] = os.path.join(folder, name)
    made = set()
    for path in files.values():
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = CALL.match(line)
                if m and m.group(1) in CLONES and int(m.group(3)) > 0:
                    made.add(int(m.group(3)))
    # Parents first: a task starts with the image its parent had at the clone.
    rows = {}
    todo = [(tid, "?") for tid in sorted(files) if tid not in made]
    while todo or files:
        if not todo:                    # made by calls strace did not see
            todo = [(tid, "?") for tid in sorted(files)]
        tid, image = todo.pop(0)
        if tid not in files:
            continue
        kids = account(files.pop(tid), rows, image)
        todo += [(k, im) for k, im in kids.items() if k in files]
    return rows


def total(rows, program=None):
    c = Counts()
    for (_, prog), counts in rows.items():
        if program is None or prog == program:
            c.add(counts)
    return c


def none_hint(c):
    """What a reach of 0% most likely means."""
    return ("; 0% means the exec'd programs never shared the pipe registry (today it is "
            "handed on only where LD_PRELOAD is set)" if c.large and not c.vm else "")


def per_process(rows):
    return "; ".join(f"{prog}[{pid}] {c.vm}/{c.large}" for (pid, prog), c in sorted(rows.items())
                     if c.vm or c.large) or "no large pipe writes seen"


# ------------------------------------------------------------- namespaces


def run(argv, env, timeout=TIMEOUT, stdin=None):
    """Runs argv with its output captured, in a session of its own; when it
    takes longer than timeout, its process group is killed and
    subprocess.TimeoutExpired raised (a hang fails the test)."""
    proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class Tracer:
    """strace -ff -y of a command in a namespace, counted (analyse())."""

    def __init__(self, work, env):
        self.work, self.env, self.n = work, env, 0
        self.extra = None
        # --seccomp-bpf stops the tracee only at traced calls: much faster.
        for extra in (["--seccomp-bpf"], []):
            p = run(["strace", "-f", "-qq", "-e", "trace=write", "-o", os.devnull] + extra
                    + ["true"], env)
            if p.returncode == 0 and b"seccomp" not in p.stderr:
                self.extra = extra
                break
            self.why = tail(p)

    def __call__(self, etc, argv, env=None, timeout=TIMEOUT):
        """Runs argv under strace in the namespace: (process, rows)."""
        self.n += 1
        folder = os.path.join(self.work, f"strace.{self.n}")
        os.mkdir(folder)
        cmd = ["strace", "-f", "-ff", "-qq", "-y", "-e", "trace=" + ",".join(TRACED),
               "-e", "signal=none"] + self.extra + ["-o", os.path.join(folder, "trace"), "--"]
        proc = run(in_ns(etc, cmd + argv), env or self.env, timeout=timeout)
        rows = analyse(folder)
        shutil.rmtree(folder)
        return proc, rows


def helper_line(stderr):
    """The syspre-copy line: dict, or None."""
    for line in stderr.decode(errors="replace").splitlines():
        m = HELPER.search(line)
        if m:
            return dict(zip(("pid", "at_secure", "uid", "euid", "libppipe"),
                            map(int, m.groups())))
    return None


def tail(proc):
    err = proc.stderr.decode(errors="replace").strip()
    return f"exit status {proc.returncode}" + (f", stderr: {err[-1500:]}" if err else "")


# ------------------------------------------------------------------- cases


def first_word(proc):
    words = proc.stdout.decode(errors="replace").split()
    return words[0] if words else ""


def intact(case, what, proc, got, want):
    ok = proc.returncode == 0 and got == want
    check(case, f"{what}: data intact", ok,
          "" if ok else f"sha256 {got or 'none'} (want {want}); {tail(proc)}")
    return ok


def case_shell(t, etc, data, want, work):
    out = os.path.join(work, "out1")
    cmd = f"dd if={shlex.quote(data)} bs=1M status=none | cat | cat > {shlex.quote(out)}"
    proc, rows = t(etc, ["sh", "-c", cmd])
    got = ""
    if os.path.exists(out):
        got = pyshapes.sha256_file(out)
        os.unlink(out)
    intact(1, "sh: dd | cat | cat > FILE", proc, got, want)
    c = total(rows)
    number(1, "dd | cat | cat: all pipes", c)
    check(1, f"sh: dd | cat | cat: >= {REACH_MIN:.0f}% of the large pipe-write bytes by "
          f"vmsplice", c.share() >= REACH_MIN,
          f"measured {c.text()} over all processes' pipe writes (per process "
          f"vmsplice/large: {per_process(rows)}){none_hint(c)}")


def case_python(t, etc, py, data, want):
    for what, script in (("child -> parent (subprocess.run(['cat', DATA], stdout=PIPE))",
                          pyshapes.READ_CHILD),
                         ("parent -> child (Popen(['sha256sum'], stdin=PIPE))",
                          pyshapes.WRITE_CHILD)):
        proc, rows = t(etc, [py, "-c", script, data])
        intact(2, f"python {what}", proc, first_word(proc), want)
        c = total(rows)
        number(2, "python " + what.split(" (")[0], c)
        check(2, f"python {what}: >= {REACH_MIN:.0f}% by vmsplice", c.share() >= REACH_MIN,
              f"measured {c.text()} (per process vmsplice/large: {per_process(rows)})"
              f"{none_hint(c)}")


def after_static(static, data, work, dd_tail=""):
    """dd | STATIC | sha256sum, dd started only once STATIC runs.

    Started together, dd may take its end over while the reader is still
    the shell's fork child (a libppipe process, so its readers are known)
    and push its first megabytes before that child execs the static
    program, which turns the pipe plain from then on: correct, but not
    the case to check. STATIC writes a byte to a FIFO when it starts, and
    dd waits for it.
    """
    fifo = os.path.join(work, "static-ready")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)       # a setuid reader runs as another user
    return (f"{{ read -r _ < {shlex.quote(fifo)}; exec dd if={shlex.quote(data)} bs=1M "
            f"status=none{dd_tail}; }} | {shlex.quote(static)} {shlex.quote(fifo)} | sha256sum")


def case_static(t, etc, static, data, want, work):
    cmd = after_static(static, data, work)
    proc, rows = t(etc, ["sh", "-c", cmd])
    intact(3, "dd | static-copy | sha256sum", proc, first_word(proc), want)
    dd = total(rows, "dd")
    number(3, "dd -> static-copy", dd)
    number(3, "static-copy -> sha256sum", total(rows, os.path.basename(static)))
    check(3, f"dd's pipe into the static program stays plain (<= {PLAIN_MAX:.0f}% by "
          f"vmsplice)", dd.large > 0 and dd.share() <= PLAIN_MAX,
          f"dd: {dd.text()}")


def case_setuid(t, etc, helper, data, want, work, env):
    try:
        uid = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        uid = 65534
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir)
    os.chmod(bindir, 0o755)
    suid = os.path.join(bindir, "syspre-copy-suid")
    shutil.copyfile(helper, suid)
    os.chown(suid, uid, -1)
    os.chmod(suid, 0o4755)
    stats = os.path.join(work, "stats")
    os.mkdir(stats)
    os.chmod(stats, 0o1777)     # the setuid process could write here
    env = dict(env, PPIPE_STATS=os.path.join(stats, "stats.%p"), PPIPE_DEBUG="1")
    # dd waits until the setuid program runs (see after_static).
    cmd = after_static(suid, data, work)
    proc, rows = t(etc, ["sh", "-c", cmd], env=env)
    intact(4, "dd | setuid copy | sha256sum", proc, first_word(proc), want)
    h = helper_line(proc.stderr)
    check(4, "the setuid program ran AT_SECURE, euid nobody, libppipe loaded by ld.so.preload",
          bool(h and h["at_secure"] == 1 and h["euid"] == uid and h["libppipe"] == 1),
          f"it said {h}" if h else f"no line from it; {tail(proc)}")
    dd = total(rows, "dd")
    number(4, "dd -> setuid copy", dd)
    out = total(rows, "syspre-copy-suid")
    number(4, "setuid copy -> sha256sum", out)
    check(4, "no vmsplice into the setuid program's pipe", dd.large > 0 and dd.vm == 0,
          f"dd: {dd.text()}")
    print(f"     [4] the setuid program's own writes (reported, not judged): {out.text()}")
    names = sorted(os.listdir(stats))
    pid = h["pid"] if h else -1
    # The process that exec'd the setuid program was not setuid: its note of
    # the exec (an object with "exec", naming the program it handed pipes to)
    # goes under the pid the program keeps. Anything else under that pid
    # would be the setuid program's own report.
    mine = []
    for n in names:
        with open(os.path.join(stats, n), errors="replace") as f:
            lines = f.read().splitlines()
        for ln in lines:
            try:
                obj = json.loads(ln)
            except ValueError:
                obj = None
            if not (isinstance(obj, dict) and "exec" in obj) and f'"pid":{pid},' in ln:
                mine.append(f"{n}: {ln[:80]}")
    check(4, "PPIPE_STATS names a path: no report from the setuid process",
          bool(h) and not mine,
          f"{len(names)} report file(s) from the other processes; the setuid process "
          f"(pid {pid}) wrote: {mine or 'nothing'}")
    dd_pids = [p for (p, prog) in rows if prog == "dd"]
    check(4, "PPIPE_STATS is honoured by the other processes (so the check above means "
          "something)", any(f"stats.{p}" in names for p in dd_pids),
          f"files: {names[:8]}, dd pid(s) {dd_pids}")
    leaked = []
    for n in names:
        with open(os.path.join(stats, n), errors="replace") as f:
            if "libppipe[" in f.read():
                leaked.append(n)
    err = proc.stderr.decode(errors="replace")
    said = [ln for ln in err.splitlines() if ln.startswith(f"libppipe[{pid}]")]
    check(4, "PPIPE_DEBUG=1 output goes to stderr, never into files",
          not leaked, f"debug lines of the setuid process on stderr: {said[:4]}"
          + (f"; found in files: {leaked}" if leaked else ""))


def case_other_ns(t, etc, etc_plain, helper, data, want):
    inner = f"mount --bind {shlex.quote(etc_plain)} /etc && exec {shlex.quote(helper)}"
    cmd = (f"dd if={shlex.quote(data)} bs=1M status=none | unshare --mount --propagation "
           f"private sh -c {shlex.quote(inner)} | sha256sum")
    proc, rows = t(etc, ["sh", "-c", cmd])
    intact(5, "dd | (other mount namespace, no ld.so.preload) copy | sha256sum", proc,
           first_word(proc), want)
    h = helper_line(proc.stderr)
    check(5, "the reader in the other namespace runs without libppipe",
          bool(h and h["libppipe"] == 0), f"it said {h}" if h else tail(proc))
    dd = total(rows, "dd")
    number(5, "dd -> reader without libppipe", dd)
    check(5, f"dd's pipe into it stays plain (<= {PLAIN_MAX:.0f}% by vmsplice)",
          dd.large > 0 and dd.share() <= PLAIN_MAX, f"dd: {dd.text()}")


def case_pv(t, etc, data, want):
    if not shutil.which("pv"):
        check(6, "dd | pv -q | sha256sum", None, "pv is not installed")
        return
    cmd = f"dd if={shlex.quote(data)} bs=1M status=none | pv -q | sha256sum"
    proc, rows = t(etc, ["sh", "-c", cmd])
    intact(6, "dd | pv -q | sha256sum", proc, first_word(proc), want)
    dd, pv = total(rows, "dd"), total(rows, "pv")
    number(6, "dd -> pv (reported, not judged)", dd)
    number(6, "pv -> sha256sum", pv)
    print(f"     [6] dd: {dd.text()}; pv: {pv.text()} (splice = pv's own splice() out)")


def case_build(etc, etc_plain, work, env):
    tools = [shutil.which(x) for x in ("meson", "ninja", "cc")]
    if not all(tools):
        check(7, "meson + ninja build", None, "meson, ninja or cc is not installed")
        return
    src = os.path.join(work, "proj")
    os.mkdir(src)
    for name, text in PROJECT.items():
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    times = {"plain": [], "preload": []}
    outs = {}
    for i, (kind, e) in enumerate([("plain", etc_plain), ("preload", etc),
                                   ("plain", etc_plain), ("preload", etc)]):
        b = os.path.join(work, f"build-{kind}-{i}")
        script = (f"meson setup {shlex.quote(b)} {shlex.quote(src)} && "
                  f"ninja -C {shlex.quote(b)} && echo @@@ && {shlex.quote(b)}/syspre-demo")
        t0 = time.monotonic()
        proc = run(in_ns(e, ["sh", "-c", script]), env, timeout=BUILD_TIMEOUT)
        dt = time.monotonic() - t0
        text = proc.stdout.decode(errors="replace")
        out = text.split("@@@\n", 1)[1] if "@@@\n" in text else None
        if proc.returncode != 0 or out is None:
            check(7, f"meson + ninja build ({kind})", False,
                  f"{tail(proc)}; stdout: {text[-1500:]}")
            return
        times[kind].append(dt)
        outs.setdefault(kind, out)
        shutil.rmtree(b)
    same = outs["plain"] == outs["preload"]
    check(7, "meson + ninja build: both build, and the programs print the same", same,
          f"plain {outs['plain'].strip()!r}, preload {outs['preload'].strip()!r}")
    p, q = min(times["plain"]), min(times["preload"])
    print(f"     [7] wall time, best of 2: plain {p:.2f} s, system preload {q:.2f} s, "
          f"ratio {q / p:.2f} (runs: plain {['%.2f' % x for x in times['plain']]}, "
          f"preload {['%.2f' % x for x in times['preload']]})")
    NUMBERS.append((7, f"build wall time: plain {p:.2f} s, preload {q:.2f} s, "
                    f"ratio {q / p:.2f}", None, None, None))


def case_debug(etc, static, data, want, work, env):
    err = os.path.join(work, "dd.stderr")
    cmd = after_static(static, data, work, f" 2>{shlex.quote(err)}")
    proc = run(in_ns(etc, ["sh", "-c", cmd]), dict(env, PPIPE_DEBUG="1"))
    intact(8, "PPIPE_DEBUG=1 dd | static-copy | sha256sum", proc, first_word(proc), want)
    with open(err, errors="replace") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.startswith("libppipe[")]
    hits = [ln for ln in lines if "plain" in ln and ("exec" in ln or "confirm" in ln)]
    print(f"     [8] dd's libppipe lines ({len(lines)}):")
    for ln in lines[:20]:
        print(f"         {ln}")
    check(8, "dd's PPIPE_DEBUG says its pipe stays plain (a line with 'plain' and "
          "'exec' or 'confirm')", bool(hits),
          f"{len(lines)} libppipe line(s) from dd, {len(hits)} matching")


# -------------------------------------------------------------------- main


def summary():
    print("\nsummary: bytes into pipes (large = write calls of >= 16384 bytes)")
    print(f"  {'case':4}  {'what':48} {'vmsplice B':>12} {'large write B':>14} "
          f"{'by vmsplice':>11}")
    for case, what, vm, large, share in NUMBERS:
        if vm is None:
            print(f"  {case:<4}  {what}")
        else:
            print(f"  {case:<4}  {what:48} {vm:>12} {large:>14} {share:>10.1f}%")
    print("\nsummary: checks")
    for case, what, ok, _ in RESULTS:
        print(f"  {case:<4}  {({True: 'ok', False: 'FAIL', None: 'skip'})[ok]:4}  {what}")
    bad = sum(1 for r in RESULTS if r[2] is False)
    print(f"\n{len(RESULTS)} checks, {bad} failed, "
          f"{sum(1 for r in RESULTS if r[2] is None)} skipped")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    lib, static, helper = (os.path.abspath(a) for a in sys.argv[1:4])
    if os.geteuid() != 0:
        print("SKIP: needs root (mount namespaces, a setuid file owned by nobody)")
        return 77
    for tool in ["strace"] + syspreload.missing_tools():
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed")
            return 77
    env = syspreload.env_without_preload(os.environ)
    before = preload_state()
    root, why = work_root([tempfile.gettempdir(), "/var/tmp", os.path.dirname(lib)])
    for w in why:
        print(f"note: {w}")
    if not root:
        print("SKIP: no directory that honours setuid and that nobody can reach")
        return 77
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=root, prefix="ppipe-syspre.") as work:
        os.chmod(work, 0o755)
        try:
            ns = syspreload.prepare(work, lib, timeout=TIMEOUT)
        except syspreload.SetupError as exc:
            print(f"FAIL: {exc}")
            return 1
        for note in ns.notes:
            print(f"note: {note}")
        etc, etc_plain, preload_lib = ns.etc, ns.etc_plain, ns.lib

        # Can this run here at all: a namespace, and the library in a program?
        probe = run(in_ns(etc, [helper]), env, stdin=subprocess.DEVNULL)
        h = helper_line(probe.stderr)
        if probe.returncode != 0 and not h:
            print(f"SKIP: cannot run in a private mount namespace with /etc bound: "
                  f"{tail(probe)}")
            return 77
        if not h or h["libppipe"] != 1:
            err = probe.stderr.decode(errors="replace")
            if "Sanitizer" in err or "ASan" in err:
                print(f"SKIP: a sanitizer build cannot be preloaded system-wide: {err[:300]}")
                return 77
            print(f"FAIL: /etc/ld.so.preload in the namespace did not load the library: "
                  f"{tail(probe)}")
            return 1
        host = run([helper], env, stdin=subprocess.DEVNULL)
        hh = helper_line(host.stderr)
        print(f"setup: work directory {work} (on {root}); /etc/ld.so.preload in the namespace "
              f"names {preload_lib}; a program there: {h}; outside: {hh}")

        data = os.path.join(work, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(SIZE))
        os.chmod(data, 0o644)
        want = pyshapes.sha256_file(data)
        t = Tracer(work, env)
        if t.extra is None:
            print(f"SKIP: strace cannot trace here: {t.why}")
            return 77
        if not t.extra:
            print("note: strace --seccomp-bpf does not work here; tracing every call")

        py = None
        for cand in (sys.executable, "/usr/bin/python3"):
            if cand and os.path.exists(cand):
                r = run(in_ns(etc, [cand, "-c", "import sys; sys.exit("
                                    "'libppipe' not in open('/proc/self/maps').read())"]), env)
                if r.returncode == 0:
                    py = cand
                    break
                print(f"note: {cand} does not load libppipe under ld.so.preload "
                      f"(static?): {tail(r)}")

        case_shell(t, etc, data, want, work)
        if py:
            case_python(t, etc, py, data, want)
        else:
            check(2, "python subprocess", None, "no Python that loads libppipe")
        case_static(t, etc, static, data, want, work)
        case_setuid(t, etc, helper, data, want, work, env)
        case_other_ns(t, etc, etc_plain, helper, data, want)
        case_pv(t, etc, data, want)
        case_build(etc, etc_plain, work, env)
        case_debug(etc, static, data, want, work, env)
    after = preload_state()
    check("-", "the host's /etc/ld.so.preload is as it was", before == after,
          f"before {before!r}, after {after!r}")
    check("-", "the temporary directory is gone", not os.path.exists(work), work)
    summary()
    print(f"total time {time.monotonic() - t_start:.1f} s")
    return 1 if any(r[2] is False for r in RESULTS) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.TimeoutExpired as exc:
        print(f"FAIL: timed out after {exc.timeout} s: {exc.cmd}")
        summary()
        sys.exit(1)
