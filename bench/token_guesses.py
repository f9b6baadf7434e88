"""Benchmark: how fast can clients guess the token of a `profboard --token` server?

    .venv/bin/python bench/token_guesses.py [--clients 32] [--seconds 10] [--via bearer|query|form] [--spoof]

Starts `profboard --token` on an empty logdir and runs --clients threads, each on its own
keep-alive connection, sending wrong tokens for --seconds: as `Authorization: Bearer` to
/api/runs, as `?token=` on /api/runs, or through the login form (POST /login).
A 401 is a guess the server checked; a 429 is one it refused without checking. Reports both
per second. All clients come from 127.0.0.1, so they share one client's limit; with --spoof each
request claims another address in X-Forwarded-For (which uvicorn believes from 127.0.0.1, as
from a local proxy), so only the limit over all clients holds.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import random
import subprocess
import sys
import tempfile
import threading
import time

from serving import free_port


def _guess(port: int, via: str, spoof: bool, stop_at: float, counts: collections.Counter,
           lock: threading.Lock) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    mine: collections.Counter = collections.Counter()
    n = 0
    while time.perf_counter() < stop_at:
        headers = {"X-Forwarded-For": f"10.{random.randrange(256)}.{random.randrange(256)}.{n % 256}"} if spoof else {}
        if via == "bearer":
            connection.request("GET", "/api/runs", headers=headers | {"Authorization": f"Bearer guess-{n}"})
        elif via == "query":
            connection.request("GET", f"/api/runs?token=guess-{n}", headers=headers)
        else:
            connection.request("POST", "/login", body=f"token=guess-{n}&next=/",
                               headers=headers | {"Content-Type": "application/x-www-form-urlencoded"})
        response = connection.getresponse()
        response.read()
        mine[response.status] += 1
        n += 1
    connection.close()
    with lock:
        counts.update(mine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--via", choices=["bearer", "query", "form"], default="bearer")
    parser.add_argument("--spoof", action="store_true", help="claim a random client address on every request")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as logdir:
        server = subprocess.Popen([sys.executable, "-m", "profboard.server.cli", "--logdir", logdir, "--port",
                                   str(port), "--no-cache", "--token", "the-right-token"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.perf_counter() + 60
            while True:
                try:
                    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    probe.request("GET", "/login")
                    probe.getresponse().read()
                    break
                except OSError:
                    if time.perf_counter() > deadline:
                        raise RuntimeError("profboard did not start in 60 s") from None
                    time.sleep(0.1)
            counts: collections.Counter = collections.Counter()
            lock = threading.Lock()
            start = time.perf_counter()
            threads = [threading.Thread(target=_guess, args=(port, args.via, args.spoof, start + args.seconds, counts, lock))
                       for _ in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
        finally:
            server.terminate()
            server.wait(10)
    print(f"{args.clients} clients by {args.via}{' (spoofed addresses)' if args.spoof else ''}, {elapsed:.1f} s: {counts[401]} guesses checked ({counts[401] / elapsed:.1f}/s), "
          f"{counts[429]} refused unchecked ({counts[429] / elapsed:.1f}/s), other: "
          f"{dict((k, v) for k, v in counts.items() if k not in (401, 429)) or 'none'}")


if __name__ == "__main__":
    main()
