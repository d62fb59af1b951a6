"""Write this obc version's row of templates/lib/released.json: the sha256 of every part of
the runtime library as scripts embed it (docs/script.md, "Verify a script's library"); and,
first, the one part that is written rather than written by hand, templates/lib/causes.sh,
from compiler/model/causes.py.

    python3 -m tools.release_library

`obc verify` holds a script's parts to the row of the obc that wrote it, and
tests/compile/test_verify.py holds this version's row to the parts as they are: a part
changed without its row fails the tests, so a version's parts are one set of bytes. Rows of
earlier versions are kept as they were released.
"""

from __future__ import annotations

import json

from compiler import __version__
from compiler.core.resources import data_dir
from compiler.core.shell import quote
from compiler.model.causes import causes_text
from compiler.render.library import PART_ORDER, part_sha256

LIBRARY = data_dir("templates") / "lib"
RELEASED = LIBRARY / "released.json"
CAUSES_PART = LIBRARY / "causes.sh"


def causes_part() -> str:
    """templates/lib/causes.sh: compiler/model/causes.py's table as the part retry reads it.
    The table has one home, causes.py (docs/retry.md's table is made from it too); the part
    is written from it, so that it is plain shell like every part, and the job part stays
    free of obc's own data. tests/script/test_retry_causes.py holds the two alike."""
    section = "# --- obc's library: causes ".ljust(89, "-")
    return f"""\
{section}
# Why a step failed, and whether retry tries again (docs/retry.md): one cause a line,
# `ACTION|EXIT CODES|NAME|LOG`, in the order the part retry's obc_cause tries them.
# Written from compiler/model/causes.py by `python3 -m tools.release_library`: change the
# table there, never here.
OBC_CAUSES={quote(causes_text())}
"""


def main() -> None:
    CAUSES_PART.write_text(causes_part(), encoding="utf-8")
    rows = json.loads(RELEASED.read_text(encoding="utf-8")) if RELEASED.exists() else {}
    rows[__version__] = {name: part_sha256(name) for name in PART_ORDER}
    RELEASED.write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{RELEASED}: obc {__version__}, {len(PART_ORDER)} parts")


if __name__ == "__main__":
    main()
