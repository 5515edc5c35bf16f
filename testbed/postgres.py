"""Debian's PostgreSQL as Airflow's metadata database for the recovery-time bench (issue 54 item 1): a cluster of its
own (``initdb`` into a fresh folder, trust authentication on loopback only), on a free port, stopped with the bench.
PostgreSQL refuses to run as root: as root, it runs as the ``postgres`` system user the Debian package creates. When
the server is not installed and this is root on Debian, it is installed with apt-get (as the bed's setup does for
Java). SQLite stays the demo's and the suite's database."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresError(RuntimeError):
    """The server could not be installed or started; the message says which step and its output."""


def bin_dir() -> Path:
    """The newest installed server's binaries (``/usr/lib/postgresql/<major>/bin``), installing it when missing."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found and os.geteuid() == 0 and shutil.which("apt-get"):
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
            r = subprocess.run(
                cmd, capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            )
            if r.returncode != 0:
                raise PostgresError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise PostgresError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    return Path(found[-1]).parent


class Postgres:
    """``with Postgres() as pg: pg.url`` - a SQLAlchemy URL of database ``airflow`` (psycopg2)."""

    def __init__(self, port: int | None = None):
        from testbed.bed import free_port

        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="mm2-failover-pg-"))
        self.data = self.dir / "data"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/airflow"

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str]) -> None:
        r = subprocess.run(self._as_owner(argv), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise PostgresError(f"{' '.join(argv)} failed ({r.returncode}): {(r.stdout + r.stderr)[-2000:]}")

    def start(self) -> "Postgres":
        from testbed.bed import _pdeathsig

        bins = bin_dir()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run([str(bins / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        log = open(self.dir / "postgres.log", "ab")
        self.proc = subprocess.Popen(
            self._as_owner(
                [
                    str(bins / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.dir}",
                    "-c",
                    "max_connections=200",  # the scheduler, the API server and every task process
                    "-c",
                    "fsync=on",  # a deployment's durability: the bench measures what a deployment pays
                ]
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_pdeathsig,
        )
        log.close()
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run(
                [str(bins / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True, timeout=10
            )
            if r.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise PostgresError(f"postgres did not start: {(self.dir / 'postgres.log').read_text()[-2000:]}")
            time.sleep(0.3)
        r = subprocess.run(
            [
                str(bins / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-c",
                "CREATE DATABASE airflow",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0:
            raise PostgresError(f"CREATE DATABASE airflow failed: {r.stderr[-2000:]}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: PostgreSQL's smart shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
