#!/usr/bin/env bash
# Register rooflab with a Linux desktop for the current user: menu entry, icon, and the GGUF
# file type (so file managers offer rooflab for .gguf files).
#   install-desktop-entry.sh              from a checkout: runs `rooflab-gui` from PATH
#                                         (pip install . puts it there)
#   dist/rooflab/install-desktop-entry.sh from a frozen build folder: runs that folder's
#                                         rooflab-gui by its absolute path (don't move the folder
#                                         afterwards, or run this again)
#   install-desktop-entry.sh --frozen DIR the same for the frozen build folder DIR, from anywhere
#                                         (a checkout's packaging/, say)
#   ... --uninstall                       remove what the install put there
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps="$data/applications"
icons="$data/icons/hicolor"
mime="$data/mime"

usage() {
    echo "usage: $(basename "$0") [--frozen DIR | --uninstall]" >&2
    exit 2
}

refresh() {
    if command -v update-desktop-database >/dev/null; then update-desktop-database "$apps" || true; fi
    if command -v update-mime-database >/dev/null; then update-mime-database "$mime" || true; fi
    if command -v gtk-update-icon-cache >/dev/null; then gtk-update-icon-cache -q -t "$icons" || true; fi
}

# Whether $1 holds a character the Desktop Entry spec reserves in an Exec argument (space, tab,
# newline, double and single quote, backslash, >, <, ~, |, &, ;, $, *, ?, #, (, ), backtick).
reserved() {
    local chars=$' \t\n"\'\\><~|&;$*?#()`' i
    for ((i = 0; i < ${#chars}; i++)); do
        [[ $1 == *"${chars:i:1}"* ]] && return 0
    done
    return 1
}

# $1 as one argument of an Exec key. Quoted only when the spec requires it: xdg-open, on a
# desktop it does not recognise, runs the first word of Exec as it stands, quotes and all
# ("xdg-open: 811: : Permission denied"), so a plain path must stay plain. Inside the quotes
# ", `, $ and \ take a backslash; then, as in any string value, every backslash is doubled and
# a literal % is written %%.
exec_arg() {
    local arg=$1
    if reserved "$arg"; then
        arg=${arg//\\/\\\\}
        arg=${arg//\"/\\\"}
        arg=${arg//\`/\\\`}
        arg=${arg//\$/\\\$}
        arg="\"$arg\""
    fi
    arg=${arg//\\/\\\\}
    printf '%s' "${arg//%/%%}"
}

# $1 as a string value (TryExec): only the backslash is escaped.
string_value() {
    printf '%s' "${1//\\/\\\\}"
}

frozen=""
case "${1:-}" in
    --uninstall)
        [ $# -eq 1 ] || usage
        rm -f "$apps/rooflab.desktop" "$icons/scalable/apps/rooflab.svg" \
            "$icons/256x256/apps/rooflab.png" "$icons/64x64/apps/rooflab.png" \
            "$mime/packages/rooflab-gguf.xml"
        refresh
        echo "removed rooflab's desktop entry from $data"
        exit 0
        ;;
    --frozen)
        [ $# -eq 2 ] || usage
        frozen=$(cd "$2" 2>/dev/null && pwd) || { echo "no such folder: $2" >&2; exit 2; }
        [ -x "$frozen/rooflab-gui" ] || { echo "$frozen has no rooflab-gui: not a frozen build folder" >&2; exit 2; }
        ;;
    "")
        if [ -x "$here/rooflab-gui" ]; then frozen=$here; fi      # run from a frozen build folder
        ;;
    *)
        usage
        ;;
esac

if [ -n "$frozen" ]; then
    icon_dir="$frozen/_internal/rooflab/resources/icons"
    exec_path="$frozen/rooflab-gui"
    if [[ $exec_path == *$'\n'* ]]; then
        echo "a desktop entry cannot name a path with a line break: move $frozen" >&2
        exit 2
    fi
else                                                # packaging/ in a checkout
    icon_dir="$here/../resources/icons"
    exec_path=""
fi

install -d "$apps"
if [ -n "$exec_path" ]; then
    while IFS= read -r line; do
        case $line in
            Exec=rooflab-gui*) printf 'Exec=%s%s\n' "$(exec_arg "$exec_path")" "${line#Exec=rooflab-gui}" ;;
            TryExec=*) printf 'TryExec=%s\n' "$(string_value "$exec_path")" ;;
            *) printf '%s\n' "$line" ;;
        esac
    done <"$here/rooflab.desktop" >"$apps/rooflab.desktop"
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
