"""The dashboard's warm-up process: `python app/roofline_app/warmup.py PARENT_PID` runs roofline.dashboard.warm (niced)
and exits as soon as the server that started it is gone (its parent changes), so a stopped server, or a browser
test's, leaves no compile running on the machine (before, each one left a warm-up working for minutes)."""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time


def watch(parent: int, poll_s: float = 0.5) -> None:
    """End this process (without cleanup: the warm-up only writes whole cache files) once `parent` is no longer
    its parent."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=watch, args=(int(sys.argv[1]),), daemon=True).start()
    sys.argv = [sys.argv[0]]
    sys.path[0] = os.getcwd()  # as `python -m` has it (not this folder: its module names are the app's)
    runpy.run_module("roofline.dashboard.warm", run_name="__main__", alter_sys=True)
