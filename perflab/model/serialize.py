"""Versioned files for model objects: JSON with a header (kind, schema_version), or numpy
arrays with a JSON header in one ``.npz``; never pickle.

The file-level checks every loader shares live here: only regular files are read (a FIFO
would block, ``/dev/zero`` never ends), sizes are bounded, JSON nesting is bounded, and an
``.npz`` member is read only when the caller names it and only after its ``.npy`` header was
checked against the size the archive gives it.

Every save goes through :func:`write_atomic`: a fresh temporary file beside the target,
renamed over it, never following a symbolic link planted in the way: not at the temporary
file, not at the target when it points out of its folder, and not at a folder on the way
that leads out of the folder the save starts from (see :func:`write_destination`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError, SchemaError

SCHEMA_VERSION = 1
CACHE_ENV = "PERFLAB_CACHE_DIR"
MAX_JSON_BYTES = 1 << 30  # a saved JSON result larger than this is not one perflab wrote
MAX_DEPTH = 64  # nesting of saved JSON: perflab writes a handful of levels
DEFLATE_MAX_RATIO = 1032  # deflate cannot expand data more than this (RFC 1951)
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def cache_dir() -> Path:
    """Where perflab keeps what it can rebuild (compiled kernels, measured ceilings):
    ``$PERFLAB_CACHE_DIR``, else ``~/.cache/perflab``."""
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path.home() / ".cache" / "perflab"


def dump_json(kind: str, payload: Mapping[str, object], path: str | os.PathLike[str]) -> Path:
    """Write ``payload`` under a ``kind``/``schema_version`` header, atomically
    (:func:`write_atomic`)."""
    doc = {"perflab": kind, "schema_version": SCHEMA_VERSION, **payload}
    return write_text(path, json.dumps(doc, indent=1, allow_nan=False))


def save_arrays(
    path: str | os.PathLike[str],
    arrays: Mapping[str, npt.NDArray[np.generic]],
    header: Mapping[str, object],
    *,
    compress: bool = True,
) -> Path:
    """Numeric arrays and a JSON ``header`` in one ``.npz``, written aside and renamed
    (:func:`write_atomic`), so that a reader never sees half a file."""
    text = np.frombuffer(json.dumps(header, allow_nan=False).encode(), np.uint8)
    save: Callable[..., None] = np.savez_compressed if compress else np.savez
    return write_atomic(path, lambda fh: save(fh, header=text, **arrays))


# -- writing files -----------------------------------------------------------------------------


class WriteError(InputError, OSError):
    """A file perflab cannot or will not write. Also an ``OSError``, so that code which
    handles a failed write (a full disk, a read-only cache) handles this one too."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message, source=source)
        self.strerror = message  # what a handler of OSError shows beside the path it knows


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """``Path(path).write_text(text)`` through :func:`write_atomic`."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda fh: fh.write(data))


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Write a file through ``write(fh)``: into a new temporary file beside it, renamed over
    it once complete, so that a reader never sees half a file.

    The temporary file is created by :func:`tempfile.mkstemp` (a fresh name, ``O_EXCL``), so a
    symbolic link planted where a temporary file might go is never followed; it is removed
    whatever fails. A ``path`` that is itself a symbolic link is written through only when it
    points into its own folder. Every failure is a :class:`WriteError` naming ``path``.
    """
    target = Path(path)
    final = write_destination(target)
    try:
        fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if hasattr(os, "fchmod"):  # mkstemp's 0600, back to what open() would give
                os.fchmod(fh.fileno(), _new_file_mode())
            write(fh)
        os.replace(name, final)
    except OSError as exc:
        _remove(name)
        raise _cannot_write(target, exc) from None
    except BaseException:
        _remove(name)
        raise
    return target


def write_destination(target: Path) -> Path:
    """Where writing ``target`` puts the file: ``target``, or where it points when it is a
    symbolic link into its own folder. A link out of its folder (or one that loops) is a
    :class:`WriteError`: a link planted in a repository must not make a save overwrite a
    file elsewhere. So is a folder on the way that is a link out of the folder the save
    starts from (:func:`_check_folders`)."""
    _check_folders(target)
    final = target
    if target.is_symlink():
        try:
            folder = target.parent.resolve()
            final = target.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a loop, before Python 3.13
            raise WriteError(
                "is a symbolic link that cannot be followed (a loop?); perflab does not write "
                "through it",
                source=str(target),
            ) from None
        if final.parent != folder:
            raise WriteError(
                f"is a symbolic link to {final}, outside its folder; perflab does not write "
                "through it (remove the link, or save elsewhere)",
                source=str(target),
            )
    if final.is_dir():
        raise WriteError("is a directory, not a file perflab can write", source=str(target))
    return final


def _check_folders(target: Path) -> None:
    """Refuse a save whose folders, from where it starts to the file, pass through a
    symbolic link that leads out of that start: a ``.perflab`` or ``results`` link
    committed in a repository must not send a result elsewhere. The start is perflab's
    cache folder for a file in it, else the current folder for a file under it (a relative
    path, the notebook's ``.perflab``): a repository's links live there. A path outside
    both names each of its folders itself, and is written as named; so is the folder a
    refused link points to, which the message gives."""
    path, start = _save_start(target)
    if start is None:
        return
    here, real_start = start, _resolved(start, target)
    for part in path.parent.relative_to(start).parts:
        step = here / part
        if part == "..":
            here = _resolved(step, target)
            if not _inside(here, real_start):
                return  # above the start: the folders from here on were named by the path
            continue
        if step.is_symlink():
            points_to = _resolved(step, target)
            if not _inside(points_to, real_start):
                raise WriteError(
                    f"the folder {step} is a symbolic link to {points_to}, outside {start}; "
                    "perflab does not save through it (give the folder it points to, to "
                    "save there)",
                    source=str(target),
                )
            here = points_to
        else:
            here = step


def _save_start(target: Path) -> tuple[Path, Path | None]:
    """``target`` made absolute ('..' kept as written, for the walk) and where its save
    starts (see :func:`_check_folders`): None when it names a place outside the cache and
    the current folder."""
    try:
        here = Path.cwd()
    except OSError:  # the current folder was removed: a relative path cannot be written
        return target, None
    path = here / target
    for start in (here / cache_dir(), here):
        if path.parent == start or start in path.parent.parents:
            return path, start
    return path, None


def _resolved(path: Path, target: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a loop, before Python 3.13
        raise WriteError(
            f"the folder {path} is a symbolic link that cannot be followed (a loop?); perflab "
            "does not save through it",
            source=str(target),
        ) from None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _cannot_write(target: Path, exc: OSError) -> WriteError:
    if isinstance(exc, WriteError):
        return exc
    reason = str(exc.strerror or exc)
    error = WriteError(f"cannot write: {reason}", source=str(target))
    error.strerror = reason
    return error


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


def _new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0o666 less the process's umask."""
    try:  # Linux says it without changing it (os.umask can only set it, for every thread)
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


# -- reading files -------------------------------------------------------------------------


def open_regular(path: str | os.PathLike[str], *, error: type[InputError] = InputError) -> BinaryIO:
    """``open(path, "rb")`` for regular files only; anything else (missing, a directory, a
    FIFO, a device) is ``error`` naming the file. Opened without blocking, so that a FIFO
    with no writer is refused instead of waiting forever."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise error("no such file", source=source) from None
    except IsADirectoryError:
        raise error("is a directory, not a file", source=source) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    try:
        _check_regular(os.fstat(fd).st_mode, source, error)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_size(path: str | os.PathLike[str], *, error: type[InputError] = InputError) -> int:
    """The size of a regular file; ``error`` (naming it) for anything else."""
    source = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error("no such file", source=source) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    _check_regular(info.st_mode, source, error)
    return info.st_size


def _check_regular(mode: int, source: str, error: type[InputError]) -> None:
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
    raise error(f"is {what}, not a file perflab can read", source=source)


def read_limited(
    path: str | os.PathLike[str], limit: int, *, error: type[InputError] = InputError
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes."""
    source = str(path)
    with open_regular(path, error=error) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    if len(data) > limit:
        raise error(f"larger than {limit >> 20} MiB: not a file perflab wrote", source=source)
    return data


# -- .npz --------------------------------------------------------------------------------------


def load_arrays(
    path: str | os.PathLike[str],
    names: Iterable[str] | None = None,
    *,
    error: type[InputError] = SchemaError,
) -> tuple[dict[str, npt.NDArray[Any]], Any]:
    """The arrays ``names`` (every member when None) and the decoded header of a
    :func:`save_arrays` file (header None when there is none). Members not named are never
    read; each one read must be a plain numeric ``.npy`` whose header agrees with its size in
    the archive. Every failure is ``error`` naming the file and the member."""
    source = str(path)
    with open_regular(path, error=error) as fh:
        try:
            with zipfile.ZipFile(fh) as archive:
                members = {
                    info.filename[:-4]: info
                    for info in archive.infolist()
                    if info.filename.endswith(".npy")
                }
                if names is None:
                    wanted = list(members)
                elif "header" not in members:
                    return {}, None  # not a perflab file: the caller says so
                else:
                    wanted = ["header", *names]
                arrays = {}
                for name in wanted:
                    if name not in members:
                        raise error(f"damaged file: no array {name!r}", source=source)
                    arrays[name] = _read_member(archive, members[name], source, error)
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            EOFError,
            OSError,
            NotImplementedError,  # a zip version or feature that zipfile lacks
            RuntimeError,
            ValueError,
        ) as exc:
            raise error(f"not a perflab .npz file: {exc}", source=source) from None
    if "header" not in arrays:
        return arrays, None
    header = arrays.pop("header")
    if header.dtype != np.uint8:
        raise error("damaged file: the header is not text", source=source)
    return arrays, parse_json(header.tobytes(), source, error=error, invalid="unreadable header")


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, error: type[InputError]
) -> npt.NDArray[np.generic]:
    where = f"member {info.filename}"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 1:
        raise error("damaged file: unsupported compression", source=source, position=where)
    limit = info.compress_size * (
        1 if info.compress_type == zipfile.ZIP_STORED else DEFLATE_MAX_RATIO
    )
    if info.file_size > limit + 4096:
        raise error(
            "damaged file: a member claims more than it holds", source=source, position=where
        )
    try:
        with archive.open(info) as member:
            read_header = _NPY_HEADERS.get(np.lib.format.read_magic(member))
            if read_header is None:
                raise error("damaged file: unknown .npy version", source=source, position=where)
            shape, _, dtype = read_header(member, max_header_size=10_000)
            header_size = member.tell()
            count = math.prod(shape)
            if dtype.hasobject or dtype.kind not in "biuf" or len(shape) != 1:
                raise error("damaged file: not a numeric column", source=source, position=where)
            if header_size + count * dtype.itemsize != info.file_size:
                raise error(
                    f"damaged file: the array claims {count} values that the member does not hold",
                    source=source,
                    position=where,
                )
            values = np.empty(count, dtype=dtype)
            got = _read_into(member, values.view(np.uint8).data)
    except (ValueError, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        raise error(f"damaged file: {exc}", source=source, position=where) from None
    if got != values.nbytes:
        raise error("damaged file: truncated array", source=source, position=where)
    return values


def _read_into(member: Any, view: memoryview) -> int:
    """Fill ``view`` from ``member`` (straight into the array: no second copy); bytes read."""
    got = 0
    while got < len(view):
        n = member.readinto(view[got:])
        if not n:
            break
        got += n
    return got


# -- JSON --------------------------------------------------------------------------------------


def load_json(kind: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a file written by :func:`dump_json`, checking its kind and version."""
    source = str(path)
    data = read_limited(path, MAX_JSON_BYTES, error=SchemaError)
    return check_header(kind, parse_json(data, source), source)


def parse_json(
    data: bytes,
    source: str,
    *,
    error: type[InputError] = SchemaError,
    invalid: str = "not valid JSON",
) -> Any:
    """Decode UTF-8 JSON (no NaN or Infinity, at most MAX_DEPTH levels deep); every failure
    becomes ``error`` naming ``source`` and the position."""
    # (a literal beyond float64, 1e400, becomes inf here: the loaders of each kind check
    # their numeric fields, naming the field)
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except _NonFinite as exc:
        raise error(f"{invalid}: {exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise error("not UTF-8 text", source=source, position=f"byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise error(
            f"{invalid}: {exc.msg}", source=source, position=f"line {exc.lineno} col {exc.colno}"
        ) from None
    except RecursionError:
        raise error(f"{invalid}: nested too deeply", source=source) from None
    if nesting_depth(doc) > MAX_DEPTH:
        raise error(f"{invalid}: nested more than {MAX_DEPTH} levels deep", source=source)
    return doc


class _NonFinite(ValueError):
    pass


def _no_constant(token: str) -> NoReturn:
    raise _NonFinite(f"{token} is not a JSON number")


def nesting_depth(doc: object) -> int:
    """How many lists/objects deep ``doc`` goes (without recursion: any depth is safe)."""
    deepest = 0
    stack = [(doc, 1)] if isinstance(doc, (list, dict)) else []
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        items = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in items if isinstance(v, (list, dict)))
    return deepest


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, so that it can be written
    as standard JSON (device tables sometimes hold inf)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def check_header(kind: str, doc: object, source: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("perflab") != kind:
        found = doc.get("perflab") if isinstance(doc, dict) else type(doc).__name__
        raise SchemaError(f"expected a perflab {kind} file, found {found!r}", source=source)
    version = doc.get("schema_version")
    # bool is an int in Python: true must not pass for version 1
    if type(version) is not int or version > SCHEMA_VERSION or version < 1:
        raise SchemaError(
            f"unsupported schema_version {version!r} (this perflab reads 1..{SCHEMA_VERSION})",
            source=source,
        )
    return doc
