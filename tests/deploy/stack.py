"""One compose project of the image test: compose.yaml + compose.cpu.yaml + compose.test.yaml,
run by the pinned Compose v2 binary against the private engine."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import ROOT

FILES = ("compose.yaml", "compose.cpu.yaml", os.path.join("tests", "deploy", "compose.test.yaml"))


class Stack:
    def __init__(self, compose: str, project: str, env: dict):
        self.compose, self.project, self.env = compose, project, env

    def run(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [self.compose, "--project-name", self.project] + sum((["--file", f] for f in FILES), [])
        proc = subprocess.run(cmd + list(args), cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                "docker compose %s failed (%d):\n%s\n%s\n--- logs ---\n%s"
                % (" ".join(args), proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:], self.logs())
            )
        return proc

    def logs(self, *services: str) -> str:
        proc = self.run("logs", "--no-color", *services, timeout=60, check=False)
        return (proc.stdout + proc.stderr)[-8000:]

    def config(self) -> dict:
        return json.loads(self.run("config", "--format", "json").stdout)

    def containers(self, service: str) -> list[dict]:
        out = self.run("ps", "--all", "--format", "json", service).stdout.strip()
        # Compose prints one JSON object per line (older versions: one JSON array).
        if out.startswith("["):
            return json.loads(out)
        return [json.loads(line) for line in out.splitlines() if line.strip()]
