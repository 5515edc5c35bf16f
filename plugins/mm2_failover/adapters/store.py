"""Where the artifacts live: a local folder or an object store, decided here and nowhere else (issue 34).

``MM2_FAILOVER_ARTIFACTS`` (run folders, the readiness history, rollback journals) and ``MM2_FAILOVER_ARCHIVE``
(MM2's offset syncs and checkpoints, archived) are each a plain path (the default, ``make demo``) or a URL that
fsspec knows: ``s3://bucket/prefix`` (s3fs; credentials and endpoint from the standard AWS variables:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for an S3-compatible server...), ``gs://``,
``file://``. Every reader and writer gets its path from :func:`as_path` and writes through :func:`write_bytes` /
:func:`create`, so the same code runs on both; what a store cannot do (rename, fsync, flock) is never asked of it.

The rules (``tests/unit/test_store.py``, and on a real S3 server in ``tests/integration/test_object_store.py``):

1. **One location, two kinds.** A plain path or ``file://`` is a local :class:`pathlib.Path`; any other scheme is a
   :class:`upath.UPath` over fsspec, whose API is pathlib's (``/``, ``read_bytes``, ``exists``, ``iterdir``).
2. **Whole objects.** :func:`write_bytes` leaves the old content or the new, never a part: locally a temporary file,
   fsync, rename, fsync of the folder; in a store one PUT (S3 and GCS make an object visible whole or not at all).
3. **Immutable first, the pointer last.** A folder whose files are read as one (an answers folder, a state version, an
   archive's files) is written file by file and then a manifest naming them with their sizes; readers read only what a
   manifest names and check the sizes (:func:`verify_sizes`), so a writer that died half-way left nothing a reader
   takes for whole.
4. **Exclusive create.** :func:`create` writes only if nothing is there and says whether it did: locally a hard link
   of a fully written temporary file (atomic, refused when the name exists); in a store a conditional PUT
   (``If-None-Match: *``; S3, S3Proxy, GCS). Two writers racing for one name: exactly one wins.
5. **A folder is a prefix.** In a store there are no folders: ``mkdir`` is never needed, a "folder" exists when an
   object is under it, and :func:`remove_tree` removes the objects under a prefix.
"""

from __future__ import annotations

import io
import os
import shutil
import stat as stat_
import uuid
from pathlib import Path
from typing import Any

LOCAL_SCHEMES = ("", "file", "local")


class StoreError(OSError):
    """The store refused or failed an operation; the message names the object and what to check."""


def scheme_of(url: Any) -> str:
    s = str(url)
    return s.split("://", 1)[0].lower() if "://" in s else ""


def is_remote(path: Any) -> bool:
    """Rule 1: anything but a plain path or ``file://`` lives in an object store."""
    return _is_upath_remote(as_path(path))


def _is_upath_remote(path: Any) -> bool:
    proto = getattr(path, "protocol", None)
    return isinstance(proto, str) and proto not in LOCAL_SCHEMES


def as_path(url: Any):
    """Rule 1: ``url`` as a local Path or a UPath (idempotent: a Path or a UPath is returned as it is)."""
    if isinstance(url, Path) and not _is_upath_remote(url):
        return url
    if _is_upath_remote(url):
        return url
    s = str(url)
    if scheme_of(s) in LOCAL_SCHEMES:
        return Path(s.split("://", 1)[1] if "://" in s else s)
    from upath import UPath  # lazy: optional (upath)

    # no listing cache: fsspec's would keep a folder's listing for the life of the process, and a writer or reader
    # must see another host's objects at once (an archive's next manifest generation, a run's files)
    return UPath(s, use_listings_cache=False)


def url_of(path: Any) -> str:
    """The path as the string a user wrote (``s3://bucket/key`` or ``/a/b``): for messages and for other processes."""
    if _is_upath_remote(path):
        return f"{path.protocol}://{path.path}"
    return str(path)


def fsync_path(path: Path) -> None:
    """Flush a local file, or a folder's entries, to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_write(path: Path, data: bytes, suffix: str = ".tmp") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + suffix)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_bytes(path: Any, data: bytes) -> None:
    """Rule 2: ``data`` at ``path`` whole (a crash leaves the old content or the new one, never a part)."""
    p = as_path(path)
    if not _is_upath_remote(p):
        tmp = _tmp_write(p, data)
        os.replace(tmp, p)
        fsync_path(p.parent)
        return
    try:
        p.fs.pipe_file(p.path, data)
    except OSError as e:
        raise StoreError(
            f"cannot write {url_of(p)} ({e}): check the store's credentials (AWS_* variables) and that "
            "the bucket exists and allows PutObject"
        ) from None


def create(path: Any, data: bytes) -> bool:
    """Rule 4: write ``data`` at ``path`` only if nothing is there; True if this call wrote it."""
    p = as_path(path)
    if not _is_upath_remote(p):
        tmp = _tmp_write(p, data, f".{uuid.uuid4().hex}.tmp")  # racing creators (processes, threads): each its own
        try:
            os.link(tmp, p)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        fsync_path(p.parent)
        return True
    try:
        p.fs.pipe_file(p.path, data, mode="create")
        return True
    except FileExistsError:
        return False
    except OSError as e:
        said = str(e).lower()
        # 412 Precondition Failed: the name is taken; AWS answers 409 ConditionalRequestConflict to the loser of two
        # conditional writes in flight at once - either way another writer has it
        if (
            "precondition" in said
            or "conditionalrequestconflict" in said
            or getattr(e, "errno", None) == 22
            and p.fs.exists(p.path)
        ):
            return False
        raise StoreError(
            f"cannot create {url_of(p)} ({e}): the store must support conditional writes "
            "(If-None-Match); check its credentials and the bucket"
        ) from None


def read_bytes(path: Any) -> bytes:
    return as_path(path).read_bytes()


def exists(path: Any) -> bool:
    return as_path(path).exists()


def listing(folder: Any) -> dict[str, int]:
    """Every object under ``folder`` (recursively): relative name -> size; {} when there is none."""
    p = as_path(folder)
    if not _is_upath_remote(p):
        if not p.is_dir():
            return {}
        return {f.relative_to(p).as_posix(): f.stat().st_size for f in sorted(p.rglob("*")) if f.is_file()}
    base = p.path.rstrip("/")
    try:
        found = p.fs.find(base, detail=True)
    except FileNotFoundError:
        return {}
    return {
        k[len(base) + 1 :]: int(v.get("size") or 0)
        for k, v in sorted(found.items())
        if v.get("type") != "directory" and k.startswith(base + "/")
    }


def names(folder: Any) -> list[str]:
    """The immediate children's names of ``folder`` (files and sub-folders), sorted; [] when there is none."""
    p = as_path(folder)
    if not _is_upath_remote(p):
        return sorted(c.name for c in p.iterdir()) if p.is_dir() else []
    try:
        return sorted(
            {
                e.rstrip("/").rsplit("/", 1)[-1]
                for e in p.fs.ls(p.path.rstrip("/"), detail=False)
                if e.rstrip("/") != p.path.rstrip("/")
            }
        )
    except FileNotFoundError:
        return []


#: the keys of an fsspec listing's entry that say when the object was last written, in the order upath's
#: ``stat().st_mtime`` reads them
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "timeModified", "modificationTime", "modified_at", "modify")


def files_in_subfolders(folder: Any, wanted: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Which of the ``wanted`` file names each immediate sub-folder of ``folder`` holds, with each one's modification
    time (seconds since the epoch): sub-folder name -> {file name: mtime}, a sub-folder without any of them mapped to
    {} where the listing shows it. In a store, a listing of ``folder`` and one of each sub-folder (fsspec's
    ``find``, two levels deep) instead of requests per name; a file directly in ``folder`` is no sub-folder and
    nothing is looked for inside it (S3Proxy answered each name asked for below a file after 5-11 s, s3fs retrying
    its errors). {} when ``folder`` does not exist."""
    p = as_path(folder)
    if not _is_upath_remote(p):
        if not p.is_dir():
            return {}
        out: dict[str, dict[str, float]] = {}
        for sub in p.iterdir():
            if not sub.is_dir():
                continue
            found = out[sub.name] = {}
            for name in wanted:
                try:
                    st = (sub / name).stat()
                except OSError:
                    continue
                if stat_.S_ISREG(st.st_mode):
                    found[name] = st.st_mtime
        return out
    base = p.path.rstrip("/")
    try:
        listed = p.fs.find(base, maxdepth=2, detail=True)
    except FileNotFoundError:
        return {}
    out = {}
    for key, info in sorted(listed.items()):
        rel = key[len(base) + 1 :] if key.startswith(base + "/") else ""
        if rel.count("/") != 1 or info.get("type") == "directory":
            continue
        sub, name = rel.split("/")
        found = out.setdefault(sub, {})
        if name in wanted:
            found[name] = _listed_mtime(info, p / sub / name)
    return out


def _listed_mtime(info: dict, path) -> float:
    """The modification time an fsspec listing's entry gives (a datetime, a number or an ISO text), or, where it
    gives none, the object's own (one more request)."""
    from datetime import datetime  # lazy: only for an object store's listing

    for key in _MTIME_KEYS:
        v = info.get(key)
        if isinstance(v, datetime):
            return v.timestamp()
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str):
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return path.stat().st_mtime


def verify_sizes(folder: Any, sizes: dict[str, int]) -> list[str]:
    """Rule 3: what is wrong with the files a manifest names (missing, or another size), as "<name>: <why>"."""
    have = listing(folder)
    bad = []
    for name, size in sorted(sizes.items()):
        if name not in have:
            bad.append(f"{name}: missing")
        elif have[name] != size:
            bad.append(f"{name}: {have[name]} bytes, the manifest says {size}")
    return bad


def upload_tree(local: Path, dest: Any, skip_hidden: bool = True, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """Every file under the local folder ``local`` to ``dest`` (a store prefix or a local folder), each whole
    (rule 2), but ``skip`` (relative names: the manifest the caller writes after them, rule 3); returns relative
    name -> size."""
    out: dict[str, int] = {}
    for f in sorted(Path(local).rglob("*")):
        rel = f.relative_to(local)
        if (
            not f.is_file()
            or (skip_hidden and any(part.startswith((".", "_")) for part in rel.parts))
            or rel.as_posix() in skip
        ):
            continue
        data = f.read_bytes()
        write_bytes(as_path(dest) / rel.as_posix(), data)
        out[rel.as_posix()] = len(data)
    return out


def download_tree(src: Any, local: Path, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """The objects under ``src`` (only ``sizes``' names when given) into the local folder ``local``."""
    p = as_path(src)
    want = sizes if sizes is not None else listing(p)
    got = {}
    for rel in sorted(want):
        data = (p / rel).read_bytes()
        out = Path(local) / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        got[rel] = len(data)
    return got


def remove_tree(path: Any) -> None:
    """Rule 5: the folder (or prefix) and everything under it; nothing there is not an error."""
    p = as_path(path)
    if not _is_upath_remote(p):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
        return
    try:
        p.fs.rm(p.path.rstrip("/"), recursive=True)
    except FileNotFoundError:
        pass


def parquet_args(path: Any) -> tuple[str, Any]:
    """``(path, filesystem)`` for pyarrow's readers: the local path and None, or the store's key and its fsspec
    filesystem (pyarrow reads through it)."""
    p = as_path(path)
    if not _is_upath_remote(p):
        return str(p), None
    return p.path, p.fs


def parquet_bytes(table) -> bytes:
    """A pyarrow Table as the bytes of a zstd Parquet file (then written whole by :func:`write_bytes`)."""
    import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()
