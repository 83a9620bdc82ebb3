"""A Granian worker whose main process dies stops serving.

Granian's main process forwards signals to its worker and stops it on the way out; killed with
SIGKILL it can do neither, and the worker would go on serving on the port (a restarted server
then binds beside it and the two share it). So the worker asks Linux for a SIGTERM once its
parent dies (prctl PR_SET_PDEATHSIG): Granian's graceful shutdown stops accepting and answers what
it holds. A thread that watches the parent's pid covers other systems and a parent gone before
the prctl, and ends the process outright if the drain outlasts its bound.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time

log = logging.getLogger("omni")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.5


def watch_parent(drain_s: float) -> bool:
    """In a Granian worker process, arm both watches and return True; anywhere else (a test
    process, a script importing the app) do nothing. `drain_s`: how long the worker may take to
    answer what it holds before it is ended."""
    parent = multiprocessing.parent_process()
    if parent is None or multiprocessing.current_process().name != "granian-worker":
        return False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
                log.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d): the parent watch polls", ctypes.get_errno())
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch, args=(parent.pid, drain_s), name="omni-parent-watch", daemon=True).start()
    return True


def _watch(ppid: int, drain_s: float) -> None:
    while os.getppid() == ppid:
        time.sleep(POLL_S)
    log.error("Granian's main process (pid %d) has gone: this worker stops", ppid)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(drain_s)
    log.error("the worker did not stop within %g s of its main process going: ending it", drain_s)
    os._exit(1)
