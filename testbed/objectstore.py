"""A real S3-compatible object store on loopback for the bed (issue 34): S3Proxy (``org.gaul:s3proxy``, its
release's own fat jar from Maven Central: ``jvm/s3proxy/pom.xml``, fetched by ``scripts/fetch_jars.sh``) with its
filesystem backend, so that the pipeline's artifacts can live in ``s3://<bucket>/...`` with no cloud account.

Why S3Proxy: it speaks the S3 REST API (signature v4, multipart uploads, ``If-None-Match`` conditional writes) in
one Java process that starts in about a second on the JVM the bed already needs; MinIO is a Go binary that is not
on Maven Central or Debian's archive, and moto is an in-process mock, not a server with its own lifecycle.

    store = ObjectStore.start(run_dir)   # returns when the bucket exists
    store.env                            # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... for any client (s3fs, the CLI)
    store.url("artifacts")               # s3://<bucket>/artifacts
    store.stop()
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.bed import free_port, quick_jit

MAIN_CLASS = "org.gaul.s3proxy.Main"
IDENTITY = "mm2-failover-bed"
CREDENTIAL = "mm2-failover-bed-secret"  # a local test credential: loopback only, never a real account


def jar_dir() -> Path:
    from mm2_failover.adapters.config import REPO_ROOT

    return REPO_ROOT / ".cache" / "jars" / "s3proxy"


@dataclass
class ObjectStore:
    proc: subprocess.Popen
    port: int
    bucket: str
    data_dir: Path
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables every client here reads (botocore, so s3fs; the pipeline's processes)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": IDENTITY,
            "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def use(self, monkeypatch) -> None:
        """Point this process's clients at this store (the AWS variables, through ``monkeypatch``), dropping the
        filesystems fsspec cached for another store (see :func:`forget_filesystems`)."""
        forget_filesystems()
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(
            key=IDENTITY, secret=CREDENTIAL, client_kwargs={"endpoint_url": self.endpoint}, skip_instance_cache=True
        )

    @classmethod
    def start(
        cls, run_dir: Path, bucket: str | None = None, port: int | None = None, timeout: float = 60.0
    ) -> "ObjectStore":
        """A store on its own port with a bucket of its own (default ``mm2-failover-<8 hex>``): a Spark Connect
        server shared by a worker's tests keeps one S3A filesystem per bucket, made with the endpoint of the first
        session that used it (Hadoop's FileSystem cache), so two stores of one server must not share a bucket name
        (one did: the e2e stack's, then ``test_object_store.py``'s, whose jobs went to the stopped e2e store)."""
        import uuid

        bucket = bucket or f"mm2-failover-{uuid.uuid4().hex[:8]}"
        jars = sorted(jar_dir().glob("s3proxy-*.jar"))
        if not jars:
            raise RuntimeError(f"S3Proxy's jar is not in {jar_dir()}: run `make setup` (scripts/fetch_jars.sh)")
        run_dir.mkdir(parents=True, exist_ok=True)
        data = run_dir / "s3-data"
        data.mkdir(exist_ok=True)
        port = port or free_port()
        props = run_dir / "s3proxy.properties"
        props.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint=http://127.0.0.1:{port}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={IDENTITY}",
                    f"s3proxy.credential={CREDENTIAL}",
                    "jclouds.provider=filesystem-nio2",
                    f"jclouds.filesystem.basedir={data}",
                    "",
                ]
            )
        )
        log = run_dir / "s3proxy.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    *quick_jit(),  # as the bed's
                    "-cp",
                    str(jars[-1]),
                    MAIN_CLASS,
                    "--properties",
                    str(props),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=run_dir,
                start_new_session=True,
            )
        store = cls(proc, port, bucket, data, log)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"S3Proxy exited with {proc.returncode} at start; see {log}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    store.stop()
                    raise RuntimeError(
                        f"S3Proxy did not listen on 127.0.0.1:{port} within {timeout:.0f} s; see {log}"
                    ) from None
                time.sleep(0.2)
        fs = store.filesystem()
        try:
            fs.call_s3("create_bucket", Bucket=bucket)
        except FileExistsError:
            pass
        return store

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def forget_filesystems() -> None:
    """fsspec keeps one filesystem per set of options for the life of a process, and s3fs reads the endpoint and the
    credentials from the environment when it creates one: a test that points the AWS variables at another S3 server
    (each module's bed has its own) must drop the cached ones first and after. A deployment's processes never change
    them."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


if __name__ == "__main__":  # a store for a manual try: python -m testbed.objectstore
    s = ObjectStore.start(Path(os.environ.get("TMPDIR", "/tmp")) / "mm2-failover-s3")
    print("\n".join(f"export {k}={v}" for k, v in s.env.items()))
    print(f"# bucket: {s.url()}; Ctrl-C stops it")
    try:
        s.proc.wait()
    except KeyboardInterrupt:
        s.stop()
