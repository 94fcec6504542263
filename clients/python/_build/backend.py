"""The build backend of the leaseapi package (PEP 517 and PEP 660), written
with the standard library only, so that ``pip install ./clients/python``
needs nothing from a package index: pyproject.toml names it with
``requires = []`` and ``backend-path = ["_build"]``.

It builds one pure-Python package: the directory named after the project,
every file in it except bytecode. The metadata comes from pyproject.toml's
[project] table (read by the small TOML reader below, since tomllib is
Python 3.11+ and the package supports 3.9). The wheel follows the binary
distribution format (RECORD, WHEEL, METADATA 2.1), the sdist the source
distribution format (PKG-INFO at its root); both are reproducible: entries
sorted, times fixed (SOURCE_DATE_EPOCH when set).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = [
    "build_wheel",
    "build_sdist",
    "build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
]

ROOT = Path(__file__).resolve().parent.parent
# What the sdist holds besides the package: enough to build the wheel again.
SDIST_FILES = ("pyproject.toml", "README.md", "_build/backend.py")
# The earliest time a zip entry can have; the default entry time.
_ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


class TOMLError(ValueError):
    """pyproject.toml holds something the reader does not take."""


def read_toml(text: str) -> Dict[str, Any]:
    """Reads the subset of TOML a pyproject.toml of this package uses:
    [table] and [dotted.table] headers, bare or quoted keys, basic and
    literal strings, integers, booleans, arrays (over several lines too) and
    inline tables, and comments. Anything else raises TOMLError naming the
    line, never a wrong value."""
    return _Reader(text).document()


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> TOMLError:
        line = self.text.count("\n", 0, self.pos) + 1
        return TOMLError(f"pyproject.toml line {line}: {what}")

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def skip(self, newlines: bool) -> None:
        """Skips blanks and comments (and newlines when asked)."""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.fail(f"want {c!r}, got {self.peek() or 'the end'!r}")
        self.pos += 1

    def end_of_line(self) -> None:
        self.skip(newlines=False)
        if self.pos < len(self.text):
            if self.peek() not in "\r\n":
                raise self.fail(f"unexpected {self.peek()!r} after a value")
            self.skip(newlines=True)

    def document(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {}
        table = doc
        self.skip(newlines=True)
        while self.pos < len(self.text):
            if self.peek() == "[":
                self.pos += 1
                if self.peek() == "[":
                    raise self.fail("arrays of tables are not supported")
                table = doc
                for key in self.dotted_key():
                    table = table.setdefault(key, {})
                    if not isinstance(table, dict):
                        raise self.fail(f"{key!r} is not a table")
                self.expect("]")
            else:
                keys = self.dotted_key()
                self.expect("=")
                target = table
                for key in keys[:-1]:
                    target = target.setdefault(key, {})
                if keys[-1] in target:
                    raise self.fail(f"key {keys[-1]!r} defined twice")
                self.skip(newlines=False)
                target[keys[-1]] = self.value()
            self.end_of_line()
        return doc

    def dotted_key(self) -> List[str]:
        keys = []
        while True:
            self.skip(newlines=False)
            if self.peek() in ('"', "'"):
                keys.append(self.string())
            else:
                m = re.compile(r"[A-Za-z0-9_-]+").match(self.text, self.pos)
                if not m:
                    raise self.fail("want a key")
                keys.append(m.group())
                self.pos = m.end()
            self.skip(newlines=False)
            if self.peek() != ".":
                return keys
            self.pos += 1

    def value(self) -> Any:
        c = self.peek()
        if c in ('"', "'"):
            return self.string()
        if c == "[":
            return self.array()
        if c == "{":
            return self.inline_table()
        m = re.compile(r"true|false|[+-]?[0-9](?:_?[0-9])*(?![0-9A-Za-z_.:+-])").match(self.text, self.pos)
        if not m:
            raise self.fail("want a string, an integer, a boolean, an array or an inline table")
        self.pos = m.end()
        word = m.group()
        return word == "true" if word in ("true", "false") else int(word.replace("_", ""))

    def string(self) -> str:
        quote = self.peek()
        if self.text.startswith(quote * 3, self.pos):
            raise self.fail("multi-line strings are not supported")
        self.pos += 1
        out = []
        while True:
            c = self.peek()
            if c in ("", "\n", "\r"):
                raise self.fail("unterminated string")
            self.pos += 1
            if c == quote:
                return "".join(out)
            if c == "\\" and quote == '"':
                out.append(self.escape())
            else:
                out.append(c)

    _ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}

    def escape(self) -> str:
        c = self.peek()
        self.pos += 1
        if c in self._ESCAPES:
            return self._ESCAPES[c]
        if c in ("u", "U"):
            width = 4 if c == "u" else 8
            digits = self.text[self.pos : self.pos + width]
            if not re.fullmatch(r"[0-9A-Fa-f]{%d}" % width, digits):
                raise self.fail(f"bad escape \\{c}{digits}")
            self.pos += width
            try:
                return chr(int(digits, 16))
            except (ValueError, OverflowError) as err:
                raise self.fail(f"bad escape \\{c}{digits}") from err
        raise self.fail(f"bad escape \\{c}")

    def array(self) -> List[Any]:
        self.expect("[")
        items = []
        while True:
            self.skip(newlines=True)
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            self.skip(newlines=True)
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise self.fail("want ',' or ']' in an array")

    def inline_table(self) -> Dict[str, Any]:
        self.expect("{")
        table: Dict[str, Any] = {}
        self.skip(newlines=False)
        if self.peek() == "}":
            self.pos += 1
            return table
        while True:
            keys = self.dotted_key()
            if len(keys) != 1:
                raise self.fail("dotted keys in inline tables are not supported")
            self.expect("=")
            self.skip(newlines=False)
            table[keys[0]] = self.value()
            self.skip(newlines=False)
            if self.peek() == "}":
                self.pos += 1
                return table
            self.expect(",")


class Project:
    """The [project] table of pyproject.toml, as the metadata needs it."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        doc = read_toml((root / "pyproject.toml").read_text(encoding="utf-8"))
        project = doc.get("project")
        if not isinstance(project, dict):
            raise TOMLError("pyproject.toml has no [project] table")
        for key in ("name", "version", "description", "requires-python"):
            if not isinstance(project.get(key), str):
                raise TOMLError(f"pyproject.toml: [project] {key} must be a string")
        if project.get("dynamic"):
            raise TOMLError("pyproject.toml: dynamic metadata is not supported")
        self.project = project
        self.name: str = project["name"]
        self.version: str = project["version"]
        # The distribution name in file names (PEP 427, PEP 625).
        self.dist = re.sub(r"[-_.]+", "_", self.name).lower()
        self.package = root / self.dist
        if not (self.package / "__init__.py").is_file():
            raise TOMLError(f"no package directory {self.dist}/ beside pyproject.toml")

    def metadata(self) -> str:
        """METADATA (and the sdist's PKG-INFO), Core Metadata 2.1."""
        p = self.project
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {self.name}",
            f"Version: {self.version}",
            f"Summary: {p['description']}",
        ]
        license_ = p.get("license")
        if isinstance(license_, dict) and isinstance(license_.get("text"), str):
            lines.append(f"License: {license_['text']}")
        lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
        lines.append(f"Requires-Python: {p['requires-python']}")
        lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
        for extra, deps in p.get("optional-dependencies", {}).items():
            lines.append(f"Provides-Extra: {extra}")
            lines += [f'Requires-Dist: {_with_marker(d, extra)}' for d in deps]
        readme = p.get("readme")
        body = ""
        if readme is not None:
            if not isinstance(readme, str) or not readme.endswith(".md"):
                raise TOMLError("pyproject.toml: [project] readme must name a .md file")
            lines.append("Description-Content-Type: text/markdown")
            body = (self.root / readme).read_text(encoding="utf-8")
        return "\n".join(lines) + "\n\n" + body

    def package_files(self) -> Iterator[Tuple[str, Path]]:
        """The package's files (archive name, path), sorted; no bytecode."""
        for path in sorted(self.package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                yield path.relative_to(self.root).as_posix(), path


def _with_marker(requirement: str, extra: str) -> str:
    if ";" in requirement:
        req, marker = requirement.split(";", 1)
        return f'{req.strip()}; ({marker.strip()}) and extra == "{extra}"'
    return f'{requirement}; extra == "{extra}"'


def _epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    return max(int(value), _ZIP_EPOCH) if value.isdigit() else _ZIP_EPOCH


class _Wheel:
    """A wheel being written: each file added with its RECORD line."""

    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records: List[str] = []
        self.date = time.gmtime(_epoch())[:6]

    def add(self, name: str, data: bytes, executable: bool = False) -> None:
        info = zipfile.ZipInfo(name, date_time=self.date)  # type: ignore[arg-type]
        info.external_attr = (0o755 if executable else 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{name},sha256={digest},{len(data)}")

    def close(self, record_name: str) -> None:
        self.records.append(f"{record_name},,")
        data = ("\n".join(self.records) + "\n").encode()
        info = zipfile.ZipInfo(record_name, date_time=self.date)  # type: ignore[arg-type]
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        self.zip.close()


def _dist_info(project: Project) -> Dict[str, bytes]:
    """The files of the .dist-info directory other than RECORD."""
    wheel = "Wheel-Version: 1.0\nGenerator: leaseapi _build/backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return {
        "METADATA": project.metadata().encode("utf-8"),
        "WHEEL": wheel.encode(),
        "top_level.txt": (project.dist + "\n").encode(),
    }


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    project = Project()
    name = f"{project.dist}-{project.version}-py3-none-any.whl"
    info = f"{project.dist}-{project.version}.dist-info"
    wheel = _Wheel(Path(wheel_directory) / name)
    try:
        for archive_name, data in files:
            wheel.add(archive_name, data)
        for file_name, data in _dist_info(project).items():
            wheel.add(f"{info}/{file_name}", data)
        wheel.close(f"{info}/RECORD")
    except BaseException:
        wheel.zip.close()
        (Path(wheel_directory) / name).unlink()
        raise
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    """PEP 517: the wheel, in wheel_directory; returns its file name."""
    return _write_wheel(wheel_directory, [(name, path.read_bytes()) for name, path in Project().package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a wheel whose .pth file puts this directory on sys.path, so
    the installed package is the source being edited."""
    project = Project()
    return _write_wheel(wheel_directory, [(f"__editable__.{project.dist}.pth", (str(project.root) + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """PEP 517: the sdist (.tar.gz) in sdist_directory; returns its file name."""
    project = Project()
    base = f"{project.dist}-{project.version}"
    members: List[Tuple[str, bytes]] = [("PKG-INFO", project.metadata().encode("utf-8"))]
    members += [(name, (project.root / name).read_bytes()) for name in SDIST_FILES]
    members += [(name, path.read_bytes()) for name, path in project.package_files()]
    name = base + ".tar.gz"
    mtime = _epoch()
    # gzip with a fixed mtime and no file name, so the same tree gives the same bytes.
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in sorted(members):
            info = tarfile.TarInfo(f"{base}/{member}")
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    with open(Path(sdist_directory) / name, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=mtime) as gz:
        gz.write(raw.getvalue())
    return name


def _prepare_metadata(metadata_directory: str) -> str:
    project = Project()
    info = Path(metadata_directory) / f"{project.dist}-{project.version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    for file_name, data in _dist_info(project).items():
        (info / file_name).write_bytes(data)
    return info.name


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """PEP 517: the .dist-info directory without building the wheel."""
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """PEP 660: as prepare_metadata_for_build_wheel."""
    return _prepare_metadata(metadata_directory)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """PEP 517: nothing to install before building."""
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []
