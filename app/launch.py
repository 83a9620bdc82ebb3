"""`make serve`: serve the configured models, or build and serve the demo checkpoint.

With OMNI_MODELS set, this execs Granian on them. Without it, it builds the demo model once
(models/demo.py: a small random-weight checkpoint in a published layout), exports it, and serves
that on CPU: the demo answers are random, and the server says so in its logs, /readyz and
`served_by`.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

# Granian buffers up to 16 MiB of an HTTP/2 request's headers by default; the app refuses more than
# 64 KiB of them (app/middleware.py), so Granian need hold no more than a few times that.
HTTP2_MAX_HEADERS = 256 * 1024
DEMO_ROOT = os.environ.get("OMNI_DEMO_DIR", os.path.join(".omni", "demo"))
# Granian's logging configuration for its process manager's lines as JSON (docs/observability.md).
GRANIAN_JSON_LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "granian_log_json.json")

# glibc's allocator, read once as a process starts (the Dockerfile sets the same): two arenas,
# not eight a core, and blocks from 256 KiB up mapped on their own and unmapped when freed, so
# the memory a large request took goes back to the system once it is answered. The operator's
# own values win.
MALLOC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144", "MALLOC_TRIM_THRESHOLD_": "262144"}


def malloc_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with MALLOC_ENV's settings where it sets none of its own."""
    return {**MALLOC_ENV, **env}


def ensure_demo(root: str = DEMO_ROOT) -> str:
    """Export directory of the demo model, building it on first use (needs the export extra).
    The build runs in a child process (`python -m models.demo`): the server never imports the
    exporters or torch."""
    done = subprocess.run([sys.executable, "-m", "models.demo", root], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(
            "no OMNI_MODELS configured and the demo cannot be built here (`python -m models.demo` "
            "exited %d; its reason is above): install the `export` extra or point OMNI_MODELS at "
            "exported models" % done.returncode
        )
    return done.stdout.strip().splitlines()[-1]


def event_loop(env: Mapping[str, str] | None = None) -> str:
    """The event loop Granian runs the app on: GRANIAN_LOOP where the operator set it, else uvloop
    where it is installed (a dependency off Windows), else asyncio's own. Never Granian's `auto`,
    which takes rloop wherever that is installed: rloop keeps each cancelled timer's callback
    alive for good, so every request's timers pile up and full garbage collections grow."""
    env = os.environ if env is None else env
    if env.get("GRANIAN_LOOP"):
        return env["GRANIAN_LOOP"]
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def port_taken(host: str, port: int) -> OSError | None:
    """Why `host:port` cannot be listened on, else None. Granian listens with SO_REUSEPORT, so a
    second server on a port already served would join the first and share its clients, silently:
    a plain bind finds it out first."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no owner
            probe.bind(address)
    except OSError as exc:
        return exc
    return None


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    ap.add_argument("--port", default=os.environ.get("PORT", "8000"))
    args = ap.parse_args(argv)
    taken = port_taken(args.host, int(args.port))
    if taken is not None:
        sys.exit(
            "cannot serve on %s:%s: %s (another server there? PORT=... picks another port)"
            % (args.host, args.port, taken.strerror or taken)
        )
    if not os.environ.get("OMNI_MODELS") and not os.environ.get("OMNI_CONFIG"):
        os.environ["OMNI_MODELS"] = ensure_demo()
        print(
            "serving the DEMO model (random weights: answers are random) from %s" % os.environ["OMNI_MODELS"],
            file=sys.stderr,
            flush=True,
        )
    if os.environ.get("OMNI_LOG_FORMAT") == "json":  # Granian's own lines as JSON too
        os.environ.setdefault("GRANIAN_LOG_CONFIG", GRANIAN_JSON_LOG)
    cmd = [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "rsgi",
        "--workers",
        "1",
        "--loop",
        event_loop(),
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--workers-kill-timeout",
        "30",
        "--http2-max-headers-size",
        str(HTTP2_MAX_HEADERS),
        "app.main:app",
    ]
    os.execve(sys.executable, cmd, malloc_env(os.environ))


if __name__ == "__main__":
    main()
