#!/usr/bin/env python3
"""Zero cost where libppipe cannot help: the system calls it adds, counted by strace.

usage: test-idle.py LIBRARY IDLE_PROG

Every case runs twice under `strace -f`, plain and with LD_PRELOAD=LIBRARY
(strace -E, so that strace itself never loads the library), with default
options (LD_PRELOAD and every PPIPE_ variable dropped from the environment).
The traces are split per task, and the system-call names of each task are
compared between the two runs, task for task (the same place in the tree of
forks); only the differences count, since strace and the dynamic loader make
the same calls in both. From the preloaded run the loader's own mapping of
the library is taken out first: the openat() of the library's path up to
its close() (read, pread64, fstat/newfstatat, mmap, mprotect in between),
and one mprotect() inside the mapping (its RELRO).

  1  /bin/true and `idle-prog nothing`: no call besides the loader's; a
     preloaded process maps no libnuma or liburing and has no fd of
     libppipe's open (/proc/PID/maps and /proc/PID/fd, seen from outside)
  2  fork + _exit in a process without pipes: every task as plain
  3  fork + execve(/bin/true): the child's calls up to the execve as plain
  4  100 pipes (pipe, 64-byte write, read, close both): no system call per
     pipe; once per process, libppipe's tables (one prlimit64 to size the fd
     table, at most 3 mmap), nothing else: the same with 1 pipe as with 100;
     no registry (shmget)
  5  a pipe read by a second thread, 8 MiB in 1 MiB writes: vmsplice on that
     pipe, no registry (shmget), /proc/self/fd afterwards as plain
  6  a pipe a fork child writes 8 MiB into: one shmget (the registry) in the
     parent before the fork, >= 90% of the child's bytes by vmsplice, data
     intact
  7  a process that tracks a pipe forks a child that calls _exit: the
     child's calls as plain (the parent records the child's holds)
  8  sh -c 'cat FILE | cat > /dev/null': the second cat, from its execve to
     its first read of stdin, adds nothing but the loader's mapping and at
     most one shmctl(IPC_STAT), shmat, getpid and clock_gettime (joining the
     registry and claiming its record); no /proc, no getdents64, no
     prlimit64

One line per check, `ok   ...` or `FAIL ...`, with what was measured.
Exit status: 0 pass, 1 fail, 77 skip (no strace, ptrace not permitted, or
a library that cannot be preloaded into /bin/true).
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 60                # seconds, any one command
SIZE = 8 << 20              # bytes the data cases move
NPIPES = 100
MAX_TABLE_MMAPS = 3
REACH_MIN = 90.0            # percent of the child's bytes by vmsplice (case 6)
LOADER_CALLS = {"openat", "read", "pread64", "newfstatat", "fstat", "mmap", "mprotect",
                "close"}
FSTATS = ("fstat", "newfstatat")
CLONES = ("clone", "clone3", "fork", "vfork")
# Case 8: what taking the registry over may cost a starting program, at most.
CLAIM_ALLOWED = {"shmctl": 1, "shmat": 1, "getpid": 1, "clock_gettime": 1}

LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^(\w+)\((.*)$", re.S)
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$", re.S)
RET = re.compile(r"\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?)")
PIPE_PAIR = re.compile(r"^\[(\d+)<pipe:\[(\d+)\]>, (\d+)<pipe:\[\d+\]>\]")
FD_INODE = re.compile(r"^(\d+)<pipe:\[(\d+)\]>")

FAILED = []


def check(ok, what, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        FAILED.append(what)


# ------------------------------------------------------------------ traces


class Call:
    __slots__ = ("name", "args", "ret")

    def __init__(self, name, args):
        self.name, self.args, self.ret = name, args, None

    def finish(self):
        """Return value from the text, once the call is complete."""
        rets = RET.findall(self.args)
        if rets and rets[-1] != "?":
            self.ret = int(rets[-1], 0)


class Trace:
    """strace -f output: each task's calls in order, and who forked whom."""

    def __init__(self, path):
        self.calls = collections.OrderedDict()     # tid -> [Call]
        self.children = collections.defaultdict(list)
        pending = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for raw in f:
                m = LINE.match(raw.rstrip("\n"))
                if not m:
                    continue
                tid, text = int(m.group(1)), m.group(2)
                calls = self.calls.setdefault(tid, [])
                r = RESUMED.match(text)
                if r:
                    c = pending.pop(tid, None)
                    if c and c.name == r.group(1):
                        c.args += r.group(2)
                        c.finish()
                    continue
                c = CALL.match(text)
                if not c:
                    continue        # +++ exited, --- signals
                call = Call(c.group(1), c.group(2))
                calls.append(call)
                if text.endswith("<unfinished ...>"):
                    call.args = call.args[:-len("<unfinished ...>")].rstrip() + " "
                    pending[tid] = call
                else:
                    call.finish()
        self.root = next(iter(self.calls), None)
        for tid, calls in self.calls.items():
            for c in calls:
                if c.name in CLONES and c.ret and c.ret > 0:
                    self.children[tid].append(c.ret)

    def tasks(self):
        """{path in the fork tree: tid}; the root is (), its 2nd child (1,)."""
        out = {}

        def walk(tid, path):
            out[path] = tid
            for i, child in enumerate(self.children.get(tid, [])):
                walk(child, path + (i,))
        if self.root is not None:
            walk(self.root, ())
        return out

    def task(self, path):
        tid = self.tasks().get(path)
        return self.calls.get(tid, []) if tid is not None else None

    def all_calls(self):
        return [c for calls in self.calls.values() for c in calls]


def strip_loader(calls, lib):
    """@calls without the dynamic loader's mapping of @lib (after each execve):
    openat(lib) .. close(fd) of the names LOADER_CALLS, then one mprotect()
    inside the mapping. Returns (calls left, calls taken out)."""
    out, taken = [], 0
    quoted = '"' + lib + '"'
    for i, c in enumerate(calls):
        if not (c.name == "openat" and quoted in c.args and c.ret is not None and c.ret >= 0):
            out.append(c)
            continue
        fd, lo, hi, j = c.ret, None, None, i + 1
        taken += 1
        while j < len(calls):
            d = calls[j]
            j += 1
            if d.name not in LOADER_CALLS:
                out.append(d)
                continue
            taken += 1
            if d.name == "mmap" and d.ret is not None and d.ret > 0:
                m = re.match(r"\s*(?:NULL|0x[0-9a-f]+), (\d+),", d.args)
                if m:
                    end = d.ret + int(m.group(1))
                    lo = d.ret if lo is None else min(lo, d.ret)
                    hi = end if hi is None else max(hi, end)
            if d.name == "close" and re.match(rf"\s*{fd}\s*\)", d.args):
                break
        rest = calls[j:]
        for k, d in enumerate(rest):
            m = re.match(r"(0x[0-9a-f]+),", d.args)
            if (d.name == "mprotect" and m and lo is not None
                    and lo <= int(m.group(1), 16) < hi):
                del rest[k]
                taken += 1
                break
        more, n = strip_loader(rest, lib)
        return out + more, taken + n
    return out, taken


def names(calls):
    return collections.Counter(c.name for c in calls)


def fmt(counter):
    if not counter:
        return "none"
    return ", ".join(f"{n} x{k}" if k > 1 else n for n, k in sorted(counter.items()))


def diff(plain, pre):
    """(extra, missing): name multisets of the preloaded calls against plain."""
    a, b = names(plain), names(pre)
    return b - a, a - b


def upto_execve(calls):
    out = []
    for c in calls:
        if c.name == "execve":
            break
        out.append(c)
    return out


def from_execve(calls, argv_json):
    """The calls from the execve whose argv text is @argv_json on, or None."""
    for i, c in enumerate(calls):
        if c.name == "execve" and f", {argv_json}, " in c.args:
            return calls[i:]
    return None


# -------------------------------------------------------------------- runs


class Runner:
    def __init__(self, lib, env, work):
        self.lib, self.env, self.work, self.n = lib, env, work, 0

    def trace(self, argv, preload, extra=(), stdin=subprocess.DEVNULL):
        """Runs @argv under strace -f; returns (CompletedProcess, Trace)."""
        self.n += 1
        out = os.path.join(self.work, f"trace.{self.n}")
        cmd = ["strace", "-f", "-qq", "-e", "signal=none", *extra, "-o", out]
        if preload:
            cmd += ["-E", "LD_PRELOAD=" + self.lib]
        p = subprocess.run(cmd + ["--"] + argv, env=self.env, stdin=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        return p, Trace(out)

    def both(self, argv, extra=()):
        p0, t0 = self.trace(argv, False, extra)
        p1, t1 = self.trace(argv, True, extra)
        return (p0, t0), (p1, t1)


def status(p):
    s = f"exit {p.returncode}"
    err = p.stderr.decode(errors="replace").strip()
    return s + (f", stderr {err[-300:]!r}" if err else "")


# ------------------------------------------------------------------- cases


def case_start(r, prog):
    for what, argv in (("/bin/true", ["/bin/true"]), ("idle-prog nothing", [prog, "nothing"])):
        (p0, t0), (p1, t1) = r.both(argv)
        plain, pre = t0.task(()), t1.task(())
        left, taken = strip_loader(pre, r.lib)
        extra, missing = diff(plain, left)
        ok = p0.returncode == 0 and p1.returncode == 0 and taken > 0 and not extra and not missing
        check(ok, f"1 start-up of {what}: calls besides the loader's",
              f"extra {fmt(extra)}; missing {fmt(missing)}; loader's {taken} taken out; "
              f"{len(plain)} calls plain, {len(pre)} preloaded"
              + ("" if p0.returncode == 0 and p1.returncode == 0 else
                 f"; plain {status(p0)}, preloaded {status(p1)}"))

    # The process seen from outside while it waits on its stdin.
    seen = {}
    for preload in (False, True):
        env = dict(r.env, LD_PRELOAD=r.lib) if preload else r.env
        p = subprocess.Popen([prog, "wait"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            ready = p.stdout.readline()
            with open(f"/proc/{p.pid}/maps") as f:
                maps = f.read()
            fds = {}
            for fd in os.listdir(f"/proc/{p.pid}/fd"):
                try:
                    fds[int(fd)] = re.sub(r"\[\d+\]$", "", os.readlink(f"/proc/{p.pid}/fd/{fd}"))
                except OSError:
                    pass
        finally:
            p.stdin.close()
            p.wait(timeout=TIMEOUT)
            p.stdout.close()
        seen[preload] = (ready, maps, fds)
    ready, maps, fds = seen[True]
    libs = sorted({os.path.basename(line.split()[-1]) for line in maps.splitlines()
                   if re.search(r"/lib(numa|uring|ppipe)[^/]*$", line)})
    loaded = any(os.path.basename(x).startswith("libppipe") for x in libs)
    bad = [x for x in libs if not x.startswith("libppipe")]
    check(ready == b"ready\n" and loaded and not bad,
          "1 a preloaded process maps libppipe and no libnuma or liburing",
          f"mapped: {', '.join(libs) or 'none of them'}")
    theirs = {fd: k for fd, k in fds.items() if "ppipe" in k or k.startswith("/memfd:")}
    check(fds == seen[False][2] and not theirs,
          "1 a preloaded process has no fd of libppipe's open",
          f"fds {sorted(fds.items())}, plain {sorted(seen[False][2].items())}")


def compare_tasks(t0, t1, lib, only=None):
    """Per task of the fork tree: (path, extra, missing, n plain, n preloaded)."""
    paths0, paths1 = t0.tasks(), t1.tasks()
    rows = []
    for path in sorted(set(paths0) | set(paths1)):
        if only is not None and path not in only:
            continue
        plain = t0.task(path) or []
        pre, _ = strip_loader(t1.task(path) or [], lib)
        extra, missing = diff(plain, pre)
        if path not in paths0:
            missing = collections.Counter({"(no such task plain)": 1})
        if path not in paths1:
            extra = collections.Counter({"(no such task preloaded)": 1})
        rows.append((path, extra, missing, len(plain), len(pre)))
    return rows


def task_name(path):
    return "parent" if path == () else "child " + ".".join(str(i + 1) for i in path)


def case_fork(r, prog):
    (p0, t0), (p1, t1) = r.both([prog, "fork"])
    rows = compare_tasks(t0, t1, r.lib)
    bad = [x for x in rows if x[1] or x[2]]
    child = [x for x in rows if x[0] == (0,)]
    check(p0.returncode == p1.returncode == 0 and not bad and len(rows) == 2,
          "2 fork + _exit, no pipe: each process's calls as plain",
          "; ".join(f"{task_name(p)}: extra {fmt(e)}, missing {fmt(m)} ({a}/{b} calls)"
                    for p, e, m, a, b in rows) + (" (no child seen)" if not child else ""))


def case_exec(r, prog):
    (p0, t0), (p1, t1) = r.both([prog, "exec"])
    a, b = t0.task((0,)), t1.task((0,))
    a_names = [c.name for c in upto_execve(a or [])]
    b_names = [c.name for c in upto_execve(b or [])]
    ok = (a is not None and b is not None and a_names == b_names
          and p0.returncode == p1.returncode == 0)
    extra, missing = (collections.Counter(b_names) - collections.Counter(a_names),
                      collections.Counter(a_names) - collections.Counter(b_names))
    check(ok, "3 fork + execve(/bin/true), no pipe: the child's calls up to the execve",
          f"plain [{', '.join(a_names)}], preloaded [{', '.join(b_names)}]; "
          f"extra {fmt(extra)}, missing {fmt(missing)}")


def case_pipes(r, prog):
    (p0, t0), (p1, t1) = r.both([prog, "pipes", str(NPIPES)])
    plain = t0.task(())
    pre, _ = strip_loader(t1.task(()), r.lib)
    extra, missing = diff(plain, pre)
    ok_run = p0.returncode == p1.returncode == 0
    nstat = sum(extra[n] for n in FSTATS)
    check(ok_run and nstat == 0,
          f"4 {NPIPES} pipes: no fstat/newfstatat (pipe() asks the kernel nothing)",
          f"{nstat} extra fstat/newfstatat"
          + ("" if ok_run else f"; plain {status(p0)}, preloaded {status(p1)}"))
    check(extra["mmap"] <= MAX_TABLE_MMAPS,
          f"4 {NPIPES} pipes: libppipe's tables, at most {MAX_TABLE_MMAPS} mmap once",
          f"{extra['mmap']} extra mmap")
    others = collections.Counter({n: k for n, k in extra.items()
                                  if n not in FSTATS and n not in ("mmap", "prlimit64")})
    check(not others and not missing and extra["prlimit64"] <= 1,
          f"4 {NPIPES} pipes: nothing else added or left out (one prlimit64 sizes the fd table)",
          f"other extra calls {fmt(others)}, prlimit64 x{extra['prlimit64']}; "
          f"missing {fmt(missing)}")
    # Once per process, not per pipe: the same with one pipe.
    (q0, u0), (q1, u1) = r.both([prog, "pipes", "1"])
    one, _ = diff(u0.task(()), strip_loader(u1.task(()), r.lib)[0])
    check(one == extra, f"4 the calls added for 1 pipe and for {NPIPES} are the same",
          f"with 1 pipe: extra {fmt(one)}; with {NPIPES}: extra {fmt(extra)}")
    fcntl_sz = sum(1 for c in pre if c.name == "fcntl" and "F_GETPIPE_SZ" in c.args)
    sigmask = sum(1 for c in pre if c.name == "rt_sigprocmask")
    shm = sum(1 for c in pre if c.name == "shmget")
    check(not shm and not sigmask and not fcntl_sz,
          f"4 {NPIPES} pipes: no shmget, rt_sigprocmask, fcntl(F_GETPIPE_SZ)",
          f"shmget x{shm}, rt_sigprocmask x{sigmask} (plain "
          f"{sum(1 for c in plain if c.name == 'rt_sigprocmask')}), "
          f"fcntl(F_GETPIPE_SZ) x{fcntl_sz}")


def data_ok(p):
    """The helper's own verdict: the hash of what was read is the one meant."""
    m = re.search(rb"^hash (\w+) (\w+) bytes (\d+)$", p.stdout, re.M)
    return bool(p.returncode == 0 and m and m.group(1) == m.group(2)
                and int(m.group(3)) == SIZE)


def pipe_bytes(calls, inode):
    """(vmsplice bytes, write/writev bytes) into the pipe @inode, from strace -y."""
    vm = wr = 0
    for c in calls:
        if c.name not in ("vmsplice", "write", "writev") or not c.ret or c.ret < 0:
            continue
        m = FD_INODE.match(c.args)
        if m and m.group(2) == inode:
            if c.name == "vmsplice":
                vm += c.ret
            else:
                wr += c.ret
    return vm, wr


def made_pipe(calls):
    """The inode of the first pipe @calls made (strace -y)."""
    for c in calls:
        if c.name in ("pipe", "pipe2") and c.ret == 0:
            m = PIPE_PAIR.match(c.args)
            if m:
                return m.group(2)
    return None


def case_thread(r, prog):
    (p0, t0), (p1, t1) = r.both([prog, "thread"], extra=["-y"])
    ino = made_pipe(t1.task(()))
    vm, wr = pipe_bytes(t1.all_calls(), ino) if ino else (0, 0)
    check(data_ok(p0) and data_ok(p1) and vm > 0,
          "5 a pipe within one process, 8 MiB in 1 MiB writes: vmsplice on it",
          f"vmsplice {vm} B, write {wr} B into pipe:[{ino}]; data "
          f"{'intact' if data_ok(p1) else 'WRONG: ' + status(p1)}")
    shm = [c for c in t1.all_calls() if c.name == "shmget"]
    check(not shm, "5 a pipe within one process: no registry (shmget)", f"{len(shm)} shmget")

    def listing(p):
        text = re.sub(r"/proc/\d+/", "/proc/PID/", p.stdout.decode(errors="replace"))
        return [x for x in text.splitlines() if x.startswith("fd ")]
    a, b = listing(p0), listing(p1)
    check(a == b and a, "5 a pipe within one process: /proc/self/fd afterwards as plain",
          f"preloaded [{'; '.join(x[3:] for x in b)}]" +
          ("" if a == b else f", plain [{'; '.join(x[3:] for x in a)}]"))


def case_forkwrite(r, prog):
    p1, t1 = r.trace([prog, "forkwrite"], True, extra=["-y"])
    parent = t1.task(()) or []
    child = t1.task((0,)) or []
    fork_at = next((i for i, c in enumerate(parent) if c.name in CLONES), len(parent))
    before = sum(1 for c in parent[:fork_at] if c.name == "shmget")
    total = sum(1 for c in t1.all_calls() if c.name == "shmget")
    check(before == 1 and total == 1,
          "6 a pipe across a fork: one shmget (the registry), in the parent before "
          "the fork", f"{before} before the fork, {total} in the whole trace")
    ino = made_pipe(parent)
    vm, wr = pipe_bytes(child, ino) if ino else (0, 0)
    share = 100.0 * vm / (vm + wr) if vm + wr else 0.0
    check(data_ok(p1) and share >= REACH_MIN,
          "6 a pipe across a fork: the child's 1 MiB writes by vmsplice, data intact",
          f"vmsplice {vm} B, write {wr} B, {share:.1f}% by vmsplice (want >= {REACH_MIN:.0f}%)"
          f"; data {'intact' if data_ok(p1) else 'WRONG: ' + status(p1)}")


def case_trackfork(r, prog):
    (p0, t0), (p1, t1) = r.both([prog, "trackfork"])
    rows = compare_tasks(t0, t1, r.lib)
    child = [x for x in rows if x[0] == (0,)]
    ok = p0.returncode == p1.returncode == 0 and child and not child[0][1] and not child[0][2]
    check(ok, "7 a fork child of a process that tracks a pipe, _exit only: its calls as plain",
          "; ".join(f"{task_name(p)}: extra {fmt(e)}, missing {fmt(m)} ({a}/{b} calls)"
                    for p, e, m, a, b in rows) + ("" if child else " (no child seen)"))


def short(c):
    """name(first two arguments), those that are not results."""
    args = [x.strip() for x in c.args.split(")")[0].split(", ")[:2]]
    return f"{c.name}({', '.join(x for x in args if x and not x.startswith('{'))})"


def case_exec_claim(r, data):
    shell = ["sh", "-c", f"cat {data} | cat > /dev/null"]
    (p0, t0), (p1, t1) = r.both(shell)

    def second_cat(t):
        for tid, calls in t.calls.items():
            tail = from_execve(calls, '["cat"]')
            if tail is not None:
                pre = upto_execve(calls)
                upto = next((i for i, c in enumerate(tail)
                             if c.name == "read" and re.match(r"0\b", c.args)), len(tail))
                return pre, tail[:upto], tail[upto:]
        return None, None, None
    a_pre, a, a_rest = second_cat(t0)
    b_pre, b_raw, b_rest = second_cat(t1)
    if a is None or b_raw is None:
        check(False, "8 the second cat of sh -c 'cat FILE | cat': start-up calls",
              f"no second cat in the trace: plain {status(p0)}, preloaded {status(p1)}")
        return
    b, taken = strip_loader(b_raw, r.lib)
    extra, missing = diff(a, b)
    over = collections.Counter({n: k - CLAIM_ALLOWED.get(n, 0) for n, k in extra.items()
                                if k > CLAIM_ALLOWED.get(n, 0)})
    details = []
    for c in b:
        if c.name == "openat" and re.search(r'"/proc/self/(fd|stat)', c.args):
            details.append("openat " + c.args.split(",")[1].strip())
        if c.name in ("getdents64", "prlimit64") and extra[c.name]:
            details.append(c.name)
    ok = (p0.returncode == p1.returncode == 0 and taken > 0 and not over and not missing
          and not details)
    # The added calls themselves, where the name tells: those plain cat never
    # makes, and shared mappings (cat maps its locale files privately).
    plain_names = names(a)
    plain_shared = {short(c) for c in a if c.name == "mmap"}
    listed = [short(c) for c in b if extra[c.name] and (
        c.name not in plain_names or ("MAP_SHARED" in c.args and short(c) not in plain_shared))]
    check(ok, "8 the second cat of sh -c 'cat FILE | cat': start-up calls besides the loader's",
          f"extra {fmt(extra)}; beyond the allowance {fmt(over)}; missing {fmt(missing)}; "
          f"loader's {taken} taken out; of the extra names, in order: "
          f"{' '.join(listed) or 'none'}" + (f"; {', '.join(details)}" if details else ""))
    # What the shell's child adds before it execs cat (charging the pipe end), and
    # what cat adds afterwards besides its reads and writes: measured, not judged.
    e_pre, m_pre = diff(a_pre or [], b_pre or [])
    rest_a = [c for c in a_rest if c.name not in ("read", "write")]
    rest_b = [c for c in b_rest if c.name not in ("read", "write")]
    e_rest, m_rest = diff(rest_a, rest_b)
    print(f"     (sh's child before the execve: extra {fmt(e_pre)}, missing {fmt(m_pre)}; "
          f"cat after its first read, reads and writes left out: extra {fmt(e_rest)}, "
          f"missing {fmt(m_rest)})", flush=True)


# -------------------------------------------------------------------- main


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    lib, prog = (os.path.abspath(a) for a in sys.argv[1:3])
    if not shutil.which("strace"):
        print("SKIP: strace is not installed")
        return 77
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    try:
        with open("/etc/ld.so.preload") as f:
            if "ppipe" in f.read():
                print("SKIP: /etc/ld.so.preload names libppipe: no plain run here")
                return 77
    except OSError:
        pass
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ppipe-idle.") as work:
        p = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "/bin/true"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT)
        if p.returncode != 0:
            print(f"SKIP: strace cannot trace here: {p.stderr.decode(errors='replace')[:300]}")
            return 77
        p = subprocess.run(["/bin/true"], env=dict(env, LD_PRELOAD=lib),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT)
        if p.returncode != 0 or p.stderr:
            print(f"SKIP: the library cannot be preloaded into /bin/true: "
                  f"{p.stderr.decode(errors='replace')[:300]}")
            return 77
        data = os.path.join(work, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(SIZE))
        r = Runner(lib, env, work)
        for case in (case_start, case_fork, case_exec, case_pipes, case_thread,
                     case_forkwrite, case_trackfork):
            case(r, prog)
        case_exec_claim(r, data)
    print(f"{len(FAILED)} check(s) failed; {time.monotonic() - t_start:.1f} s", flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
