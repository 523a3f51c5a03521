"""Ship the repository's top-level folders inside the wheel.

templates/, static/, migrations/ and alembic.ini stay at the top of the repository (the design
card's layout); `build_py` copies them into the built package as `app/_shipped/`, where
`app.resources.resource_path` finds them in an installed (non-editable) package. An editable
install and a source checkout read them where they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("templates", "static", "migrations", "alembic.ini")
ROOT = Path(__file__).resolve().parent


class BuildPyWithFolders(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "app" / "_shipped"
        shutil.rmtree(target, ignore_errors=True)  # no stale files from an earlier build
        for name in SHIPPED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildPyWithFolders})
