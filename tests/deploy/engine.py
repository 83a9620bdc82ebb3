"""A private Docker engine for the image test: Debian's dockerd with its own data root, exec
root, socket and containerd under a temporary directory, so it neither needs nor touches a
system engine, and all of it is removed afterwards.

No default bridge (`--bridge=none`), no masquerading and no IP forwarding: builds use the host's
network, the compose project gets its own bridge network with no way out, and published ports
are served on 127.0.0.1. iptables stays on (the engine's DNS for service names, 127.0.0.11 in
each container, is wired with it); the host's rules are saved before and restored after, since
dockerd leaves its chains behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time


class Engine:
    def __init__(self, root: str, proc: subprocess.Popen):
        self.root, self.proc = root, proc
        self.host = "unix://" + os.path.join(root, "docker.sock")
        self.log_path = os.path.join(root, "dockerd.log")

    def env(self, **extra) -> dict:
        """Environment for docker / compose commands that talk to this engine."""
        return {**os.environ, "DOCKER_HOST": self.host, "COMPOSE_BAKE": "false", **extra}

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()[-6000:]


def _dockerd() -> str:
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/usr/bin", "/sbin"]:
        if os.access(os.path.join(d, "dockerd"), os.X_OK):
            return os.path.join(d, "dockerd")
    raise FileNotFoundError("dockerd")


def _iptables_save() -> str | None:
    try:
        out = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith("#"))


def _iptables_restore(saved: str | None) -> None:
    if saved is None or _iptables_save() == saved:
        return
    # Tables that did not exist before held nothing: empty them, then put the saved ones back.
    for table in ("filter", "nat"):
        if "*%s\n" % table not in saved:
            subprocess.run(["iptables", "-t", table, "-F"], capture_output=True)
            subprocess.run(["iptables", "-t", table, "-X"], capture_output=True)
    subprocess.run(["iptables-restore"], input=saved, text=True, capture_output=True)


@contextlib.contextmanager
def private_engine(timeout: float = 60.0):
    root = tempfile.mkdtemp(prefix="omni-engine-")
    saved_rules = _iptables_save()
    cmd = [
        _dockerd(),
        "--data-root",
        os.path.join(root, "data"),
        "--exec-root",
        os.path.join(root, "exec"),
        "--pidfile",
        os.path.join(root, "dockerd.pid"),
        "--host",
        "unix://" + os.path.join(root, "docker.sock"),
        "--bridge",
        "none",
        "--ip-masq=false",
        "--ip-forward=false",
        "--containerd-namespace",
        "omni-ci",
        "--containerd-plugins-namespace",
        "omni-ci-plugins",
    ]
    with open(os.path.join(root, "dockerd.log"), "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = Engine(root, proc)
    try:
        deadline = time.monotonic() + timeout
        while subprocess.run(["docker", "version"], env=engine.env(), capture_output=True).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dockerd did not start:\n" + engine.log())
            time.sleep(0.5)
        yield engine
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # dockerd stops its containers and its containerd
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Overlay mounts of a daemon that died hard would keep the tree busy.
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f if root in line]
        for m in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        _iptables_restore(saved_rules)
