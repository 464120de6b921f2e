"""Render the README screenshot: Qwen3-30B-A3B against a pinned Qwen3-8B on an RTX 4090,
Decode vs context tab, the Measure tab on the left. Offscreen.

    python packaging/screenshots/make_screenshot.py [--out OUT.png | --replace-tracked]
                                                   [--tab decode] [--left 3] [--size 1560x1100]
                                                   [--theme light|dark] [--model M --machine P
                                                   --devices N --parallel layer|tensor
                                                   --gpu-layers N --batch B] [--pins N]

By default it writes rooflab-main-window.png in the temporary folder (TMPDIR) and prints the
path: compare it with the tracked packaging/screenshots/main-window.png before replacing that
one with --replace-tracked. Other sizes and themes are for looking at the window as a user
would (1280x720, 1920x1080); ``--model`` (and the placement options) show that one scenario
alone instead of the README's pair; ``--pins N`` pins N series (other machines and models) beside
the one on screen, to look at the Compare tab and the legends as a comparison shows them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TRACKED = Path(__file__).with_name("main-window.png")


def output_path(out: str | None, replace_tracked: bool) -> Path:
    """Where the PNG goes: ``out``, the tracked screenshot when asked for in so many words, else
    a file in the temporary folder (so a trial run never changes the README's picture)."""
    if replace_tracked:
        return TRACKED
    return Path(out) if out else Path(tempfile.gettempdir()) / "rooflab-main-window.png"


#: what ``--pins`` pins, in order, (model, machine); the window then shows Qwen3-30B-A3B on the RTX 4090
PIN_SERIES = (("qwen3-8b-q4_k_m", "rtx-4090"), ("qwen3-8b-q4_k_m", "dgx-spark"), ("gemma-3-12b-q4_k_m", "rtx-4090"))


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="OUT.png", help="where to write (default: rooflab-main-window.png in TMPDIR)")
    where.add_argument("--replace-tracked", action="store_true",
                       help=f"overwrite the README's screenshot, {TRACKED.relative_to(TRACKED.parents[2])}")
    parser.add_argument("--tab", default="decode",
                        choices=("roofline", "prefill", "decode", "batching", "memory", "serving", "compare", "fit"),
                        help="plot tab (default decode)")
    parser.add_argument("--left", type=int, default=3, help="left tab: 0 machine, 1 model, 2 workload, 3 measure")
    parser.add_argument("--size", default="1560x1100", help="window size, WIDTHxHEIGHT pixels")
    parser.add_argument("--theme", default="light", choices=("light", "dark"))
    parser.add_argument("--model", help="a catalogue model shown alone (no pinned series)")
    parser.add_argument("--machine", default="rtx-4090", help="with --model: the machine preset")
    parser.add_argument("--devices", type=int, default=1, help="with --model: devices sharing it")
    parser.add_argument("--parallel", default="layer", choices=("layer", "tensor"))
    parser.add_argument("--gpu-layers", type=int, default=None, help="with --model: -ngl by hand")
    parser.add_argument("--batch", type=int, default=1, help="with --model: sequences decoded together")
    parser.add_argument("--pins", type=int, default=None,
                        help=f"pin this many series (at most {len(PIN_SERIES)}) before the one on screen")
    args = parser.parse_args()

    import rooflab.gui  # noqa: F401  (Qt binding, PySide6 work-around; before any Qt call)
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.values.defaults import DEFAULT_MACHINE, DEFAULT_MODEL, DEFAULT_WORKLOAD
    from rooflab.gui.shell.app import dispose, make_app
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.app_state import AppState
    from rooflab.gui.state.settings import Settings

    app = make_app(headless=True)
    state = AppState(load_model(DEFAULT_MODEL), load_machine(DEFAULT_MACHINE), DEFAULT_WORKLOAD,
                     model_ref=DEFAULT_MODEL)
    settings = Settings()
    settings.theme = args.theme
    window = MainWindow(state, settings, persist=False)
    width, height = (int(v) for v in args.size.lower().split("x"))
    window.resize(width, height)
    window.show()
    if args.model:
        from rooflab.core.io.presets import load_machine
        from rooflab.core.predict.choice import PlacementChoice

        state.set_machine(load_machine(args.machine))
        state.set_model(load_model(args.model), args.model)
        state.update_workload(batch=args.batch)
        state.set_placement(PlacementChoice(devices=args.devices, parallel=args.parallel,
                                            gpu_layers=args.gpu_layers))
    elif args.pins is not None:
        for model, machine in PIN_SERIES[:args.pins]:
            state.set_machine(load_machine(machine))
            state.set_model(load_model(model), model)
            state.pin_current()
        state.set_machine(load_machine("rtx-4090"))
        state.set_model(load_model("qwen3-30b-a3b-q4_k_m"), "qwen3-30b-a3b-q4_k_m")
    else:
        state.pin_current()
        state.set_model(load_model("qwen3-30b-a3b-q4_k_m"), "qwen3-30b-a3b-q4_k_m")
    window.recompute.recompute_now()
    others = {"serving": window.plot_panel.serving, "compare": window.compare_view, "fit": window.fit_view}
    window.plot_tabs.setCurrentWidget(others[args.tab] if args.tab in others else window.plots[args.tab])
    window.left_tabs.setCurrentIndex(args.left)
    app.processEvents()
    print(window.save_screenshot(str(output_path(args.out, args.replace_tracked))))
    dispose(window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
