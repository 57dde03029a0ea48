"""Versioned files for model objects: JSON with a header (kind, schema_version), or numpy
arrays with a JSON header in one ``.npz``; never pickle."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError, SchemaError

SCHEMA_VERSION = 1


def dump_json(kind: str, payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``payload`` under a ``kind``/``schema_version`` header, atomically."""
    target = Path(path)
    doc = {"perflab": kind, "schema_version": SCHEMA_VERSION, **payload}
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False), encoding="utf-8")
    tmp.replace(target)
    return target


def save_arrays(
    path: str | os.PathLike[str],
    arrays: dict[str, npt.NDArray[Any]],
    header: dict[str, Any],
    *,
    compress: bool = True,
) -> Path:
    """Numeric arrays and a JSON ``header`` in one ``.npz``, written aside and renamed, so
    that a reader never sees half a file."""
    target = Path(path)
    text = np.frombuffer(json.dumps(header, allow_nan=False).encode(), np.uint8)
    save: Any = np.savez_compressed if compress else np.savez
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as fh:
        save(fh, header=text, **arrays)
    tmp.replace(target)
    return target


def load_arrays(path: str | os.PathLike[str]) -> tuple[dict[str, npt.NDArray[Any]], Any]:
    """The arrays and the decoded header of a :func:`save_arrays` file (header None when
    there is none). Raises OSError, ValueError, zipfile.BadZipFile or EOFError."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    if "header" not in arrays:
        return arrays, None
    return arrays, json.load(io.BytesIO(arrays.pop("header").tobytes()))


def load_json(kind: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a file written by :func:`dump_json`, checking its kind and version."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SchemaError(f"cannot read: {exc.strerror}", source=source) from None
    return check_header(kind, parse_json(data, source), source)


def parse_json(
    data: bytes,
    source: str,
    *,
    error: type[InputError] = SchemaError,
    invalid: str = "not valid JSON",
) -> Any:
    """Decode UTF-8 JSON; every failure becomes ``error`` naming ``source`` and the position."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error("not UTF-8 text", source=source, position=f"byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise error(
            f"{invalid}: {exc.msg}", source=source, position=f"line {exc.lineno} col {exc.colno}"
        ) from None
    except RecursionError:
        raise error(f"{invalid}: nested too deeply", source=source) from None


def check_header(kind: str, doc: Any, source: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("perflab") != kind:
        found = doc.get("perflab") if isinstance(doc, dict) else type(doc).__name__
        raise SchemaError(f"expected a perflab {kind} file, found {found!r}", source=source)
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise SchemaError(
            f"unsupported schema_version {version!r} (this perflab reads 1..{SCHEMA_VERSION})",
            source=source,
        )
    return doc
