"""The package builds and installs with nothing from a package index: pip
installs it with --no-index through the in-tree backend (_build/backend.py),
and the wheel and sdist that backend writes are what the formats say."""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

from conftest import PACKAGE

sys.path.insert(0, str(PACKAGE / "_build"))
import backend  # noqa: E402

# Bounds one pip run (it builds and installs one small wheel).
PIP_TIMEOUT = 300


def _offline_env() -> Dict[str, str]:
    """The environment of a pip that cannot reach an index: no index, no
    proxy, no user configuration, nothing of this checkout on sys.path."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "PYTHON")) and "proxy" not in k.lower()}
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def test_pip_installs_the_package_without_an_index(tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--no-compile", "--root-user-action=ignore", "--target", str(target), str(PACKAGE)],
        capture_output=True, text=True, env=_offline_env(), cwd=tmp_path, timeout=PIP_TIMEOUT,
    )
    assert pip.returncode == 0, f"pip install --no-index failed:\n{pip.stdout}\n{pip.stderr}"

    probe = "import sys; sys.path.insert(0, sys.argv[1]); import leaseapi; print(leaseapi.__file__); print(leaseapi.Client.OPERATIONS['triggerJob'])"
    imported = subprocess.run([sys.executable, "-c", probe, str(target)], capture_output=True, text=True, env=_offline_env(), cwd=tmp_path, timeout=60)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == [str(target / "leaseapi" / "__init__.py"), "trigger"]
    assert (target / "leaseapi" / "py.typed").is_file()
    assert not list(PACKAGE.glob("*.egg-info")) and not (PACKAGE / "build").exists(), "the build wrote into the source tree"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    directory = tmp_path_factory.mktemp("wheel")
    name = backend.build_wheel(str(directory))
    assert name == "leaseapi-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(directory / name) as zf:
        yield zf


def test_wheel_follows_the_format(wheel: zipfile.ZipFile) -> None:
    info = "leaseapi-0.1.0.dist-info"
    names = set(wheel.namelist())
    package = {p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "leaseapi").glob("*") if p.is_file() and p.suffix != ".pyc"}
    assert names == package | {f"{info}/{n}" for n in ("METADATA", "WHEEL", "RECORD", "top_level.txt")}
    assert "leaseapi/py.typed" in names

    rows = list(csv.reader(io.StringIO(wheel.read(f"{info}/RECORD").decode())))
    assert sorted(r[0] for r in rows) == sorted(names)
    for path, digest, size in rows:
        if path == f"{info}/RECORD":
            assert (digest, size) == ("", "")
            continue
        data = wheel.read(path)
        assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), path
        assert int(size) == len(data), path

    tags = email.parser.Parser().parsestr(wheel.read(f"{info}/WHEEL").decode())
    assert (tags["Wheel-Version"], tags["Root-Is-Purelib"], tags["Tag"]) == ("1.0", "true", "py3-none-any")


def test_metadata_is_the_pyprojects(wheel: zipfile.ZipFile) -> None:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    meta = email.parser.Parser().parsestr(wheel.read("leaseapi-0.1.0.dist-info/METADATA").decode())
    assert (meta["Metadata-Version"], meta["Name"], meta["Version"], meta["Summary"]) == ("2.1", project["name"], project["version"], project["description"])
    assert (meta["Requires-Python"], meta["License"]) == (project["requires-python"], project["license"]["text"])
    assert meta.get_all("Classifier") == project["classifiers"]
    assert meta.get_all("Provides-Extra") == list(project["optional-dependencies"])
    assert meta.get_all("Requires-Dist") == [f'{d}; extra == "{e}"' for e, deps in project["optional-dependencies"].items() for d in deps]
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload() == (PACKAGE / "README.md").read_text()


def test_sdist_builds_the_same_wheel(tmp_path: Path, wheel: zipfile.ZipFile) -> None:
    name = backend.build_sdist(str(tmp_path))
    assert name == "leaseapi-0.1.0.tar.gz"
    (tmp_path / "again").mkdir()
    assert backend.build_sdist(str(tmp_path / "again")) == name
    assert (tmp_path / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), "the sdist is not reproducible"
    with tarfile.open(tmp_path / name) as tar:
        members = tar.getnames()
        assert "leaseapi-0.1.0/PKG-INFO" in members and "leaseapi-0.1.0/_build/backend.py" in members
        assert all(m.isfile() and m.name.startswith("leaseapi-0.1.0/") and ".." not in m.name.split("/") for m in tar.getmembers())
        tar.extractall(tmp_path / "src")

    # The sdist's own backend, run in the unpacked tree, builds the wheel
    # built from this checkout, byte for byte.
    out = tmp_path / "out"
    out.mkdir()
    build = "import sys, backend; print(backend.build_wheel(sys.argv[1]))"
    built = subprocess.run([sys.executable, "-c", build, str(out)], capture_output=True, text=True, cwd=tmp_path / "src" / "leaseapi-0.1.0" / "_build", env=_offline_env(), timeout=60)
    assert built.returncode == 0, built.stderr
    assert (out / built.stdout.strip()).read_bytes() == Path(wheel.filename).read_bytes()  # type: ignore[arg-type]


def test_editable_wheel_points_at_the_source(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / backend.build_editable(str(tmp_path))) as zf:
        assert zf.read("__editable__.leaseapi.pth").decode() == f"{PACKAGE}\n"
        assert "leaseapi-0.1.0.dist-info/METADATA" in zf.namelist()
    assert backend.get_requires_for_build_wheel() == backend.get_requires_for_build_sdist() == backend.get_requires_for_build_editable() == []


def test_toml_reader_reads_pyproject_as_tomllib() -> None:
    text = (PACKAGE / "pyproject.toml").read_text()
    assert backend.read_toml(text) == tomllib.loads(text)
    sample = 'a = "t\\u00e9\\"x" # c\n[b.c]\n"k" = [1, -2, true,\n  {x = \'l\\\\\'},\n]\nd.e = false\n'
    assert backend.read_toml(sample) == tomllib.loads(sample)


def test_toml_reader_refuses_what_it_does_not_take() -> None:
    for bad in ['a = """x"""', "[[t]]", "a = 1.5", "a = 1979-05-27", "a = [1 2]", 'a = "x', "a = 1\na = 2", "a = {b.c = 1}", 'a = "\\q"', "= 1", "a = 1 b"]:
        with pytest.raises(backend.TOMLError):
            backend.read_toml(bad)
    # Every prefix of the real file is read or refused, never anything else.
    text = (PACKAGE / "pyproject.toml").read_text()
    for end in range(len(text)):
        try:
            backend.read_toml(text[:end])
        except backend.TOMLError:
            pass
