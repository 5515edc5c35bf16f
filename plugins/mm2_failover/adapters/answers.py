"""The latest-checkpoints job's answers folder (``latest_checkpoints.parquet`` in a run folder): how it is laid out,
and the one way it is read (every reader of the job's answers goes through :func:`read_table`).

Rules (unit-tested in ``tests/unit/test_answers.py``; the job's side in ``tests/spark/test_state_vs_full_pass.py``):

1. **Full layout** - no manifest: the folder is a plain Parquet dataset of every answer (a full pass, ``--policy
   max``, or a remote output path).
2. **State + delta layout** - a failover that starts from state versions (issue 17) does not rewrite the answers
   the tail left alone: the version's ``answers/`` table already holds them. The folder then holds
   ``answers.manifest.json`` and

   * ``base/<i>/`` - a state version's ``answers/`` files, hard links where the filesystem allows, else copies (the
     run keeps them when the scheduled refresh prunes the version), each for the aliases that version answers for;
   * ``touched/`` - ``(source_alias, key)`` of every key the tail touched (raw key bytes);
   * ``delta/`` - the answers of the touched keys (a touched key whose latest record is a tombstone or unusable has
     none).

   The answers = the base rows of their aliases whose key was not touched, plus every delta row.
3. **Counted** - the manifest holds the number of rows of every part (per alias for a base); a read that finds
   another number fails naming the part (a missing or damaged file never shortens the answers silently).
4. **Not mistaken for a plain dataset** - the manifest sits beside the parts, not under an ``_``-prefixed name, so a
   reader that does not know this layout (pyarrow, Spark) fails on it instead of reading one part as the answers.
5. **Complete only with the job's summary** - the job writes the manifest last and its summary after it; a folder
   without the summary is never read (:func:`mm2_failover.stages.compute_checkpoints.selected_checkpoints`).
6. **In an object store, the summary names the parts** - there the summary is written by the task once the parts
   are in the store (uploaded, or committed by Spark through S3A: :meth:`mm2_failover.adapters.spark.JobSubmission.publish`),
   with each part's size (``output_files``). A reader finds each named part with its size and no other Parquet part
   (:func:`parts_problems`): a part missing or cut short, or one another try left, fails naming it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from mm2_failover.adapters import store
from mm2_failover.adapters.runfolder import RunFolderError, write_json

MANIFEST = "answers.manifest.json"
KEY_COLUMNS = ("source_alias", "key")


class AnswersError(RunFolderError):
    """The answers folder is not whole (a part missing or of another size); the message names the part."""


def is_local(path) -> bool:
    return not store.is_remote(path)


def local_path(path) -> Path:
    return Path(str(path).removeprefix("file://").removeprefix("file:"))


def manifest_of(path) -> dict | None:
    """The state + delta manifest of the answers at ``path`` (rule 2), or None for the full layout (rule 1); the folder
    is local or in the object store (a run folder there: :mod:`mm2_failover.adapters.store`)."""
    m = store.as_path(path) / MANIFEST
    if not m.is_file():
        return None
    try:
        return json.loads(m.read_text())
    except (OSError, ValueError) as e:
        raise AnswersError(
            f"{store.url_of(m)}: cannot read the answers' manifest ({e}): run compute_latest_checkpoints again"
        ) from None


def _read(path, columns=None):
    import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

    key, fs = store.parquet_args(path)
    return pq.read_table(key, columns=columns, filesystem=fs)


def read_table(path, columns: list[str] | None = None):
    """The answers at ``path`` as one pyarrow Table, whatever the layout; ``columns`` that the answers lack (an
    older job's) are left out. Raises :class:`AnswersError` when a part is missing or of another size."""
    import pyarrow as pa  # lazy: heavy (pyarrow)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    m = manifest_of(path)
    if m is None:
        t = _read(path)
        return t.select([c for c in (columns or t.column_names) if c in t.column_names])
    root = store.as_path(path)

    def part(name: str, expected: int | None = None, cols: list[str] | None = None):
        try:
            t = _read(root / name, cols)
        except (OSError, pa.ArrowException) as e:
            raise AnswersError(
                f"{root / name}: cannot read this part of the answers ({e}); run "
                "compute_latest_checkpoints again (it rewrites the folder)"
            ) from None
        if expected is not None and t.num_rows != expected:
            raise AnswersError(
                f"{root / name} holds {t.num_rows} rows, the manifest says {expected}: the answers are "
                "not whole; run compute_latest_checkpoints again (it rewrites the folder)"
            )
        return t

    with _first_file(root / "delta").open("rb") as fh:
        names = [c for c in pq.read_schema(fh).names if c != "key"]
    keep = [c for c in (columns or names) if c in names]
    cols = keep + [c for c in KEY_COLUMNS if c not in keep]
    touched = part("touched", m["touched"])
    delta = part("delta", m["delta"], cols)
    parts = []
    for b in m["bases"]:
        t = part(b["dir"], cols=cols)
        t = t.filter(pc.is_in(t["source_alias"], value_set=pa.array(sorted(b["answers"]), pa.string())))
        got = {v["values"]: v["counts"] for v in pc.value_counts(t["source_alias"]).to_pylist()}
        want = {a: n for a, n in b["answers"].items() if n}
        if got != want:
            raise AnswersError(
                f"{root / b['dir']} (state version {b['version']}) holds {got} answers per alias, the "
                f"manifest says {want}: the answers are not whole; run compute_latest_checkpoints "
                "again (it rewrites the folder)"
            )
        if touched.num_rows:
            t = t.join(touched.select(list(KEY_COLUMNS)), list(KEY_COLUMNS), join_type="left anti")
        parts.append(t)
    parts.append(delta)
    schema = delta.select(keep).schema
    return pa.concat_tables([t.select(keep).cast(schema) for t in parts])


def is_part(name: str) -> bool:
    """A Parquet part of the answers (relative name), not a file of Spark's or a hidden one."""
    return name.endswith(".parquet") and not any(p.startswith((".", "_")) for p in name.split("/"))


def parts_problems(have: dict[str, int], named: dict[str, int]) -> list[str]:
    """Rule 6: what is wrong with the answers' parts found (``have``: relative name -> size) against those the
    summary names, as "<name>: <why>" (empty: they are whole)."""
    bad = [
        f"{n}: missing" if n not in have else f"{n}: {have[n]} bytes, the summary says {size}"
        for n, size in sorted(named.items())
        if have.get(n) != size
    ]
    return bad + [
        f"{n}: not named by the summary (left by another try?)" for n in sorted(have) if is_part(n) and n not in named
    ]


def _first_file(folder):
    for n in store.names(folder):
        if n.endswith(".parquet"):
            return folder / n
    raise AnswersError(
        f"{folder}: no Parquet file in this part of the answers; run compute_latest_checkpoints again "
        "(it rewrites the folder)"
    )


def checkpoint_rows(path, columns: list[str] | None = None) -> list[dict]:
    """The Spark job's answers (either layout; a full one may be any pyarrow-readable URI), as dicts."""
    return read_table(path, columns).to_pylist()


def group_names(path) -> list[tuple[str, str]]:
    """Each (source alias, group) the answers hold, once (their two name columns only)."""
    t = read_table(path, ["source_alias", "group"]).group_by(["source_alias", "group"]).aggregate([])
    return list(zip(t.column("source_alias").to_pylist(), t.column("group").to_pylist()))


def count_groups(path) -> int:
    """How many (source alias, group) the answers hold."""
    return len(group_names(path))


def link_tree(src: Path, dst: Path) -> str:
    """Every Parquet file of ``src`` into ``dst`` (created): hard links, or copies where the filesystem refuses
    them (another device, no links). Returns ``"hard links"`` or ``"copies"`` (the last file's way)."""
    dst.mkdir(parents=True, exist_ok=False)
    how = "hard links"
    for f in sorted(src.iterdir()):
        if not f.is_file() or f.name.startswith((".", "_")):
            continue
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copyfile(f, dst / f.name)
            how = "copies"
    return how


def write_manifest(path, manifest: dict) -> None:
    """The manifest, last (atomic and durable): until it is there the folder is not a state + delta answer."""
    write_json(local_path(path) / MANIFEST, manifest)


def clear(path) -> None:
    """Remove what an earlier (maybe killed) job left at ``path`` (a local folder)."""
    p = local_path(path)
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


# ------------------------------------------------------------------------------------------ which layout (pure)

FULL, DELTA = "full", "state+delta"


def layout_for(
    policy: str, output: str, state_dir: str, used: dict[str, list[str]], versions_by_path: dict[str, dict]
) -> tuple[str, str]:
    """The layout a failover-time job writes (rules 1-2) and why: state + delta when every state version it starts
    from holds its answers for the aliases it answers for, under the latest policy, on local paths."""
    if not used:
        return FULL, "no state version answers for any alias (a full pass)"
    if policy != "latest":
        return FULL, f"--policy {policy}: the state versions hold the answers of the latest policy"
    if not (is_local(output) and is_local(state_dir)):
        return FULL, "the output or the state is not a local (or mounted) path: the answers are written whole"
    for path, aliases in sorted(used.items()):
        v = versions_by_path[path]
        lacking = sorted(a for a in aliases if "answers" not in (v.get("aliases") or {}).get(a, {}))
        if lacking:
            return FULL, (
                f"state version {v['name']} holds no answers for {lacking} (written by an older release; "
                "the next refresh writes them)"
            )
    return DELTA, "only the answers of the keys the tail touched are written; the others are the state version's"
