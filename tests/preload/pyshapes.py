"""Python programs the preload tests run as pipeline stages (python3 -c TEXT FILE).

Shared by test-reach.py, test-system-preload.py and test-faults.py, which
import this module from their own directory. Each program reads FILE
(sys.argv[1]) and prints the sha256 of what went through its pipe.
"""
import hashlib


def sha256_file(path):
    """The sha256 of a file, as the programs below print it."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Helpers the programs below start with.
_HELPERS = """
import hashlib, os, subprocess, sys

def write_file(fd, path):
    # Writes the file into fd in 1 MiB writes, each completed.
    with open(path, "rb") as f:
        while True:
            d = f.read(1 << 20)
            if not d:
                return
            v = memoryview(d)
            while v:
                v = v[os.write(fd, v):]

def hash_fd(fd):
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return h.hexdigest()
        h.update(b)
"""

# A child (cat) writes into a pipe the parent reads (subprocess.run).
READ_CHILD = _HELPERS + """
r = subprocess.run(["cat", sys.argv[1]], stdout=subprocess.PIPE, check=True)
print(hashlib.sha256(r.stdout).hexdigest())
"""

# The parent writes into a child's stdin (sha256sum) through a pipe.
WRITE_CHILD = _HELPERS + """
p = subprocess.Popen(["sha256sum"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
write_file(p.stdin.fileno(), sys.argv[1])
p.stdin.close()
print(p.stdout.read().decode().split()[0])
sys.exit(p.wait())
"""

# The parent writes into a pipe a fork child reads and hashes.
FORK_READER = _HELPERS + """
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    print(hash_fd(r), flush=True)
    os._exit(0)
os.close(r)
write_file(w, sys.argv[1])
os.close(w)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
"""

# The same, but the read end reaches the child over a unix socket (SCM_RIGHTS).
SCM_RIGHTS_READER = _HELPERS + """
import socket
a, b = socket.socketpair()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    a.close(); os.close(r); os.close(w)
    msg, fds, _, _ = socket.recv_fds(b, 16, 1)
    print(hash_fd(fds[0]), flush=True)
    os._exit(0)
b.close()
socket.send_fds(a, [b"x"], [r])
os.close(r)
write_file(w, sys.argv[1])
os.close(w)
os.waitpid(pid, 0)
"""

# An event loop writes into a child's stdin: asyncio makes its end of the pipe
# non-blocking and writes the file in 1 MiB writes, waiting with drain() as
# its streams do (partial writes, the rest written when epoll says there is room).
ASYNCIO_WRITE_CHILD = """
import asyncio, sys

async def main(path):
    p = await asyncio.create_subprocess_exec(
        "sha256sum", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    with open(path, "rb") as f:
        while True:
            d = f.read(1 << 20)
            if not d:
                break
            p.stdin.write(d)
            await p.stdin.drain()
    p.stdin.close()
    out = await p.stdout.read()
    print(out.decode().split()[0])
    return await p.wait()

sys.exit(asyncio.run(main(sys.argv[1])))
"""
