#!/usr/bin/env python3
"""Integrity of real programs nobody here wrote, run under a preload library.

usage: test-tools.py LIBRARY [--env K=V ...] [--expect-accel] [CASE ...]
       test-tools.py --list                   (no CASE: all of them)

Every program of a case runs with LD_PRELOAD=LIBRARY and PPIPE_MIN_WRITE=4097
(so every write above PIPE_BUF takes the library's fast path) plus any --env
K=V (which override; PPIPE_* of the caller's environment are dropped); the checksums at
the ends of the pipelines (sha256sum, cmp of files) run without it. A case
passes when every program exits 0 and the data arrives intact.

  stress-*   stress-ng stressors with --verify. stress-ng 0.15 writes at most
             4096 bytes per write() (pipe-data-size is capped at 4 KiB; fifo 8 B,
             tee 16 B), so with PPIPE_MIN_WRITE=4097 these check that the library
             leaves small writes, FIFOs and splice/tee/vmsplice users alone: they
             never take its fast path. stress-ng exits 0 even when a --verify
             check failed in some stressors (tee), so "fail:" in its output
             fails the case too.
  cat, dd, pv, tar, gzip, tee
             coreutils-style pipelines over 50 MiB of random data (pv: 20 MiB at
             20 MiB/s, a slow consumer; gzip: 16 MiB). dd of=/dev/stdout opens
             the pipe again by name, so the library sees a pipe it did not create.

--expect-accel: the library must also report (PPIPE_STATS, summed over the
processes: "totals" -> "writes_accelerated") that it accelerated some write, in
every case that makes writes above PIPE_BUF (not the stress-* ones). A library
whose file name contains "passthru" writes no stats; that is accepted with a
note. Pipes a program inherits from its shell have readers libppipe does not
know, so by default (PPIPE_READERS=verify) it passes their writes through; with
PPIPE_READERS=trust it accelerates them, which is only correct when every reader
copies what it reads: true of cat, dd, tar, gunzip and tee, not of pv, which
splices (so the pv case should not be run with trust).

Exit status: 0 all passed, 1 a case failed, 77 a needed tool is missing (with
the reason), 99 the cases could not be set up.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_ERROR = 0, 1, 77, 99
TIMEOUT = 120
EXTRA_ENV = {}
STATS = {"path": None}


class Skip(Exception):
    pass


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            raise Skip(f"{t} is not installed")


def base_env():
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}


def lib_env(lib, extra=None):
    env = base_env()
    env.update({"LD_PRELOAD": lib, "PPIPE_MIN_WRITE": "4097"})
    if STATS["path"]:
        env["PPIPE_STATS"] = STATS["path"]
    env.update(extra or {})
    env.update(EXTRA_ENV)
    return env


def accelerated(path):
    """Sum of totals.writes_accelerated over the per-process lines, or None without a file."""
    if not os.path.exists(path):
        return None
    total = 0
    with open(path) as f:
        for ln in f:
            if ln.strip():
                total += int(json.loads(ln)["totals"]["writes_accelerated"])
    return total


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def random_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n


def pipeline(stages, stdout=subprocess.PIPE):
    """Runs [(argv, env), ...] connected by pipes; returns (last stdout, [(argv, rc, err)])."""
    procs = []
    prev = subprocess.DEVNULL
    for i, (argv, env) in enumerate(stages):
        last = i == len(stages) - 1
        p = subprocess.Popen(argv, env=env, stdin=prev,
                             stdout=stdout if last else subprocess.PIPE,
                             stderr=subprocess.PIPE)
        if prev is not subprocess.DEVNULL:
            prev.close()
        prev = p.stdout
        procs.append(p)
    out, err = procs[-1].communicate(timeout=TIMEOUT)
    results = []
    for (argv, _), p in zip(stages, procs):
        if p is procs[-1]:
            results.append((argv, p.returncode, err.decode(errors="replace")))
            continue
        try:
            _, perr = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            _, perr = p.communicate()
        results.append((argv, p.returncode, perr.decode(errors="replace")))
    return out, results


def check_rcs(results):
    bad = [f"{' '.join(a)}: exit {rc}: {e.strip()[-300:]}" for a, rc, e in results if rc != 0]
    if bad:
        raise AssertionError("; ".join(bad))


def expect_sha(out, want, what):
    got = out.decode().split()[0] if out else "(nothing)"
    if got != want:
        raise AssertionError(f"{what}: sha256 {got} != {want}")


def stress(lib, args, extra_env=None):
    need("stress-ng")
    # --verify makes the stressor check its data; exit 0 only if all went well.
    argv = ["stress-ng"] + args + ["--verify", "--timeout", "60", "--metrics-brief"]
    p = subprocess.run(argv, env=lib_env(lib, extra_env), capture_output=True, text=True,
                       timeout=TIMEOUT)
    out = p.stdout + p.stderr
    if "unrecognized option" in out or "invalid option" in out:
        raise Skip(f"this stress-ng does not know {args[0]}: {out.strip().splitlines()[0]}")
    if p.returncode != 0 or "fail:" in out:
        raise AssertionError(f"{' '.join(argv)}: exit {p.returncode}\n{out.strip()[-1500:]}")


def case_stress_pipe(lib, _work):
    stress(lib, ["--pipe", "2", "--pipe-ops", "20000"])


def case_stress_fifo(lib, _work):
    stress(lib, ["--fifo", "2", "--fifo-ops", "20000", "--fifo-readers", "2"])


def case_stress_splice(lib, _work):
    stress(lib, ["--splice", "1", "--splice-ops", "2000"])


def case_stress_tee(lib, _work):
    stress(lib, ["--tee", "1", "--tee-ops", "2000"])


def case_stress_vm_splice(lib, _work):
    stress(lib, ["--vm-splice", "1", "--vm-splice-ops", "2000"])


def data_file(work, size=50 << 20, name="f"):
    path = os.path.join(work, name)
    random_file(path, size)
    return path, sha256_file(path)


def case_cat(lib, work):
    need("cat", "sha256sum")
    f, want = data_file(work)
    env = lib_env(lib)
    out, res = pipeline([(["cat", f], env), (["cat"], env), (["sha256sum"], base_env())])
    check_rcs(res)
    expect_sha(out, want, "cat f | cat")


def case_dd(lib, work):
    need("dd", "sha256sum")
    f, want = data_file(work)
    env = lib_env(lib)
    out, res = pipeline([(["dd", f"if={f}", "bs=1M", "status=none"], env),
                         (["dd", "bs=64k", "of=/dev/stdout", "status=none"], env),
                         (["sha256sum"], base_env())])
    check_rcs(res)
    expect_sha(out, want, "dd bs=1M | dd bs=64k of=/dev/stdout")


def case_pv(lib, work):
    need("cat", "pv", "sha256sum")
    f, want = data_file(work, 20 << 20)
    env = lib_env(lib)
    out, res = pipeline([(["cat", f], env), (["pv", "-q", "-L", "20m"], base_env()),
                         (["sha256sum"], base_env())])
    check_rcs(res)
    expect_sha(out, want, "cat f | pv -L 20m")


def case_tar(lib, work):
    need("tar")
    src = os.path.join(work, "src")
    dst = os.path.join(work, "dst")
    os.makedirs(os.path.join(src, "sub"))
    os.makedirs(dst)
    sizes = [0, 1, 4095, 4096, 4097, 65535, 65537, (1 << 20) + 3, 10 << 20, 25 << 20]
    want = {}
    for i, n in enumerate(sizes):
        rel = os.path.join("sub" if i % 2 else "", f"file{i}")
        random_file(os.path.join(src, rel), n)
        want[rel] = sha256_file(os.path.join(src, rel))
    env = lib_env(lib)
    _, res = pipeline([(["tar", "-C", src, "-cf", "-", "."], env),
                       (["tar", "-C", dst, "-xf", "-"], env)], stdout=subprocess.DEVNULL)
    check_rcs(res)
    for rel, h in want.items():
        path = os.path.join(dst, rel)
        if not os.path.exists(path) or sha256_file(path) != h:
            raise AssertionError(f"tar c | tar x: {rel} differs")


def case_gzip(lib, work):
    need("gzip", "gunzip", "sha256sum")
    f, want = data_file(work, 16 << 20)
    env = lib_env(lib)
    out, res = pipeline([(["gzip", "-1", "-c", f], env), (["gunzip", "-c"], env),
                         (["sha256sum"], base_env())])
    check_rcs(res)
    expect_sha(out, want, "gzip -c f | gunzip")


def case_tee(lib, work):
    need("cat", "tee", "sha256sum")
    f, want = data_file(work)
    copy = os.path.join(work, "copy")
    env = lib_env(lib)
    out, res = pipeline([(["cat", f], env), (["tee", copy], env), (["sha256sum"], base_env())])
    check_rcs(res)
    expect_sha(out, want, "cat f | tee copy")
    if sha256_file(copy) != want:
        raise AssertionError("tee's file copy differs")


CASES = {
    "stress-pipe": case_stress_pipe,
    "stress-fifo": case_stress_fifo,
    "stress-splice": case_stress_splice,
    "stress-tee": case_stress_tee,
    "stress-vm-splice": case_stress_vm_splice,
    "cat": case_cat,
    "dd": case_dd,
    "pv": case_pv,
    "tar": case_tar,
    "gzip": case_gzip,
    "tee": case_tee,
}


def main(argv):
    if argv and argv[0] == "--list":
        print("\n".join(CASES))
        return EXIT_PASS
    if not argv:
        print(__doc__)
        return EXIT_ERROR
    lib = os.path.abspath(argv[0])
    rest = argv[1:]
    names = []
    expect_accel = False
    while rest:
        a = rest.pop(0)
        if a == "--env" and rest and "=" in rest[0]:
            k, v = rest.pop(0).split("=", 1)
            EXTRA_ENV[k] = v
        elif a == "--expect-accel":
            expect_accel = True
        else:
            names.append(a)
    names = names or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(CASES)}")
        return EXIT_ERROR
    if not os.path.isfile(lib):
        print(f"ERROR: library {lib} does not exist")
        return EXIT_ERROR
    failed = skipped = 0
    for name in names:
        work = tempfile.mkdtemp(prefix=f"ppipe-tools-{name}-")
        STATS["path"] = os.path.join(work, "ppipe-stats.jsonl")
        try:
            CASES[name](lib, work)
            note = ""
            if expect_accel and not name.startswith("stress-"):
                n = accelerated(STATS["path"])
                if n is None and "passthru" in os.path.basename(lib):
                    note = " (no PPIPE_STATS file from the pass-through library)"
                elif not n:
                    raise AssertionError("the data arrived, but the library accelerated no write "
                                         f"(writes_accelerated={n or 0})")
                else:
                    note = f" (writes_accelerated={n})"
            print(f"PASS {name}{note}")
        except Skip as e:
            print(f"SKIP {name}: {e}")
            skipped += 1
        except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
            print(f"FAIL {name}: {e}")
            failed += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        return EXIT_FAIL
    if skipped == len(names):
        return EXIT_SKIP
    return EXIT_PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
