"""Starting and stopping the processes tests run: a free localhost port, a stop that never leaves a
child behind, and a process's tree of descendants (Linux /proc), to check that none outlives it."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen, timeout: float = 10) -> None:
    """Ask the process to end; kill it if it has not within `timeout` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...); [] for a gone process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def living(pids: list[int]) -> list[int]:
    """Those of `pids` still running (zombies, which hold no memory, are not)."""
    return [pid for pid in pids if _stat(pid)[:1] not in ([], ["Z"])]


def process_tree(pid: int) -> list[int]:
    """`pid` and all its living descendants, parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat(int(entry.name))
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree = [pid]
    for parent in tree:  # grows while it is walked: breadth first
        tree += children.get(parent, [])
    return living(tree)


_MEMORY_RISE = """
import sys
{imports}

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

base = status("VmRSS")
try:
    outcome = {call}
except Exception as exc:
    outcome = str(exc)
print(repr(outcome), status("VmHWM") - base)
"""


def memory_rise(imports: str, call: str, *args: str) -> tuple[object, int]:
    """Evaluate `call` (an expression over `sys.argv[1:]`, which hold `args`) in a fresh Python after
    `imports`: its value (or the message of what it raised) and how far the process's peak resident
    memory rose above where it stood before the call. Linux only (/proc/self/status)."""
    import ast
    import sys

    script = _MEMORY_RISE.format(imports=imports, call=call)
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True,
                          timeout=120)
    outcome, rise = done.stdout.rsplit(" ", 1)
    return ast.literal_eval(outcome), int(rise)
