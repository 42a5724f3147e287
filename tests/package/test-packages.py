#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Debian packages, built from the tree, installed, used and purged.

On this machine, as root:

  1. copies the source tree (git's files, committed or not, without build
     directories) to a temporary directory and runs
     dpkg-buildpackage -us -uc -b there: libppipe0, libppipe-dev and
     ppipe-tools of VERSION must come out, each with what it must hold
     (the library alone; the header, link and pkg-config file; the tools,
     their helpers out of PATH, the metrics units), and lintian must report
     no error;
  2. installs libppipe0 alone with apt-get: no /etc/ld.so.preload line, no
     environment, and a new process does not load it;
  3. installs libppipe-dev and ppipe-tools, and from the installed paths:
     - ppipe-run -s sh -c 'dd if=/dev/zero bs=1M count=64 | cat > /dev/null'
       must sum up at least 90% of 64 MiB accelerated;
     - examples/span-stream.c, built with the flags of
       pkg-config --cflags --libs libppipe, must link libppipe.so.0 by its
       version node and stream 64 MiB through spans committed in place;
     - the metrics timer must be installed disabled; it is enabled, and its
       service run once: by systemctl where systemd runs as PID 1, else (a
       container) by running the unit's ExecStart command line as the unit
       gives it, after checking its conditions. The metrics it writes must
       parse and count the counters a preloaded pipeline added;
  4. purges the packages: every file dpkg -L listed is gone, their own
     directories too, dpkg knows nothing of them, and no ld.so.preload
     line, systemd symlink or deb-systemd-helper state is left.

Skips (77) without root, dpkg-buildpackage, debhelper, lintian or
apt-get, and where the packages are installed already or /var/lib/ppipe
exists (a host where libppipe is deployed is not a test bench).

usage: test-packages.py SOURCE_ROOT VERSION
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
PACKAGES = ("libppipe0", "libppipe-dev", "ppipe-tools")
TOOLS = ("ppipe-run", "ppipe-stats-sum", "ppipe-compare", "ppipe-bench", "ppipe-soak",
         "ppipe-reach")
COUNTERS = "/var/lib/ppipe"
UNIT_DIR = "/lib/systemd/system"
failed = []


def check(ok, what, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failed.append(what)
    return ok


def run(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(argv, **kw)


def clean_env():
    """The environment of a fresh login: none of libppipe's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PPIPE_", "LD_", "LIBPPIPE_"))}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def installed(pkg):
    p = run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", pkg])
    return p.returncode == 0 and p.stdout.strip() not in ("", "un")


def copy_tree(root, dest):
    """The tree's sources: git's files (committed or not), else all but builds."""
    p = run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"])
    if p.returncode == 0 and p.stdout:
        names = [n for n in p.stdout.split("\0") if n]
    else:
        names = []
        for top, dirs, files in os.walk(root):
            rel = os.path.relpath(top, root)
            dirs[:] = [d for d in dirs if not (rel == "." and (d.startswith(("build", "obj-"))
                                                               or d == ".git"))]
            names += [os.path.normpath(os.path.join(rel, f)) for f in files]
    for n in names:
        src = os.path.join(root, n)
        if not os.path.lexists(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.join(dest, os.path.dirname(n)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, n), follow_symlinks=False)


def deb_files(deb):
    out = run(["dpkg-deb", "-c", deb], check=True).stdout
    return [re.sub(r" -> .*", "", l.split(None, 5)[5])[1:] for l in out.splitlines()]


def build(root, version, work):
    src = os.path.join(work, "libppipe")
    copy_tree(root, src)
    env = dict(os.environ, DEB_BUILD_OPTIONS=f"parallel={os.cpu_count() or 1}")
    p = run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env)
    if not check(p.returncode == 0, "dpkg-buildpackage -us -uc -b builds",
                 "\n" + "\n".join((p.stdout + p.stderr).splitlines()[-40:])):
        return None
    arch = run(["dpkg", "--print-architecture"], check=True).stdout.strip()
    debs = {pkg: os.path.join(work, f"{pkg}_{version}_{arch}.deb") for pkg in PACKAGES}
    missing = [os.path.basename(d) for d in debs.values() if not os.path.exists(d)]
    if not check(not missing, f"the three packages of version {version}",
                 f"missing {missing}; built: {sorted(os.listdir(work))}"):
        return None

    files = {pkg: deb_files(deb) for pkg, deb in debs.items()}
    lib = [f for f in files["libppipe0"] if not f.startswith("/usr/share/doc/")
           and not f.endswith("/")]
    check(sorted(os.path.basename(f) for f in lib) == ["libppipe.so.0", f"libppipe.so.{version}"],
          "libppipe0 holds the library alone, libppipe.so.0 and its full version", str(lib))
    dev = files["libppipe-dev"]
    check(all(any(f.endswith(e) for f in dev) for e in
              ("/usr/include/ppipe.h", "/libppipe.so", "/pkgconfig/libppipe.pc",
               "/man3/ppipe_span_get.3.gz")),
          "libppipe-dev holds ppipe.h, libppipe.so, libppipe.pc and the section 3 pages")
    tools = files["ppipe-tools"]
    in_bin = sorted(os.path.basename(f) for f in tools if f.startswith("/usr/bin/")
                    and not f.endswith("/"))
    check(in_bin == sorted(TOOLS), "ppipe-tools puts the six tools in PATH, no helper",
          str(in_bin))
    check(all(any(f.endswith(e) for f in tools) for e in
              ("/usr/libexec/libppipe/ppipe-stage", "/usr/libexec/libppipe/ppipe-overhead",
               "/usr/libexec/libppipe/ppipe-soak-helper", "/usr/libexec/libppipe/ppipe-metrics",
               f"{UNIT_DIR}/ppipe-metrics.service", f"{UNIT_DIR}/ppipe-metrics.timer",
               "/man7/libppipe.7.gz", "/man1/ppipe-run.1.gz", "/man1/ppipe-compare.1.gz")),
          "ppipe-tools holds the helpers in /usr/libexec/libppipe, the units and the pages")

    changes = glob.glob(os.path.join(work, f"libppipe_{version}_*.changes"))
    p = run(["lintian", "--allow-root", "--display-info", "--show-overrides"] + changes)
    out = (p.stdout + p.stderr).strip()
    print("lintian:\n" + "\n".join("    " + l for l in out.splitlines()))
    errors = [l for l in out.splitlines() if l.startswith("E:")]
    check(changes and not errors, "lintian reports no error", "; ".join(errors))
    return debs


def apt_install(*debs):
    p = run(["apt-get", "install", "-y", "--no-install-recommends", *debs],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return check(p.returncode == 0, f"apt-get install {' '.join(map(os.path.basename, debs))}",
                 p.stdout[-2000:] + p.stderr[-2000:])


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def size_of(text):
    """Bytes of '64.0 MiB', '512 KiB', '10 B'."""
    m = re.fullmatch(r"([0-9.]+) (B|KiB|MiB|GiB|TiB)", text)
    return float(m.group(1)) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(m.group(2))


def use_ppipe_run(env):
    cmd = ["/usr/bin/ppipe-run", "-s", "sh", "-c",
           "dd if=/dev/zero bs=1M count=64 | cat > /dev/null"]
    p = run(cmd, env=env, timeout=120)
    m = re.search(r"libppipe: (\d+) processes, ([0-9.]+ \w+) accelerated \(([0-9.]+)%\)",
                  p.stderr)
    print(f"      {' '.join(shlex.quote(c) for c in cmd)}:\n      "
          + (m.group(0) if m else p.stderr.strip().replace("\n", "\n      ")))
    check(p.returncode == 0 and m and size_of(m.group(2)) >= 0.9 * (64 << 20)
          and float(m.group(3)) >= 90,
          "the installed ppipe-run sums up 64 MiB, at least 90% accelerated", p.stderr[-800:])


def use_dev_package(root, work, env):
    cc = shutil.which("cc") or shutil.which("gcc")
    p = run(["pkg-config", "--cflags", "--libs", "libppipe"], env=env)
    flags = shlex.split(p.stdout)
    check(p.returncode == 0 and "-lppipe" in flags and "-DPPIPE_LINKED" in flags,
          "pkg-config --cflags --libs libppipe", p.stdout + p.stderr)
    exe = os.path.join(work, "span-stream")
    p = run([cc, "-O2", "-o", exe, os.path.join(root, "examples", "span-stream.c")] + flags,
            env=env)
    if not check(p.returncode == 0, "examples/span-stream.c builds against libppipe-dev",
                 p.stderr):
        return
    dyn = run(["readelf", "-W", "-d", "-V", exe]).stdout
    check("Shared library: [libppipe.so.0]" in dyn and "LIBPPIPE_0.1" in dyn,
          "it needs libppipe.so.0 and the version node LIBPPIPE_0.1")
    p = run(["ldd", exe], env=env)
    m = re.search(r"libppipe\.so\.0 => (\S+)", p.stdout)
    lib = glob.glob("/usr/lib/*/libppipe.so.0")
    check(m and lib and os.path.realpath(m.group(1)) == os.path.realpath(lib[0]),
          "ldd finds the installed libppipe.so.0", p.stdout)
    p = run([exe, "pipeline", "-n", "64M"], env=dict(env, PPIPE_STATS="1"), timeout=120)
    reports = [json.loads(l) for l in p.stderr.splitlines() if l.startswith("{")]
    spans = sum(r.get("totals", {}).get("span_commits", 0) for r in reports)
    accel = sum(r.get("totals", {}).get("bytes_accelerated", 0) for r in reports)
    lines = [l for l in p.stderr.splitlines() if l.startswith("span-stream")]
    print("      " + "\n      ".join(lines))
    check(p.returncode == 0 and "stream ok" in p.stderr and "(linked)" in p.stderr,
          "span-stream pipeline -n 64M: the linked libppipe answers, every byte arrives",
          p.stderr[-800:])
    check(spans > 0 and accel >= 64 << 20,
          f"its spans went in place: {spans} span commits, {accel} bytes accelerated")


def unit_exec_start(path):
    """The unit's ExecStart command line, as systemd would split it."""
    for line in read(path).splitlines():
        if line.startswith("ExecStart="):
            # systemd's specifiers and $$ are not used by this unit: check.
            cmd = line.split("=", 1)[1]
            if "%" in cmd or "$" in cmd:
                raise ValueError(f"ExecStart uses specifiers or variables: {cmd}")
            return shlex.split(cmd)
    raise ValueError(f"{path}: no ExecStart=")


def use_metrics(env, made):
    service = f"{UNIT_DIR}/ppipe-metrics.service"
    timer = f"{UNIT_DIR}/ppipe-metrics.timer"
    p = run(["systemctl", "is-enabled", "ppipe-metrics.timer"])
    check(p.stdout.strip() == "disabled", "ppipe-metrics.timer is installed disabled",
          p.stdout + p.stderr)
    if shutil.which("systemd-analyze"):
        p = run(["systemd-analyze", "verify", service, timer])
        check(p.returncode == 0, "systemd-analyze verify: the units are sound", p.stderr)

    # What the timer needs: the counters directory, the collector's, and a
    # process that added to the counters.
    prom_dir = "/var/lib/prometheus/node-exporter"
    for d, mode in ((COUNTERS, 0o1777), (prom_dir, 0o755)):
        top = d
        while not os.path.exists(os.path.dirname(top)):
            top = os.path.dirname(top)
        if not os.path.exists(d):
            os.makedirs(d)
            os.chmod(d, mode)
            made.append(top)  # the first directory made, removed at the end
    p = run(["/usr/bin/ppipe-run", "sh", "-c", "dd if=/dev/zero bs=1M count=64 status=none | cat"
             " > /dev/null"], env=dict(env, PPIPE_COUNTERS=f"{COUNTERS}/counters-%u"))
    check(p.returncode == 0 and os.path.exists(f"{COUNTERS}/counters-{os.geteuid()}"),
          "a preloaded pipeline with PPIPE_COUNTERS adds to the host counters", p.stderr)

    p = run(["systemctl", "enable", "ppipe-metrics.timer"])
    check(p.returncode == 0 and os.path.islink(
        "/etc/systemd/system/timers.target.wants/ppipe-metrics.timer"),
        "systemctl enable ppipe-metrics.timer", p.stdout + p.stderr)
    prom = os.path.join(prom_dir, "ppipe.prom")
    if os.path.isdir("/run/systemd/system"):
        p = run(["systemctl", "start", "ppipe-metrics.service"], timeout=120)
        how = "systemctl start ppipe-metrics.service"
    else:
        # No systemd as PID 1 (a container): the unit's command line as it
        # gives it, once its conditions hold.
        conds = re.findall(r"^ConditionPathIsDirectory=(\S+)", read(service), re.M)
        check(conds and all(os.path.isdir(c) for c in conds),
              f"the service's conditions hold ({', '.join(conds)})")
        argv = unit_exec_start(service)
        how = "systemd is not PID 1: the unit's ExecStart, " + " ".join(argv)
        p = run(argv, env=clean_env(), timeout=120)
    text = read(prom) or ""
    print(f"      {how}: exit status {p.returncode}, {prom}: {len(text)} bytes")
    check(p.returncode == 0 and text, "the metrics service writes its file", p.stderr)
    values = {}
    try:
        from prometheus_client.parser import text_string_to_metric_families
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                values[(s.name, s.labels.get("uid"))] = s.value
        how = "prometheus_client's parser"
    except ImportError:
        for m in re.finditer(r'^(\w+)(?:\{uid="(\d+)"\})? (\S+)$', text, re.M):
            values[(m.group(1), m.group(2))] = float(m.group(3))
        how = "a regular expression (no prometheus_client)"
    got = values.get(("ppipe_accelerated_bytes_total", str(os.geteuid())), 0)
    # The bar of the ppipe-run check above: dd's first write may go out before
    # cat, its reader, has started libppipe, and stays plain then.
    check(got >= 0.9 * (64 << 20), f"the metrics parse ({how}): ppipe_accelerated_bytes_total"
          f"{{uid=\"{os.geteuid()}\"}} {got:.0f}, at least 90% of the pipeline's 64 MiB")
    st = os.stat(prom) if text else None
    check(st and st.st_mode & 0o777 == 0o644, "the metrics file is 0644")
    left = [n for n in os.listdir(prom_dir) if n.startswith("ppipe.prom.")]
    check(not left, "no temporary file is left beside it", str(left))
    if not any(prom_dir.startswith(d) for d in made) and os.path.exists(prom):
        os.unlink(prom)


def leftovers(listed):
    """What of the packages' files is still on disk, and what else remains."""
    left = [f for f in listed if not f.endswith("/") and os.path.lexists(f)
            and not os.path.isdir(f)]
    for d in ("/usr/libexec/libppipe", *glob.glob("/usr/lib/*/libppipe"),
              *(f"/usr/share/doc/{p}" for p in PACKAGES)):
        if os.path.lexists(d):
            left.append(d)
    left += [p for p in PACKAGES if installed(p)]
    left += glob.glob("/etc/systemd/system/*/ppipe-metrics*")
    left += glob.glob("/var/lib/systemd/deb-systemd-helper-enabled/**/*ppipe*", recursive=True)
    if "libppipe" in (read("/etc/ld.so.preload") or ""):
        left.append("/etc/ld.so.preload names libppipe")
    if "libppipe" in run(["ldconfig", "-p"]).stdout:
        left.append("ldconfig's cache names libppipe")
    return left


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    root, version = os.path.abspath(argv[1]), argv[2]
    if os.geteuid() != 0:
        print("SKIP: installing packages needs root")
        return SKIP
    need = ("dpkg-buildpackage", "dh", "lintian", "apt-get", "dpkg-deb", "pkg-config")
    missing = [t for t in need if not shutil.which(t)]
    if missing:
        print(f"SKIP: no {', '.join(missing)} (Debian: apt-get install dpkg-dev debhelper "
              f"lintian)")
        return SKIP
    there = [p for p in PACKAGES if installed(p)]
    if there or os.path.exists(COUNTERS):
        print(f"SKIP: libppipe is deployed here ({', '.join(there) or COUNTERS}): not touching it")
        return SKIP
    p = run(["dpkg-checkbuilddeps", os.path.join(root, "debian", "control")], cwd=root)
    if p.returncode:
        print(f"FAIL: build dependencies missing: {p.stderr.strip()}")
        return 1

    preload_before = read("/etc/ld.so.preload")
    environment_before = read("/etc/environment")
    made = []
    with tempfile.TemporaryDirectory(prefix="ppipe-pkg.") as work:
        debs = build(root, version, work)
        if debs is None:
            print(f"FAIL: {len(failed)} check(s) failed")
            return 1
        listed = []
        try:
            if apt_install(debs["libppipe0"]):
                check(read("/etc/ld.so.preload") == preload_before
                      and read("/etc/environment") == environment_before,
                      "installing libppipe0 adds no /etc/ld.so.preload line and no environment")
                p = run(["sh", "-c", "cat /proc/self/maps"], env=clean_env())
                check("libppipe" not in p.stdout, "a new process does not load libppipe")
            if apt_install(debs["libppipe-dev"], debs["ppipe-tools"]):
                for pkg in PACKAGES:
                    listed += run(["dpkg", "-L", pkg]).stdout.splitlines()
                print(f"      dpkg -L: {len(listed)} paths, of which "
                      f"{sum(1 for f in listed if not os.path.isdir(f))} files and links")
                env = clean_env()
                use_ppipe_run(env)
                use_dev_package(root, work, env)
                use_metrics(env, made)
        finally:
            p = run(["apt-get", "purge", "-y", *PACKAGES],
                    env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            check(p.returncode == 0, "apt-get purge " + " ".join(PACKAGES), p.stderr)
            for d in reversed(made):
                shutil.rmtree(d, ignore_errors=True)
    left = leftovers(listed)
    check(listed and not left, f"after the purge nothing of the {len(listed)} paths dpkg "
          f"listed is left, nor state, units or preload lines", "; ".join(left))
    check(read("/etc/ld.so.preload") == preload_before, "/etc/ld.so.preload is as it was")
    print(f"{'FAIL' if failed else 'PASS'}: {len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
