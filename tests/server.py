"""The app as users start it (`serve()`: migrate, seed, uvicorn) in a subprocess, for tests that
need a real server: the browser tests and the concurrent-writer tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = "import sys; from app.web.app import serve; serve('127.0.0.1', int(sys.argv[1]))"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(
    env: Mapping[str, str], log_path: Path, ready: str = "/", timeout_s: float = 120.0,
    argv: Sequence[str] | None = None, cwd: Path = ROOT,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `serve()` (or `argv` followed by the port, e.g. an installed `kvledger serve --port`)
    with these environment variables over the test's own (KVLEDGER_* ones not given are removed),
    and wait until GET `ready` answers 200."""
    port = free_port()
    command = [*argv, str(port)] if argv is not None else [sys.executable, "-c", SERVE, str(port)]
    base = {k: v for k, v in os.environ.items() if not k.startswith("KVLEDGER_")}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, cwd=cwd,
                                env={**base, "PYTHONUNBUFFERED": "1", **env}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + ready, timeout=2) as response:
                if response.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"the server did not answer at {url}{ready} within {timeout_s:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def running_server(env: Mapping[str, str], log_path: Path, ready: str = "/",
                   argv: Sequence[str] | None = None, cwd: Path = ROOT) -> Iterator[str]:
    """start_server … stop_server around a block; yields the base URL."""
    proc, url = start_server(env, log_path, ready, argv=argv, cwd=cwd)
    try:
        yield url
    finally:
        stop_server(proc)
