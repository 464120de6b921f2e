#!/usr/bin/env bash
# Register rooflab with a Linux desktop (menu entry + icon) for the current user.
# Needs `rooflab-gui` on PATH (pip install . puts it there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
install -Dm644 "$here/rooflab.desktop" "$data/applications/rooflab.desktop"
install -Dm644 "$here/../resources/icons/rooflab.svg" "$data/icons/hicolor/scalable/apps/rooflab.svg"
install -Dm644 "$here/../resources/icons/rooflab-256.png" "$data/icons/hicolor/256x256/apps/rooflab.png"
command -v update-desktop-database >/dev/null && update-desktop-database "$data/applications" || true
echo "installed rooflab.desktop into $data/applications"
