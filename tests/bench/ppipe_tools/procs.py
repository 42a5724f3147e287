"""Running the programs a matrix measures: each command in a process group
of its own, ended whole on a time out or an interrupt, with its wall and
CPU time (ppipe-compare)."""

import json
import os
import resource
import signal
import subprocess
import time


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where it arrives while the run's data
    exists, so that the data is removed as after an interrupt."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def raise_signalled(signum, _frame):
    """Signal handler: raise Signalled."""
    raise Signalled(signum)


def end_group(proc, sig):
    """Send sig to the process group of proc (which leads it)."""
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass


def run_command(cmd, env, timeout, cwd=None):
    """Run a command (in cwd, if given); return (exit status, stdout,
    stderr); the status is None when it could not start or did not end in
    time. The command leads a process group of its own, so that a time out
    ends all its processes (every stage of a pipeline), not only the first;
    an interrupt is passed on to the group as the terminal would."""
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, cwd=cwd)
    except OSError as exc:
        return None, None, str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_group(proc, signal.SIGKILL)
        proc.communicate()
        return None, "", f"no result after {timeout:.0f} s"
    except BaseException:
        end_group(proc, signal.SIGINT)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            end_group(proc, signal.SIGKILL)
            proc.wait()
        raise
    return proc.returncode, out, err


def run_bench(cmd, env, timeout):
    """Run ppipe-bench or a pipeline; return (exit status, parsed JSON or
    None, stderr)."""
    status, out, err = run_command(cmd, env, timeout)
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    return status, data, err


def run_measured(cmd, env, timeout, cwd=None):
    """Run a command as run_command does; return its (exit status, stdout,
    stderr) and what it took: the wall time from its start to its end, and
    the CPU time of it and of every process below it that was waited for
    (the kernel's count of this process's children, RUSAGE_CHILDREN, before
    and after: nothing else is reaped meanwhile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    status, out, err = run_command(cmd, env, timeout, cwd)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return status, out, err, {"wall_s": wall,
                              "user_s": after.ru_utime - before.ru_utime,
                              "sys_s": after.ru_stime - before.ru_stime}
