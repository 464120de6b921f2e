#!/usr/bin/env bash
# Register rooflab with a Linux desktop for the current user: menu entry, icon, and the GGUF
# file type (so file managers offer rooflab for .gguf files).
#   install-desktop-entry.sh              from a checkout: runs `rooflab-gui` from PATH
#                                         (pip install . puts it there)
#   dist/rooflab/install-desktop-entry.sh from a frozen build folder: runs that folder's
#                                         rooflab-gui by its absolute path (don't move the folder
#                                         afterwards, or run this again)
#   ... --uninstall                       remove what the install put there
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps="$data/applications"
icons="$data/icons/hicolor"
mime="$data/mime"

refresh() {
    if command -v update-desktop-database >/dev/null; then update-desktop-database "$apps" || true; fi
    if command -v update-mime-database >/dev/null; then update-mime-database "$mime" || true; fi
    if command -v gtk-update-icon-cache >/dev/null; then gtk-update-icon-cache -q -t "$icons" || true; fi
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$apps/rooflab.desktop" "$icons/scalable/apps/rooflab.svg" \
        "$icons/256x256/apps/rooflab.png" "$icons/64x64/apps/rooflab.png" \
        "$mime/packages/rooflab-gguf.xml"
    refresh
    echo "removed rooflab's desktop entry from $data"
    exit 0
fi

if [ -x "$here/rooflab-gui" ]; then                  # a frozen build folder
    icon_dir="$here/_internal/rooflab/resources/icons"
    exec_path="$here/rooflab-gui"
else                                                # packaging/ in a checkout
    icon_dir="$here/../resources/icons"
    exec_path=""
fi

install -d "$apps"
if [ -n "$exec_path" ]; then
    # Desktop entries quote arguments with double quotes; a path with spaces then still works.
    sed -e "s|^Exec=rooflab-gui|Exec=\"$exec_path\"|" -e "s|^TryExec=.*|TryExec=$exec_path|" \
        "$here/rooflab.desktop" > "$apps/rooflab.desktop"
    chmod 644 "$apps/rooflab.desktop"
else
    install -m644 "$here/rooflab.desktop" "$apps/rooflab.desktop"
fi
install -Dm644 "$icon_dir/rooflab.svg" "$icons/scalable/apps/rooflab.svg"
install -Dm644 "$icon_dir/rooflab-256.png" "$icons/256x256/apps/rooflab.png"
install -Dm644 "$icon_dir/rooflab-64.png" "$icons/64x64/apps/rooflab.png"
install -Dm644 "$here/rooflab-gguf.xml" "$mime/packages/rooflab-gguf.xml"
refresh
echo "installed rooflab.desktop into $apps (runs ${exec_path:-rooflab-gui from PATH})"
