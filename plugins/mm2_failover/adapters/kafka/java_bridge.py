"""The bridge to Kafka's Java client: the helper ``jvm/KafkaOffsets.java`` (:data:`JAVA_HELPER`), compiled once per
source, classpath and JDK (:func:`compiled_java`) and run as a subprocess with a cluster's settings translated to the
Java client's in a private file (:func:`java_offsets_program`, :func:`run_java_offsets`). Its input and output are
lines of tab-separated, base64-encoded fields (:func:`unb64` decodes one).

Through it: commits whose metadata must be written byte for byte (:func:`commit_with_java`), and the commits and
states of more than :data:`JAVA_BULK_GROUPS` groups in one JVM (:func:`read_with_java`, :func:`describe_with_java`).
:mod:`fenced` drives the helper's long-lived ``fenced`` mode through :func:`java_offsets_program`.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import logging
import os
import shutil
import subprocess
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

from mm2_failover.adapters.config import java_kafka_classpath
from mm2_failover.adapters.java_client import java_client_options, java_system_properties
from mm2_failover.adapters.kafka.groups import GroupState, Member
from mm2_failover.adapters.kafka.kafka_errors import (
    JavaError,
    KafkaConfigError,
    KafkaUnavailable,
    RecordedErrors,
    classify,
)
from mm2_failover.adapters.runfolder import durable_rename, private_dir
from mm2_failover.rules.acls import phrase
from mm2_failover.rules.values import TP, Commit

log = logging.getLogger(__name__)

#: the Java helper's source, in the package's jvm/ folder (compiled once per source, classpath and JDK)
JAVA_HELPER = Path(__file__).resolve().parents[2] / "jvm" / "KafkaOffsets.java"

# more groups than this: their commits are read, and their states described, by Kafka's Java client in one JVM (see
# Cluster.commits_many and Cluster.describe_groups, which look it up here at every call)
JAVA_BULK_GROUPS = 500


class ClusterView(Protocol):
    """What the bridge reads of a cluster: a :class:`~mm2_failover.adapters.kafka.cluster.Cluster` (not imported
    here: that module imports this one)."""

    name: str
    conf: dict
    timeout: float
    errors: RecordedErrors


def _java_properties(d: dict) -> str:
    """A ``java.util.Properties`` file's text for ``d`` (keys and values escaped as Properties.load reads them)."""

    def esc(s: str, key: bool) -> str:
        out = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        if key:
            out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
        elif out.startswith(" "):
            out = "\\" + out
        return out

    return "".join(f"{esc(str(k), True)}={esc(str(v), False)}\n" for k, v in d.items())


def _b64(x) -> str:
    return base64.b64encode(str(x).encode()).decode()


def unb64(x: str) -> str:
    return base64.b64decode(x).decode()


JAVA_WINDOW = 1000  # groups per window of the Java helper (KafkaOffsets.WINDOW)


def java_call_timeout(timeout_s: float, groups: int) -> float:
    """The Java helper's process timeout: its own deadline (one timeout, and one more per window of groups: a
    stalled cluster costs that, not one timeout per group) plus a minute to start the JVM and compile the helper."""
    return 60 + timeout_s * (1 + -(-max(0, groups) // JAVA_WINDOW))


def compiled_java(src: Path, classpath: str, cache: Path) -> Path | None:
    """A folder holding ``src`` compiled by ``javac`` (its classes, and the same in ``<name>.jar``), made once per
    source, classpath and JDK under ``cache`` (this user's private folder): running a one-file program from source
    compiles it in the JVM on every start, 1.2 s of each call on this project's 2-core machine, and a failover at
    thousands of groups calls the helper six times (capture, the gate, the plan, the live diff, the backup, verify).
    None where there is no ``javac`` or it fails (a JRE): the caller then runs the source, as before."""
    javac = shutil.which("javac")
    if not javac:
        return None
    key = hashlib.sha256(
        b"\0".join([src.read_bytes(), classpath.encode(), os.path.realpath(javac).encode(), b"jar"])
    ).hexdigest()[:20]
    final = cache / f"jvm-{src.stem}-{key}"
    if (final / f"{src.stem}.jar").is_file():
        return final
    tmp = cache / f".jvm-{src.stem}-{key}-{uuid.uuid4().hex}"
    try:
        r = subprocess.run(
            [javac, "-nowarn", "-d", str(tmp), "-cp", classpath, str(src)], capture_output=True, text=True, timeout=120
        )
        if r.returncode or not (tmp / f"{src.stem}.class").is_file():
            log.warning(
                "javac could not compile %s (exit %s: %s): running it from source",
                src.name,
                r.returncode,
                (r.stderr or "").strip()[-300:],
            )
            return None
        with zipfile.ZipFile(tmp / f"{src.stem}.jar", "w") as jar:  # class data sharing needs a jar, not a folder
            for c in sorted(tmp.glob("*.class")):
                jar.write(c, c.name)
        try:
            os.rename(tmp, final)  # whole or not at all; a process that won the race made the same bytes
        except OSError:
            if not (final / f"{src.stem}.jar").is_file():
                raise
        return final
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("could not compile %s once for all calls (%s): running it from source", src.name, e)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: the JVM's class-data-sharing options: Java 11 and 12 have no dynamic archive (the -XX flags are ignored there, and
#: ``cds*`` names only the ``cds`` tag they have), and the archive's messages go to stderr at error level only (the
#: helper's stdout is its answer; writing an archive warns once per old class)
SHARING_QUIET = ("-XX:+IgnoreUnrecognizedVMOptions", "-Xlog:disable", "-Xlog:all=warning,cds*=error:stderr")

#: the helper's modes whose JVMs use the class archive: the ones that only read, so a JVM that failed with it can be
#: run again without it (a commit is never sent twice, and the long-lived ``fenced`` writer never depends on it)
SHARED_MODES = ("read", "describe")

#: what a JVM prints when it could not start or crashed (with a class archive it cannot write or map, e.g. a
#: truncated one: Java 17 dies of SIGBUS mapping it)
JVM_FAILED = ("Error occurred during initialization of VM", "A fatal error has been detected by the Java Runtime")

#: the exits of a JVM that crashed (SIGABRT, SIGBUS, SIGSEGV, and SIGABRT through a shell): never a kill (-9)
JVM_CRASHED = (-6, -7, -11, 134)


@dataclasses.dataclass(frozen=True)
class ClassSharing:
    """The helper's classes as a JVM left them (AppCDS, a dynamic archive: Java 13+), mapped by the next JVMs instead of
    loading and verifying Kafka's client again: 1.31 s -> 1.03 s for a read of 10,000 groups' commits on this project's
    2-core machine (bench/java_helper_bench.py). One archive per compiled helper and ``java`` (:func:`class_sharing`),
    for the modes that only read (:data:`SHARED_MODES`). The first such call that finds none writes it
    (:attr:`learning`: kept only when that call succeeded, installed durably, whole); a JVM that fails or crashes
    with the archive's options (:meth:`refuse`: the archive deleted, ``off`` written, never tried again with this
    ``java``) is run again without, and the archive is refused when that run answers. A stale archive (another JDK,
    a changed jar) is ignored by the JVM."""

    archive: Path
    off: Path
    learning: Path | None = None

    def options(self) -> list[str]:
        if self.learning is not None:
            return [*SHARING_QUIET, f"-XX:ArchiveClassesAtExit={self.learning}"]
        if self.archive.is_file():
            return [*SHARING_QUIET, f"-XX:SharedArchiveFile={self.archive}"]
        return []

    def done(self, ok: bool) -> None:
        """After the call: the archive it wrote kept (``ok``) or dropped."""
        if self.learning is None:
            return
        try:
            if ok and self.learning.is_file() and self.learning.stat().st_size:
                durable_rename(self.learning, self.archive)
        except OSError as e:
            log.warning(
                "could not keep the Java helper's class archive %s (%s): the next call writes one", self.archive, e
            )
        finally:
            self.learning.unlink(missing_ok=True)

    def refuse(self, why: str) -> None:
        """A JVM failed or crashed with the archive's options: the archive deleted, and never tried again with this
        ``java`` (delete ``off`` to try again)."""
        log.warning("the JVM failed with its class archive (%s): the Java helper runs without it from now on", why)
        with contextlib.suppress(OSError):
            self.off.write_text(why[-500:] + "\n")
        with contextlib.suppress(OSError):
            self.archive.unlink(missing_ok=True)


LEARNING_LEFT_S = 600  # a learning file older than this was left by a JVM whose caller died: removed


def class_sharing(compiled: Path | None, java: str, learn: bool) -> ClassSharing | None:
    """The :class:`ClassSharing` of the helper compiled in ``compiled`` run by ``java`` (None: run from source, or
    refused before). ``learn``: a call that may write the archive when there is none yet."""
    if compiled is None:
        return None
    key = hashlib.sha256(os.path.realpath(java).encode()).hexdigest()[:12]
    archive, off = compiled / f"classes-{key}.jsa", compiled / f"classes-{key}.off"
    if off.exists():
        return None
    learning = None
    if learn:
        for left in compiled.glob(f".classes-{key}-*.jsa"):  # written by a JVM whose caller was killed
            with contextlib.suppress(OSError):
                if time.time() - left.stat().st_mtime > LEARNING_LEFT_S:
                    left.unlink()
        if not archive.is_file():
            learning = compiled / f".classes-{key}-{uuid.uuid4().hex}.jsa"
    return ClassSharing(archive, off, learning)


class JavaProgram(NamedTuple):
    """:func:`java_offsets_program`'s command (without its mode), its settings file, and its class archive (None:
    the JVM runs without one)."""

    command: list[str]
    props: Path
    sharing: ClassSharing | None


@contextlib.contextmanager
def java_offsets_program(
    cluster: ClusterView, what: str, extra: dict[str, object] | None = None, share: bool = False
) -> Iterator[JavaProgram]:
    """``jvm/KafkaOffsets.java``'s command (compiled once, or run from source: Java 11+), without its mode, and the
    cluster's settings translated to the Java client's, plus ``extra`` Java client settings, in a 0600 file of this
    user's private folder, removed when the block ends (the program reads it at its start). ``what``: the
    operation, for the error of a host without Java. ``share``: for a mode of :data:`SHARED_MODES`, the command
    maps the helper's class archive, or writes it where there is none yet (:class:`ClassSharing`, in the program
    yielded, to tell how the call went). Without it (``commit``, ``fenced``) the JVM runs without the archive."""

    java = shutil.which("java")
    if not java:
        raise KafkaConfigError(f"{cluster.name}: {what} go through Kafka's Java client: this host needs Java 11+")
    d = private_dir()
    props = d / f"offsets-{uuid.uuid4().hex}.properties"
    try:
        fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(
                _java_properties(
                    {
                        **java_client_options(cluster.conf),
                        "mm2.failover.timeout.ms": int(cluster.timeout * 1000),
                        **(extra or {}),
                    }
                )
            )
        src = JAVA_HELPER
        compiled = compiled_java(src, java_kafka_classpath(), d)
        program = (
            ["-cp", f"{compiled / (src.stem + '.jar')}{os.pathsep}{java_kafka_classpath()}", src.stem]
            if compiled
            else ["-cp", java_kafka_classpath(), str(src)]
        )
        jvm = [f"-D{k}={v}" for k, v in sorted(java_system_properties(cluster.conf).items())]
        shared = class_sharing(compiled, java, learn=True) if share else None
        cds = shared.options() if shared else []
        # a JVM crash's reports: here, not in the worker's working directory
        crash = [
            f"-XX:ErrorFile={d / 'java-helper-hs_err-%p.log'}",
            f"-XX:ReplayDataFile={d / 'java-helper-replay-%p.log'}",
        ]
        yield JavaProgram([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", *crash, *cds, *jvm, *program], props, shared)
    finally:
        props.unlink(missing_ok=True)


def run_java_offsets(
    cluster: ClusterView, mode: str, lines: list[str], items: int, decode: bool = True, *, share: bool = True
) -> list[list[str]]:
    """Run ``jvm/KafkaOffsets.java`` in ``mode`` (commit | read | describe) on ``lines`` (in a file of this user's
    private folder, removed after). Returns its output lines split on tabs, base64 fields decoded (``decode=False``:
    as printed, for the caller to decode)."""
    what = f"commits with metadata (byte for byte), and the commits of more than {JAVA_BULK_GROUPS} groups at once,"
    with java_offsets_program(cluster, what, share=share and mode in SHARED_MODES) as (command, props, shared):
        rows, r = props.with_suffix(".tsv"), None
        try:
            rows.write_text("".join(line + "\n" for line in lines))
            r = subprocess.run(
                [*command, mode, str(props), str(rows)],
                capture_output=True,
                text=True,
                timeout=java_call_timeout(cluster.timeout, items),
            )
        finally:
            rows.unlink(missing_ok=True)
            if shared:
                shared.done(ok=r is not None and r.returncode == 0)
    out_lines = r.stdout.splitlines()
    first = next((i for i, x in enumerate(out_lines) if any(m in x for m in JVM_FAILED)), None)
    jvm_said = [] if first is None else out_lines[first:][:5]  # the JVM's own message, on stdout
    if r.returncode and shared and (r.returncode in JVM_CRASHED or jvm_said):
        # a read: running it again without the archive repeats nothing (a commit never comes here). The archive is
        # refused only when the read then answers: one that fails again failed for a reason of its own
        out = run_java_offsets(cluster, mode, lines, items, decode, share=False)
        shared.refuse(f"exit {r.returncode}: " + " | ".join((jvm_said + r.stderr.strip().splitlines())[-3:]))
        return out
    if r.returncode:
        tail = (jvm_said + (r.stderr or "").strip().splitlines())[-5:]
        raise KafkaUnavailable(
            f"{cluster.name}: Kafka's Java client ({mode}) failed (exit {r.returncode}): {' | '.join(tail)}"
        )
    kinds = ("OK", "ERR", "ROW", "GROUP")
    if not decode:
        return [f for f in (line.split("\t") for line in r.stdout.splitlines()) if f[0] in kinds]
    return [[f[0], *map(unb64, f[1:])] for f in (line.split("\t") for line in r.stdout.splitlines()) if f[0] in kinds]


def commit_lines(offsets: dict[str, dict[TP, "int | Commit"]]) -> list[str]:
    """``KafkaOffsets``' commit lines (group, topic, partition, offset, metadata; each base64) for ``offsets``."""
    lines = []
    for g, parts in sorted(offsets.items()):
        for (t, p), c in sorted(parts.items()):
            c = c if isinstance(c, Commit) else Commit(int(c))
            lines.append("\t".join(map(_b64, (g, t, p, c.offset, c.metadata))))
    return lines


def commit_with_java(cluster: ClusterView, offsets: dict[str, dict[TP, "int | Commit"]]) -> dict[str, str | None]:
    lines = commit_lines(offsets)
    out = {f[1]: (None if f[0] == "OK" else f[2]) for f in run_java_offsets(cluster, "commit", lines, len(offsets))}
    missing = sorted(set(offsets) - set(out))
    if missing:
        raise KafkaUnavailable(f"{cluster.name}: Kafka's Java client did not commit {', '.join(missing[:5])}")
    return out


def read_with_java(cluster: ClusterView, groups: list[str], share: bool = True) -> dict[str, dict[TP, Commit]]:
    """The commits of ``groups`` read by Kafka's Java client (``KafkaOffsets read``): each group's block of rows
    (partition and offset in decimal; topic names, few, decoded once each). ``share=False``: the JVM without the
    helper's class archive (:class:`ClassSharing`; bench/java_helper_bench.py compares)."""
    out: dict[str, dict[TP, Commit]] = {}
    done = set()
    topics: dict[str, str] = {}
    rows: dict[TP, Commit] = {}
    for f in run_java_offsets(cluster, "read", [_b64(g) for g in groups], len(groups), decode=False, share=share):
        kind = f[0]
        if kind == "ROW":
            t = topics.get(f[1])
            if t is None:
                t = topics[f[1]] = unb64(f[1])
            rows[(t, int(f[2]))] = Commit(int(f[3]), unb64(f[4]) if f[4] else "")
        elif kind == "GROUP":
            rows = {}
        elif kind == "OK":
            g = unb64(f[1])
            done.add(g)
            if rows:
                out[g] = rows
        else:
            g = unb64(f[1])
            raise classify(
                cluster.conf,
                f"{cluster.name}: committed offsets of {g} (Java client)",
                JavaError(unb64(f[2])),
                cluster.errors,
                need=phrase("Describe", "Group", g),
            )
    missing = sorted(set(groups) - done)
    if missing:
        raise KafkaUnavailable(f"{cluster.name}: Kafka's Java client did not read {', '.join(missing[:5])}")
    return {g: out.get(g, {}) for g in groups}


def describe_with_java(cluster: ClusterView, groups: list[str]) -> dict[str, "GroupState"]:
    """:meth:`~mm2_failover.adapters.kafka.cluster.Cluster.describe_groups` through Kafka's Java client: every
    group's state (Kafka's names, as librdkafka's; ``UNKNOWN`` for a group its coordinator does not know,
    ``NOT_A_CONSUMER_GROUP`` for a group of another protocol, never safe to move) and members. A group the helper
    could not describe raises, named."""
    members: dict[str, list[Member]] = {}
    out: dict[str, GroupState] = {}
    for f in run_java_offsets(cluster, "describe", [_b64(g) for g in groups], len(groups)):
        if f[0] == "ROW":
            members.setdefault(f[1], []).append(Member(f[2], f[3], f[4]))
        elif f[0] == "OK":
            out[f[1]] = GroupState(f[1], f[2], members.pop(f[1], []))
        else:
            raise classify(
                cluster.conf,
                f"{cluster.name}: describe group {f[1]} (Java client)",
                JavaError(f[2]),
                cluster.errors,
                need=phrase("Describe", "Group", f[1]),
            )
    missing = sorted(set(groups) - set(out))
    if missing:
        raise KafkaUnavailable(f"{cluster.name}: Kafka's Java client did not describe {', '.join(missing[:5])}")
    return {g: out[g] for g in groups}
