"""Write this obc version's row of templates/lib/released.json: the sha256 of every part of
the runtime library as scripts embed it (docs/script.md, "Verify a script's library").

    python3 -m tools.release_library

`obc verify` holds a script's parts to the row of the obc that wrote it, and
tests/compile/test_library.py holds this version's row to the parts as they are: a part
changed without its row fails the tests, so a version's parts are one set of bytes. Rows of
earlier versions are kept as they were released.
"""

from __future__ import annotations

import json

from compiler import __version__
from compiler.core.resources import data_dir
from compiler.render.library import PART_ORDER, part_sha256

RELEASED = data_dir("templates") / "lib" / "released.json"


def main() -> None:
    rows = json.loads(RELEASED.read_text(encoding="utf-8")) if RELEASED.exists() else {}
    rows[__version__] = {name: part_sha256(name) for name in PART_ORDER}
    RELEASED.write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{RELEASED}: obc {__version__}, {len(PART_ORDER)} parts")


if __name__ == "__main__":
    main()
