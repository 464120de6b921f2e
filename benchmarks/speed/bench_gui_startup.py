"""Start-up to a drawn window: `rooflab` with no arguments, timed from process start until the
window has been shown and painted once. Target: under 1.5 s. Also checks that neither torch
nor transformers was imported.

    python benchmarks/speed/bench_gui_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 1.5

CHILD = r"""
import sys, time
t0 = float(sys.argv[1])
from rooflab.gui.shell import app
from PySide6.QtWidgets import QApplication

def exec_once(self):
    from rooflab.gui.shell.main_window import MainWindow
    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    QApplication.processEvents()
    window.repaint()                       # a synchronous paint of the whole window
    elapsed = time.time() - t0
    heavy = [m for m in ("torch", "transformers") if m in sys.modules]
    print(f"{elapsed:.4f} {','.join(heavy) or '-'}")
    return 0

app.QApplication.exec = exec_once
from rooflab.gui.main import main
sys.exit(main([]))
"""


def run_once(env: dict[str, str]) -> tuple[float, str]:
    start = time.time()
    out = subprocess.run([sys.executable, "-c", CHILD, repr(start)], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return float(out[0]), out[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, ROOFLAB_CONFIG_DIR=os.path.join(home, "cfg"),
                   ROOFLAB_DATA_DIR=os.path.join(home, "data"))
        if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
            env["QT_QPA_PLATFORM"] = "offscreen"
        run_once(env)                                   # warm the file cache and .pyc files
        results = [run_once(env) for _ in range(args.runs)]
    times = [t for t, _ in results]
    heavy = {h for _, h in results if h != "-"}
    median = statistics.median(times)
    print(f"start-up to a drawn window: median {median:.2f} s, best {min(times):.2f} s, worst {max(times):.2f} s "
          f"over {args.runs} runs (target < {TARGET_S} s)")
    print(f"heavy modules imported: {', '.join(sorted(heavy)) or 'none'}")
    return 0 if median < TARGET_S and not heavy else 1


if __name__ == "__main__":
    raise SystemExit(main())
