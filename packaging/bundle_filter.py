"""Which binaries PyInstaller collected go into the frozen folder (rooflab.spec calls ``keep``).

PyInstaller copies Qt's plugins and then every shared library they link against that it finds
on the build machine. Qt's GTK 3 platform theme (``platformthemes/libqgtk3.so``) links GTK, GDK,
Pango, Cairo, ATK and GdkPixbuf, so the folder used to carry whatever GTK stack the build host
happened to have installed, or none. The plugin is dropped here, and with it every library
collected from the system that nothing else in the folder needs: the folder's system libraries
are then exactly those Qt and Python need, from the packages packaging/build-system-packages.txt
declares. Without the plugin Qt uses its own look (or the XDG portal's theme), as it does on a
machine without GTK.

No PyInstaller import here: the tests exercise this module on its own.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath

#: Collected files the folder never carries (dest paths inside the folder, as PyInstaller names them).
EXCLUDED = ("PySide6/Qt/plugins/platformthemes/libqgtk3.so",)

Entry = tuple[str, str, str]          # PyInstaller's TOC entry: (dest name, source path, kind)


#: Where a build host keeps its shared libraries (what the folder takes from them is declared).
SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")


def from_system(entry: Entry, system_dirs: Iterable[str] = SYSTEM_DIRS) -> bool:
    """Whether a collected binary is a shared library of the build host's (not a Python
    extension module, not libpython, not anything from the build venv)."""
    source = PurePosixPath(entry[1])
    name = source.name
    if not (name.startswith("lib") and ".so" in name) or name.startswith("libpython"):
        return False
    if any(part.startswith("python") for part in source.parts[:-1]):
        return False                       # .../python3.11/lib-dynload, site-packages
    return any(source.is_relative_to(folder) for folder in system_dirs)


def keep(binaries: Sequence[Entry], needed: Callable[[str], list[str]] | None = None,
         system_dirs: Iterable[str] = SYSTEM_DIRS) -> list[Entry]:
    """``binaries`` without ``EXCLUDED`` and without the host's shared libraries that no kept
    binary needs, directly or through another kept library. ``needed(path)``: the DT_NEEDED
    names of an ELF file (read from the file itself unless given)."""
    needed = needed or needed_libraries
    dirs = tuple(system_dirs)
    dropped = {PurePosixPath(name) for name in EXCLUDED}
    entries = [e for e in binaries if PurePosixPath(e[0]) not in dropped]
    system = {PurePosixPath(e[0]).name: e for e in entries if from_system(e, dirs)}
    wanted: set[str] = set()
    todo = [e for e in entries if not from_system(e, dirs)]
    while todo:
        entry = todo.pop()
        for name in needed(entry[1]):
            if name in system and name not in wanted:
                wanted.add(name)
                todo.append(system[name])
    return [e for e in entries if not from_system(e, dirs) or PurePosixPath(e[0]).name in wanted]


def needed_libraries(path: str | Path) -> list[str]:
    """The DT_NEEDED entries of an ELF shared object or executable ([] for anything else)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return []
    wide, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        section = end + "IIQQQQIIQQ"          # name, type, flags, addr, offset, size, link, ...
        dyn = end + "qQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        section = end + "IIIIIIIIII"
        dyn = end + "iI"
    sections = [struct.unpack_from(section, data, shoff + i * shentsize) for i in range(shnum)]
    out: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, *_rest in sections:
        if kind != 6:                          # SHT_DYNAMIC
            continue
        strings = sections[link][4]
        step = struct.calcsize(dyn)
        for at in range(offset, offset + size, step):
            tag, value = struct.unpack_from(dyn, data, at)
            if tag == 0:                       # DT_NULL
                break
            if tag == 1:                       # DT_NEEDED
                stop = data.index(b"\0", strings + value)
                out.append(data[strings + value:stop].decode())
    return out
