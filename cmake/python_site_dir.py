"""Where a Python package installed under PREFIX goes, so that this interpreter imports it.

usage: python_site_dir.py PREFIX

Prints the directory, then "on-path" when the interpreter's sys.path holds it, "off-path" when
not. The interpreter is the prefix's own when it has one (cmake/python_install.cmake runs
PREFIX/bin/python3 then: a virtual environment, a Python installed there); then its
platlib is the answer. Otherwise the first site directory on sys.path below PREFIX (Debian's
/usr/local/lib/python3.X/dist-packages for the prefix /usr/local), else the standard layout
PREFIX/lib/python3.X/site-packages, which only PYTHONPATH will make importable.
"""

import os
import sys
import sysconfig


def main() -> None:
    prefix = os.path.realpath(sys.argv[1])
    on_path = {os.path.realpath(entry) for entry in sys.path if entry}
    if os.path.realpath(sys.prefix) == prefix:
        found = sysconfig.get_path("platlib")
    else:
        below = [entry for entry in sys.path if entry and
                 os.path.realpath(entry).startswith(prefix + os.sep) and
                 os.path.basename(entry) in ("site-packages", "dist-packages")]
        found = below[0] if below else sysconfig.get_path(
            "platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    print(found)
    print("on-path" if os.path.realpath(found) in on_path else "off-path")


if __name__ == "__main__":
    main()
