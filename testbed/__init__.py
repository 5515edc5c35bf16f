"""The local test bed: real Kafka clusters (KRaft brokers) and MirrorMaker 2 on loopback, a Spark standalone cluster,
the demo/test scenario, and wiring a local Airflow to them. Used by ``make demo``, the tests and the benchmarks;
never shipped with the pipeline (nothing under ``plugins/`` imports it or starts a JVM)."""
