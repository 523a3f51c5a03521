"""Where the folders the package needs at run time are: templates/, static/, migrations/, alembic.ini.

In a source checkout (and an editable install) they sit at the top of the repository; an
installed wheel carries them inside the package as `app/_shipped/` (setup.py's build_py copies
them there). `resource_path` prefers the packaged copy, so an installed package never reads a
stray checkout that happens to be the working directory.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = PACKAGE / "_shipped"
REPO_ROOT = PACKAGE.parent


def resource_path(name: str) -> Path:
    """The path of `name` (templates, static, migrations or alembic.ini) for this installation."""
    packaged = SHIPPED / name
    if packaged.exists():
        return packaged
    return REPO_ROOT / name
