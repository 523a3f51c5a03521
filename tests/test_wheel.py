"""The package as users install it: `pip install .` (not editable) into a fresh venv, then
`kvledger db upgrade`, `kvledger serve` and every page, from outside the repository.

No network: the wheel is built without build isolation (setuptools and wheel come with the dev
extras) and installed with `--no-deps`; the fresh venv sees the test venv's dependencies through a
.pth line (a path line only: the test venv's own .pth files — the editable install's finder — are
not run, so `app` can only come from the wheel)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import urllib.request
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server import ROOT, running_server

PAGES = ("/", "/plan?model=llama-3.1-8b", "/plan.json?model=llama-3.1-8b", "/import", "/sim", "/d", "/p", "/docs",
         "/openapi.json", "/plan/export/serve?model=llama-3.1-8b")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the wheel built from this checkout installed in it; yields its bin/."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist"), str(ROOT)], check=True, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("kvledger-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("app/_shipped/templates/base.html", "app/_shipped/alembic.ini",
                    "app/_shipped/migrations/env.py", "app/_shipped/static/app.js"):
        assert shipped in names, shipped
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site_dir = next(env_dir.glob("lib/python*/site-packages"))
    (site_dir / "test-venv-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, cwd=tmp)
    yield env_dir / "bin"


def _env(data_dir: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KVLEDGER_")}
    return {**base, "KVLEDGER_DATA_DIR": str(data_dir)}


def test_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run([str(installed / "python"), "-c", "import app, app.resources as r; "
                          "print(app.__file__); print(r.resource_path('templates'))"],
                         check=True, capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert all(str(ROOT) not in line for line in out), out
    assert out[1].endswith("app/_shipped/templates")


def test_db_upgrade_then_serve_every_page(installed: Path, tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    upgraded = subprocess.run([str(installed / "kvledger"), "db", "upgrade"], env=env, cwd=tmp_path,
                              capture_output=True, text=True)
    assert upgraded.returncode == 0, upgraded.stderr
    assert (tmp_path / "data" / "kvledger.sqlite3").exists()
    with running_server(env, tmp_path / "serve.log", argv=[str(installed / "kvledger"), "serve", "--port"],
                        cwd=tmp_path) as url:
        for page in PAGES:
            with urllib.request.urlopen(url + page, timeout=30) as response:
                assert response.status == 200, page
                body = response.read()
                assert body, page
        with urllib.request.urlopen(url + "/", timeout=30) as response:
            html = response.read().decode()
        asset = html.split('src="/static/', 1)[1].split('"', 1)[0]
        with urllib.request.urlopen(f"{url}/static/{asset}", timeout=30) as response:
            assert response.status == 200 and response.read()
