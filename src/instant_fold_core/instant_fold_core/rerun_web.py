"""Serve a Rerun recording (`.rrd`) in Rerun's web viewer on this machine, and say where.

Why a web viewer: the machines that fold have no display; a browser on the same machine (or
through an SSH tunnel) opens the URL. Only the loopback address is served by default, since
the viewer and its gRPC proxy need no authentication.

Runs the `rerun` executable that rerun-sdk ships (`rerun --serve-web <file>`): it hosts the viewer
over HTTP and the recording over gRPC; the URL printed carries the gRPC address. Without a file
(`serve_live`) the same gRPC server is a proxy that recordings stream into while a fold runs
(`FoldRecording(stream_to=viewer.proxy)`); it keeps what it received (up to its memory limit), so
a browser opened late still sees the fold from its start.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from instant_fold_core.errors import ExternalError, InvalidInputError

#: Longest wait for the viewer's HTTP port to open (s); it opens in ~1 s on a loaded 2-core machine.
START_TIMEOUT_S = 60.0


class RerunWebError(ExternalError):
    """The web viewer could not be started (no rerun executable, a port in use, an early exit)."""


def rerun_executable() -> Path:
    """The `rerun` binary of the installed rerun-sdk (its `rerun_cli` package), else `rerun` on PATH."""
    try:
        import rerun_cli

        bundled = Path(rerun_cli.__file__).parent / "rerun"
        if bundled.is_file():
            return bundled
    except ImportError:
        pass
    found = shutil.which("rerun")
    if found is None:
        raise RerunWebError("no rerun executable: install rerun-sdk (requirements/python.lock pins it)")
    return Path(found)


def free_port(host: str, port: int) -> int:
    """`port` if it can be bound on `host` (0: a free one the system picks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise RerunWebError(f"port {port} on {host} is in use ({exc.strerror}): choose another") from None
        return int(s.getsockname()[1])


def proxy_url(host: str, grpc_port: int) -> str:
    """The address of the viewer's gRPC proxy: what a viewer loads and a recording streams to."""
    return f"rerun+http://{host}:{grpc_port}/proxy"


def viewer_url(host: str, web_port: int, grpc_port: int) -> str:
    """The web viewer's address with the recording's gRPC proxy to load."""
    return f"http://{host}:{web_port}/?url={quote(proxy_url(host, grpc_port), safe='')}"


@dataclass
class WebViewer:
    """A running `rerun --serve-web`; `close` (or leaving the `with` block) stops it. `url` is the
    page to open, `proxy` the gRPC address recordings stream to."""

    process: subprocess.Popen[bytes]
    url: str
    proxy: str

    def wait(self) -> int:
        """Block until the viewer exits (Ctrl-C, or `close` from another thread)."""
        return self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> WebViewer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def serve_recording(
    path: str | Path, host: str = "127.0.0.1", web_port: int = 9090, grpc_port: int = 0, log: Path | None = None
) -> WebViewer:
    """Serve the recording at `path` and return once the viewer answers on `web_port` (0: a free
    port; so is `grpc_port` 0). The viewer's output goes to `log` (default: discarded)."""
    recording = Path(path)
    if recording.suffix != ".rrd" or not recording.is_file():
        raise InvalidInputError(f"{recording}: no Rerun recording (.rrd) there")
    return _serve([str(recording.resolve())], host, web_port, grpc_port, log)


def serve_live(host: str = "127.0.0.1", web_port: int = 9090, grpc_port: int = 0, log: Path | None = None) -> WebViewer:
    """Serve an empty web viewer whose gRPC proxy (`viewer.proxy`) takes recordings streamed to it
    while they are written, and return once the viewer answers (ports as `serve_recording`)."""
    return _serve([], host, web_port, grpc_port, log)


def _serve(files: list[str], host: str, web_port: int, grpc_port: int, log: Path | None) -> WebViewer:
    """Start `rerun --serve-web` on `files` and wait until its HTTP port answers."""
    web = free_port(host, web_port)
    grpc = free_port(host, grpc_port)
    if grpc == web:
        grpc = free_port(host, 0)
    cmd = [str(rerun_executable()), "--serve-web", "--bind", host, "--web-viewer-port", str(web), "--port", str(grpc)]
    with open(log or os.devnull, "wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen([*cmd, *files], stdout=out, stderr=subprocess.STDOUT)
    viewer = WebViewer(process, viewer_url(host, web, grpc), proxy_url(host, grpc))
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RerunWebError(
                f"rerun --serve-web exited with code {process.returncode}" + (f" (see {log})" if log else "")
            )
        try:
            socket.create_connection((host, web), timeout=1.0).close()
            return viewer
        except OSError:
            if time.monotonic() > deadline:
                viewer.close()
                raise RerunWebError(f"the web viewer did not open {host}:{web} within {START_TIMEOUT_S:g} s") from None
            time.sleep(0.2)
