"""The soak's shapes: what each one runs (shell pipelines, fork, spawn,
threads, static, setuid and splicing readers, kills, exec storms,
close_range, SCM_RIGHTS), the jobs that track their processes, and the
deck they are dealt from (ppipe-soak)."""

import fcntl
import json
import os
import queue
import random
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
import traceback

from . import soak_stream
from .soak_stream import (
    DATA_SIZE, MAXFD, MAX_THREADS, MIB, PatternCheck, produce_split, read_all, relay_split,
    split_sizes, stage_stream_split, write_pattern, write_stage_stream)


def write_sizes(rng, total):
    """Mostly large writes (64 KiB to 1 MiB), some of 16 to 64 KiB, some small."""
    sizes, left = [], total
    while left > 0:
        r = rng.random()
        if r < 0.05:
            s = rng.randint(1, soak_stream.MIN_WRITE - 1)
        elif r < 0.12:
            s = rng.randint(soak_stream.MIN_WRITE, 65535)
        else:
            s = int(2 ** rng.uniform(16, 20))
        s = min(s, left)
        sizes.append(s)
        left -= s
    return sizes


def stage_size(rng):
    """ppipe-stage's -s: mostly 64 KiB to 1 MiB, some 16 and 32 KiB, a few small."""
    r = rng.random()
    if r < 0.05:
        return 4096
    if r < 0.15:
        return rng.choice((16384, 32768))
    return rng.choice((65536, 131072, 262144, 524288, 1048576))


def volume(rng):
    """Bytes one shape moves."""
    return rng.randint(4 * MIB, 20 * MIB)


def maybe_resize(rng, fd):
    """A third of the pipes get 1 MiB (rings of 2 MiB), the others the kernel's 64 KiB."""
    if rng.random() < 0.33:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, MIB)
        except OSError:
            pass


class Task:
    """A function run by a helper thread; join() returns its result or raises."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args
        self.result = self.exc = None
        self.done = threading.Event()

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # raised again in join()
            self.exc = exc
        finally:
            self.done.set()

    def join(self):
        self.done.wait()
        if self.exc:
            raise self.exc
        return self.result


class Helpers:
    """A fixed set of threads for the parts of shapes that run beside the
    job's own thread (writer threads, a reader during a storm). Started up
    front for the same reason as BufPool: a thread per task leaves stacks and
    malloc arenas behind that grow with the peak concurrency."""

    def __init__(self, count):
        self.tasks = queue.SimpleQueue()
        for _ in range(count):
            threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            self.tasks.get().run()

    def submit(self, fn, *args):
        task = Task(fn, args)
        self.tasks.put(task)
        return task


def close_all_but(keep):
    """In a child: closes every fd above 2 but those in keep, with
    close_range() (os.closerange), as Python's close_fds does."""
    lo = 3
    for fd in sorted(f for f in keep if f >= 3):
        if fd > lo:
            os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, MAXFD)


def child_say(fd, text):
    """A fork child's message, into a job file (never through sys.stderr, whose
    lock another thread may have held at the fork)."""
    try:
        os.write(fd, (text.rstrip("\n") + "\n").encode(errors="replace"))
    except OSError:
        pass


def status_text(st):
    if os.WIFSIGNALED(st):
        return f"killed by {signal.Signals(os.WTERMSIG(st)).name}"
    return f"exit status {os.waitstatus_to_exitcode(st)}"


class Job:
    """One shape's run: its processes (killed if it hangs), files, outcome."""

    def __init__(self, env, index, shape):
        self.env, self.index, self.shape = env, index, shape
        self.rng = random.Random(f"{env.seed}/{index}")
        self.variant = ""
        self.deadline = time.monotonic() + env.job_timeout
        self.lock = threading.Lock()
        self.pids = set()       # reaped by waitpid()
        self.popens = set()
        self.groups = set()     # process groups (sh pipelines)
        self.files = []
        self.timed_out = False
        self.verified = 0       # bytes the readers checked
        # Bytes written into pipes by the shape's processes that run libppipe
        # and report (they end normally), in calls below MIN_WRITE and not.
        self.small = self.large = 0
        self.killed = 0         # processes killed on purpose
        self.failures = []      # unexpected failures (other than data)
        self.data_errors = []   # (message, bytes lost)

    # processes

    def track(self, pid=None, popen=None, group=False):
        with self.lock:
            if pid:
                self.pids.add(pid)
            if popen:
                self.popens.add(popen)
                pid = popen.pid
            if group:
                self.groups.add(pid)

    def _ended(self, pid):
        """Waits until pid has ended, without reaping it, then stops tracking
        it: the watchdog never signals a pid that may have been used again."""
        while True:
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        with self.lock:
            self.pids.discard(pid)
            self.groups.discard(pid)

    @staticmethod
    def running(pid):
        """Whether pid (a child not reaped yet) still runs; it is not reaped."""
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None
        except ChildProcessError:
            return False

    def wait(self, pid):
        """waitpid(pid): its status."""
        self._ended(pid)
        while True:
            try:
                return os.waitpid(pid, 0)[1]
            except InterruptedError:
                continue

    def pwait(self, p):
        self._ended(p.pid)
        with self.lock:
            self.popens.discard(p)
        return p.wait()

    def fork(self, fn, keep=None, err=None):
        """fn() in a fork child, which first closes every fd but keep (None:
        it keeps them all, fn closes what it wants) and ends with os._exit:
        fn's return value, 0 for None, 70 for an exception (said into err)."""
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                if keep is not None:
                    close_all_but(list(keep) + ([err] if err is not None else []))
                code = fn() or 0
            except BaseException:
                if err is not None:
                    child_say(err, traceback.format_exc(limit=3))
            finally:
                os._exit(code)
        self.track(pid)
        return pid

    def popen(self, argv, group=False, **kw):
        p = subprocess.Popen(argv, start_new_session=group, **kw)
        self.track(popen=p, group=group)
        return p

    def spawn(self, path, argv, actions, **kw):
        pid = os.posix_spawn(path, argv, os.environ, file_actions=actions,
                             setsigdef=(signal.SIGPIPE,), **kw)
        self.track(pid)
        return pid

    def expire(self):
        """The job hung: kills everything it started."""
        self.timed_out = True
        self.kill_all()

    def kill_all(self):
        with self.lock:
            groups, pids = list(self.groups), list(self.pids) + [p.pid for p in self.popens]
        for g in groups:
            try:
                os.killpg(g, signal.SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def cleanup(self):
        """Reaps what is left (after an exception), closes and removes the files."""
        if self.pids or self.popens:
            self.kill_all()
            for pid in list(self.pids):
                self.wait(pid)
            for p in list(self.popens):
                self.pwait(p)
        for fd, path in self.files:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
        self.files = []

    # files for children's output

    def file(self):
        path = os.path.join(self.env.jobs_dir, f"{self.index}.{len(self.files)}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self.files.append((fd, path))
        return fd

    def text(self, fd, limit=2000):
        return os.pread(fd, limit, 0).decode(errors="replace").strip()

    # outcomes

    def wrote(self, split, times=1):
        self.small += split[0] * times
        self.large += split[1] * times

    def fail(self, what):
        self.failures.append(what)

    def lost(self, what, nbytes):
        self.data_errors.append((what, nbytes))

    def outcome(self):
        return {"index": self.index, "shape": self.shape, "variant": self.variant,
                "verified": self.verified, "killed": self.killed,
                "failures": self.failures,
                "data_errors": [m for m, _ in self.data_errors],
                "bytes_lost": sum(n for _, n in self.data_errors),
                "timed_out": self.timed_out}


def q(path):
    return shlex.quote(path)


def sh(job, cmd):
    """sh -c cmd in a session of its own: (exit status, stdout, stderr)."""
    out, err = job.file(), job.file()
    p = job.popen(["sh", "-c", cmd], group=True, stdin=subprocess.DEVNULL, stdout=out,
                  stderr=err)
    rc = job.pwait(p)
    return rc, job.text(out), job.text(err)


def consumed(out):
    """The byte count in ppipe-stage consume's JSON line, or None."""
    for line in out.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("verified") is True:
            return obj.get("bytes")
    return None


CUT_MESSAGES = ("without the producer's end marker",
                "does not end with the producer's end marker")


def judge_consumer(job, rc, out, err, nbytes, what, may_be_cut=False):
    """A ppipe-stage consume that read nbytes: exit 0 and its count, or a
    cut stream (may_be_cut). Returns True when it got all the bytes."""
    got = consumed(out) if rc == 0 else None
    if got == nbytes:
        job.verified += nbytes
        return True
    if "verification failed" in err:
        job.lost(f"{what}: {err.splitlines()[-1]}", nbytes)
    elif may_be_cut and rc == 1 and any(m in err for m in CUT_MESSAGES):
        m = re.search(r"after (\d+) bytes", err)
        job.verified += int(m.group(1)) if m else 0
    elif rc == 0:
        job.lost(f"{what}: the consumer counted {got}, {nbytes} were written", nbytes)
    else:
        job.fail(f"{what}: exit status {rc}: {err[-600:]}")
    return False


def judge_check(job, check, nbytes, what, cut_ok=False):
    complete, error = check.finish(nbytes, cut_ok)
    if error:
        job.lost(f"{what}: {error}", max(0, nbytes - check.pos))
    else:
        job.verified += check.pos
    return complete


# ------------------------------------------------------------------ shapes


def shape_sh_stage(env, job):
    """sh -c 'produce | [relay |] consume': exec'd programs on the pipes sh makes."""
    rng = job.rng
    hops = rng.choice((1, 2))
    size, nbytes = stage_size(rng), volume(rng)
    job.variant = f"{hops} hop{'s' if hops > 1 else ''}, {size} B calls"
    st = q(env.stage)
    cmd = " | ".join([f"{st} produce -s {size} -b {nbytes}"]
                     + [f"{st} relay -s {size}"] * (hops - 1) + [f"{st} consume -s {size}"])
    rc, out, err = sh(job, cmd)
    if judge_consumer(job, rc, out, err, nbytes, "sh pipeline"):
        job.wrote(produce_split(size, nbytes))
        job.wrote(relay_split(size, nbytes), hops - 1)


def shape_sh_dd(env, job):
    """sh -c 'dd | cat [| cat] | sha256sum' against the known digest."""
    rng = job.rng
    bs = rng.choice((65536, 131072, 262144, MIB))
    count = rng.randint(max(1, 4 * MIB // bs), DATA_SIZE // bs)
    cats = rng.choice((1, 2))
    job.variant = f"bs={bs}, {cats} cat"
    cmd = (f"dd if={q(env.data_path)} bs={bs} count={count} status=none"
           + " | cat" * cats + " | sha256sum")
    rc, out, err = sh(job, cmd)
    want = env.digest(bs * count)
    got = out.split()[0] if out.split() else ""
    if rc == 0 and got == want:
        job.verified += bs * count
        # dd's blocks, and each cat's writes (what it read: nearly always
        # 16 KiB or more; a shorter one is counted as large here).
        job.wrote((0, bs * count), 1 + cats)
    elif rc == 0:
        job.lost(f"dd | cat | sha256sum: sha256 {got or 'none'}, want {want}", bs * count)
    else:
        job.fail(f"dd | cat | sha256sum: exit status {rc}: {err[-600:]}")


def child_writer(env, w, sizes):
    """A fork child's body: the stage stream, without marker."""
    def run():
        _, broken = write_pattern(env, w, sizes)
        return 3 if broken else 0
    return run


def child_reader(env, r, buf, nbytes, err):
    """A fork child's body: reads and checks the stage stream (no marker)."""
    def run():
        check = PatternCheck(env, marker=False)
        while True:
            try:
                n = os.readv(r, [buf.array])
            except InterruptedError:
                continue
            if not n:
                break
            check.feed(buf, n)
        complete, error = check.finish(nbytes)
        if not complete:
            child_say(err, error or "incomplete")
            return 1
        return 0
    return run


def shape_fork(env, job):
    """os.fork: a child writes; the parent or another child reads."""
    rng = job.rng
    nbytes = volume(rng)
    sizes = write_sizes(rng, nbytes)
    two = rng.random() < 0.4
    job.variant = "child -> child" if two else "child -> parent"
    r, w = os.pipe()
    maybe_resize(rng, w)
    wpid = job.fork(child_writer(env, w, sizes), keep=[w])
    os.close(w)
    if two:
        err = job.file()
        buf = env.bufs.get()
        try:
            rpid = job.fork(child_reader(env, r, buf, nbytes, err), keep=[r], err=err)
        finally:
            env.bufs.put(buf)
        os.close(r)
        rst = job.wait(rpid)
        if rst != 0:
            msg = job.text(err)
            if os.WIFEXITED(rst) and os.WEXITSTATUS(rst) == 1:
                job.lost(f"fork reader: {msg}", nbytes)
            else:
                job.fail(f"fork reader: {status_text(rst)}: {msg}")
        else:
            job.verified += nbytes
    else:
        check = PatternCheck(env, marker=False)
        read_all(env, r, check)
        judge_check(job, check, nbytes, "fork writer -> parent")
    wst = job.wait(wpid)
    if wst != 0:
        job.fail(f"fork writer: {status_text(wst)}")
    else:
        job.wrote(split_sizes(sizes))


def produce_argv(env, size, nbytes):
    return [env.stage, "produce", "-s", str(size), "-b", str(nbytes)]


def consume_argv(env, size):
    return [env.stage, "consume", "-s", str(size)]


def shape_spawn(env, job, use_popen=False):
    """An exec'd writer or reader made by posix_spawn (or subprocess.Popen,
    which vforks), this process at the other end."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    writer = rng.random() < 0.5
    how = "subprocess" if use_popen else "posix_spawn"
    job.variant = f"{how} {'writer' if writer else 'reader'}, {size} B calls"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    if writer:
        argv = produce_argv(env, size, nbytes)
        if use_popen:
            p = job.popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=err)
        else:
            pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                            (os.POSIX_SPAWN_DUP2, w, 1),
                                            (os.POSIX_SPAWN_DUP2, err, 2)])
        os.close(w)
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.pwait(p) if use_popen else os.waitstatus_to_exitcode(job.wait(pid))
        if st != 0:
            job.fail(f"{how} ppipe-stage produce: exit status {st}: {job.text(err)}")
        elif judge_check(job, check, nbytes, f"{how} writer -> this process"):
            job.wrote(produce_split(size, nbytes))
    else:
        argv = consume_argv(env, size)
        if use_popen:
            p = job.popen(argv, stdin=r, stdout=out, stderr=err)
        else:
            pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_DUP2, r, 0),
                                            (os.POSIX_SPAWN_DUP2, out, 1),
                                            (os.POSIX_SPAWN_DUP2, err, 2)])
        os.close(r)
        sizes = write_sizes(rng, nbytes)
        _, broken = write_stage_stream(env, w, sizes)
        st = job.pwait(p) if use_popen else os.waitstatus_to_exitcode(job.wait(pid))
        if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                          f"this process -> {how} reader") and not broken:
            job.wrote(stage_stream_split(sizes))


def shape_popen(env, job):
    shape_spawn(env, job, use_popen=True)


def thread_writer(env, w, writer, sizes):
    """Writes writer's tagged stream into w. Returns (bytes, broken)."""
    buf = env.tagbufs.get()
    pos = 0
    try:
        for size in sizes:
            env.stream.tagged(writer, pos, buf, size)
            done = 0
            while done < size:
                try:
                    done += os.write(w, buf.view[done:size])
                except InterruptedError:
                    continue
            pos += size
    except BrokenPipeError:
        return pos, True
    finally:
        env.tagbufs.put(buf)
    return pos, False


def shape_threads(env, job):
    """Threads of this process write one pipe at once, large writes
    interleaved; an exec'd checker takes the per-byte tagged streams apart."""
    rng = job.rng
    k = rng.randint(2, MAX_THREADS)
    per = volume(rng) // k
    job.variant = f"{k} threads"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    p = job.popen([env.helper, "check", str(k)], stdin=r, stdout=out, stderr=err)
    os.close(r)
    sizes = [write_sizes(rng, per) for _ in range(k)]
    try:
        threads = [env.helpers.submit(thread_writer, env, w, i, sizes[i]) for i in range(k)]
        written = [t.join()[0] for t in threads]
    finally:
        os.close(w)
    rc = job.pwait(p)
    text = job.text(out)
    got = [int(x) for x in text.split()[1:]] if text.startswith("bytes") else None
    if rc == 0 and got == written:
        job.verified += sum(written)
        for s in sizes:
            job.wrote(split_sizes(s))
    elif rc == 1 and "check:" in job.text(err):
        job.lost(f"threads -> checker: {job.text(err)}", sum(written))
    elif rc == 0:
        job.lost(f"threads -> checker: the writers wrote {written}, it got {got}", sum(written))
    else:
        job.fail(f"threads -> checker: exit status {rc}: {job.text(err)}")


def shape_reader(env, job, what, reader):
    """sh -c 'produce | READER | consume': a reader libppipe must leave plain."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    job.variant = f"{what}, {size} B calls"
    st = q(env.stage)
    rc, out, err = sh(job, f"{st} produce -s {size} -b {nbytes} | {reader} | "
                           f"{st} consume -s {size}")
    if judge_consumer(job, rc, out, err, nbytes, f"produce | {what} | consume"):
        job.wrote(produce_split(size, nbytes))


def shape_static(env, job):
    shape_reader(env, job, "static copier", q(env.static))


def shape_setuid(env, job):
    shape_reader(env, job, "setuid copier", f"{q(env.suid)} copy")


def shape_splice(env, job):
    if env.pv and job.rng.random() < 0.5:
        shape_reader(env, job, "pv -q", f"{q(env.pv)} -q")
    else:
        shape_reader(env, job, "splice reader", f"{q(env.helper)} splice")


def kill_pid(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def shape_kill(env, job):
    """A writer killed by SIGKILL in the middle of its large writes, at a
    random point of its stream: the reader must get an exact prefix."""
    rng = job.rng
    variant = rng.choice(("fork writer", "posix_spawn writer", "sh stage", "fork reader"))
    nbytes = volume(rng)
    cut = int(rng.uniform(0.05, 0.95) * nbytes)
    job.variant = variant
    if variant == "sh stage":
        return kill_sh_stage(env, job, nbytes)
    r, w = os.pipe()
    maybe_resize(rng, w)
    if variant == "fork reader":
        return kill_reader(env, job, r, w, nbytes, cut)
    err = job.file()
    size = stage_size(rng)
    if variant == "fork writer":
        sizes = write_sizes(rng, nbytes)
        pid = job.fork(child_writer(env, w, sizes), keep=[w])
    else:
        argv = produce_argv(env, size, nbytes)
        pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                        (os.POSIX_SPAWN_DUP2, w, 1),
                                        (os.POSIX_SPAWN_DUP2, err, 2)])
    os.close(w)
    fired = []

    def progress(received):
        if not fired and received >= cut:
            fired.append(received)
            kill_pid(pid)

    check = PatternCheck(env, marker=variant != "fork writer")
    read_all(env, r, check, progress)
    st = job.wait(pid)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL and fired:
        job.killed += 1
        judge_check(job, check, nbytes, f"{variant}, killed", cut_ok=True)
    elif st == 0:
        # The stream ended before the kill came: all of it, exactly.
        if judge_check(job, check, nbytes, variant):
            job.wrote(split_sizes(sizes) if variant == "fork writer"
                      else produce_split(size, nbytes))
    else:
        job.fail(f"{variant}: {status_text(st)}: {job.text(err)}")


def kill_reader(env, job, r, w, nbytes, cut):
    """The reader (a fork child) killed mid-stream: the writer (this process)
    must see EPIPE, not hang."""
    buf = env.bufs.get()
    err = job.file()
    try:
        pid = job.fork(child_reader(env, r, buf, nbytes, err), keep=[r], err=err)
    finally:
        env.bufs.put(buf)
    os.close(r)
    sizes = write_sizes(job.rng, nbytes)
    fired = []

    def progress(pos):
        if not fired and pos >= cut:
            fired.append(pos)
            kill_pid(pid)

    try:
        written, broken = write_pattern(env, w, sizes, progress)
    finally:
        os.close(w)
    # This process's writes count whatever became of the reader.
    job.wrote(split_sizes(sizes, written))
    st = job.wait(pid)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL:
        job.killed += 1
    elif st != 0:
        job.fail(f"fork reader: {status_text(st)}: {job.text(err)}")
    elif written == nbytes:
        job.verified += nbytes
    if broken and not fired:
        job.fail("this process's writes failed with EPIPE while its reader lived")


def children_of(pid):
    """The pids of pid's children."""
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        kids.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def kill_stage(sh_pid, mode):
    """SIGKILL to the child of sh_pid that runs 'ppipe-stage MODE', through a
    pidfd so that a pid used again meanwhile is never hit. True if sent."""
    for pid in children_of(sh_pid):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
            if ppid == sh_pid and len(args) > 1 and args[1] == mode.encode():
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                return True
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)
    return False


def kill_sh_stage(env, job, nbytes):
    """sh -c 'produce | relay | consume' with produce or relay killed after a
    random delay: consume must have checked every byte it got."""
    rng = job.rng
    size = stage_size(rng)
    victim = rng.choice(("produce", "relay"))
    delay = rng.uniform(0.005, 0.25)
    job.variant = f"sh stage: {victim} killed after {delay * 1000:.0f} ms"
    st = q(env.stage)
    out, err = job.file(), job.file()
    cmd = (f"{st} produce -s {size} -b {nbytes} | {st} relay -s {size} | "
           f"{st} consume -s {size}")
    p = job.popen(["sh", "-c", cmd], group=True, stdin=subprocess.DEVNULL, stdout=out,
                  stderr=err)
    deadline = time.monotonic() + delay
    sent = False
    while job.running(p.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    if job.running(p.pid):
        sent = kill_stage(p.pid, victim)
    rc = job.pwait(p)
    complete = judge_consumer(job, rc, job.text(out), job.text(err), nbytes,
                              job.variant, may_be_cut=sent)
    if complete:
        job.wrote(produce_split(size, nbytes))
        job.wrote(relay_split(size, nbytes))
    elif sent:
        job.killed += 1
        # A killed process reports nothing. With produce killed, relay ends
        # at EOF and reports what it passed on, about what consume got; with
        # relay killed, produce dies of SIGPIPE.
        m = re.search(r"after (\d+) bytes", job.text(err))
        if victim == "produce" and m:
            got = int(m.group(1))
            job.wrote((got, 0) if size < soak_stream.MIN_WRITE else (0, got))


def storm_holder(env, job, rng, r, w):
    """One short exec'd program that holds ends of the pipe: a Popen'd
    /bin/true (vfork, close_range), a posix_spawn'd one, a fork + exec'd one,
    or 'timeout -s KILL' of a sleep (SIGKILL'd while it holds them)."""
    kind = rng.choice(("popen", "spawn", "fork", "timeout"))
    fds = rng.choice(((r,), (w,), (r, w)))
    if kind == "popen":
        return kind, job.popen([env.true], pass_fds=fds, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    if kind == "timeout":
        return kind, job.popen(["timeout", "-s", "KILL", f"{rng.uniform(0.01, 0.1):.3f}",
                                "sleep", "5"], pass_fds=fds, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    if kind == "spawn":
        acts = [(os.POSIX_SPAWN_DUP2, fd, 60 + i) for i, fd in enumerate(fds)]
        return kind, job.spawn(env.true, ["true"], acts)

    def run():
        for fd in fds:
            os.set_inheritable(fd, True)
        os.execv(env.true, ["true"])
    return kind, job.fork(run, keep=fds)


def shape_storm(env, job):
    """An exec storm: while a fork child writes to this process, a burst of
    short exec'd programs inherits the pipe's ends."""
    rng = job.rng
    nbytes = volume(rng)
    sizes = write_sizes(rng, nbytes)
    n = rng.randint(8, 32)
    job.variant = f"{n} programs"
    r, w = os.pipe()
    maybe_resize(rng, w)
    wpid = job.fork(child_writer(env, w, sizes), keep=[w])
    check = PatternCheck(env, marker=False)
    reader = env.helpers.submit(read_all, env, os.dup(r), check)
    try:
        holders = [storm_holder(env, job, rng, r, w) for _ in range(n)]
        for kind, h in holders:
            if kind in ("popen", "timeout"):
                rc = job.pwait(h)
                ok = (0, 124, 137, -signal.SIGKILL) if kind == "timeout" else (0,)
                if rc not in ok:
                    job.fail(f"storm: {kind} holder: exit status {rc}")
            else:
                st = job.wait(h)
                if st != 0:
                    job.fail(f"storm: {kind} holder: {status_text(st)}")
    finally:
        os.close(w)
        os.close(r)
    reader.join()
    judge_check(job, check, nbytes, "storm: fork writer -> this process")
    st = job.wait(wpid)
    if st != 0:
        job.fail(f"storm: fork writer: {status_text(st)}")
    else:
        job.wrote(split_sizes(sizes))


def shape_closerange(env, job):
    """A fork child closes every fd above 2 with close_range() (libppipe's
    registry among them), as Python's close_fds does, and execs a reader or
    writer of the pipe."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    writer = rng.random() < 0.5
    job.variant = "exec'd writer" if writer else "exec'd reader"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    argv = produce_argv(env, size, nbytes) if writer else consume_argv(env, size)

    def run():
        if writer:
            os.dup2(w, 1)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        else:
            os.dup2(r, 0)
            os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, MAXFD)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.execv(argv[0], argv)

    pid = job.fork(run)
    if writer:
        os.close(w)
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.wait(pid)
        if st != 0:
            job.fail(f"close_range + exec produce: {status_text(st)}: {job.text(err)}")
        elif judge_check(job, check, nbytes, "close_range + exec'd writer"):
            job.wrote(produce_split(size, nbytes))
    else:
        os.close(r)
        sizes = write_sizes(rng, nbytes)
        _, broken = write_stage_stream(env, w, sizes)
        st = os.waitstatus_to_exitcode(job.wait(pid))
        if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                          "close_range + exec'd reader") and not broken:
            job.wrote(stage_stream_split(sizes))


def shape_scm(env, job):
    """A pipe end passed over a Unix socket (SCM_RIGHTS) to a fork child,
    which reads from it (itself, or by exec'ing a reader) or execs a writer
    onto it."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    variant = rng.choice(("read end, exec'd reader", "read end, forked reader",
                          "write end, exec'd writer"))
    job.variant = variant
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    buf = env.bufs.get()

    def run():
        _, fds, _, _ = socket.recv_fds(b, 16, 1)
        if variant == "read end, forked reader":
            return child_reader(env, fds[0], buf, nbytes, err)()
        if variant == "read end, exec'd reader":
            argv = consume_argv(env, size)
            os.dup2(fds[0], 0)
            os.dup2(out, 1)
        else:
            argv = produce_argv(env, size, nbytes)
            os.dup2(fds[0], 1)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(err, 2)
        os.closerange(3, MAXFD)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.execv(argv[0], argv)

    try:
        pid = job.fork(run, keep=[b.fileno(), out], err=err)
    finally:
        env.bufs.put(buf)
        b.close()
    try:
        sent = r if variant.startswith("read end") else w
        socket.send_fds(a, [b"x"], [sent])
    finally:
        a.close()
    os.close(sent)
    if variant.startswith("write end"):
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.wait(pid)
        if st != 0:
            job.fail(f"scm: exec'd writer: {status_text(st)}: {job.text(err)}")
        elif judge_check(job, check, nbytes, "scm: exec'd writer -> this process"):
            job.wrote(produce_split(size, nbytes))
        return
    sizes = write_sizes(rng, nbytes)
    if variant == "read end, forked reader":
        written, broken = write_pattern(env, w, sizes)
        os.close(w)
        st = job.wait(pid)
        if st == 0 and written == nbytes:
            job.verified += nbytes
            job.wrote(split_sizes(sizes))
        elif os.WIFEXITED(st) and os.WEXITSTATUS(st) == 1:
            job.lost(f"scm: forked reader: {job.text(err)}", nbytes)
        else:
            job.fail(f"scm: forked reader: {status_text(st)}: {job.text(err)}")
        return
    _, broken = write_stage_stream(env, w, sizes)
    st = os.waitstatus_to_exitcode(job.wait(pid))
    if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                      "scm: this process -> exec'd reader") and not broken:
        job.wrote(stage_stream_split(sizes))


# name, weight in a deck, function, what it is
SHAPES = [
    ("sh-stage", 3, shape_sh_stage, "sh -c 'produce | [relay |] consume' (ppipe-stage)"),
    ("sh-dd", 2, shape_sh_dd, "sh -c 'dd | cat | sha256sum', the digest known"),
    ("fork", 3, shape_fork, "os.fork: a child writes, the parent or another child reads"),
    ("spawn", 2, shape_spawn, "os.posix_spawn'd writer or reader, this process at the other end"),
    ("popen", 2, shape_popen, "subprocess.Popen'd (vfork) writer or reader"),
    ("threads", 2, shape_threads, "2-4 threads of this process write one pipe, per-byte tagged"),
    ("static", 1, shape_static, "produce | static copier | consume"),
    ("setuid", 1, shape_setuid, "produce | setuid copier (nobody, 4755) | consume"),
    ("splice", 1, shape_splice, "produce | pv -q or a splice() reader | consume"),
    ("kill", 3, shape_kill, "a writer (or reader) killed by SIGKILL mid-stream"),
    ("storm", 1, shape_storm, "8-32 short exec'd programs holding a busy pipe's ends"),
    ("closerange", 1, shape_closerange, "fork, close_range(3, ~0), exec a reader or writer"),
    ("scm", 1, shape_scm, "a pipe end sent over a Unix socket to a reader or writer"),
]
SHAPE_NAMES = [s[0] for s in SHAPES]
SHAPE_FN = {s[0]: s[2] for s in SHAPES}
