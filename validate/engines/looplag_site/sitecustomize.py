"""Run 26: every Python process started with this folder on PYTHONPATH and LOOPLAG_DIR set runs
validate/engines/loop_lag.py's monitor (that module's docstring); without LOOPLAG_DIR it does nothing."""
import os
import sys

if os.environ.get("LOOPLAG_DIR"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    try:
        import loop_lag
        loop_lag.install(os.environ["LOOPLAG_DIR"])
    except Exception as e:  # a monitor that fails must not stop the process it watches
        print(f"loop_lag: not installed ({e})", file=sys.stderr)
    finally:
        sys.path.pop(0)
