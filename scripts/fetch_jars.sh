#!/usr/bin/env bash
# Fetch the bed's JVM runtime from Maven Central into .cache/ (ignored by git): Kafka + MM2, Spark's Kafka source,
# S3Proxy (the bed's object store), S3A (Spark's s3a:// filesystem).
# A stamp holding the poms' hash makes a second run a no-op: nothing is downloaded again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
stamp="$cache/jars/.stamp"
want="$(cat "$root/jvm/kafka/pom.xml" "$root/jvm/spark-kafka/pom.xml" "$root/jvm/s3proxy/pom.xml" "$root/jvm/s3a/pom.xml" | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "jars: up to date in .cache/jars ($(ls "$cache/jars/kafka" | wc -l) kafka, $(ls "$cache/jars/spark" | wc -l) spark, $(ls "$cache/jars/s3a" | wc -l) s3a, S3Proxy)"
  exit 0
fi
command -v mvn >/dev/null || { echo "Maven (mvn) is required to fetch the Kafka/MM2/Spark-connector jars" >&2; exit 1; }
command -v java >/dev/null || { echo "Java 17+ is required to run the local Kafka bed" >&2; exit 1; }
rm -rf "$cache/jars/kafka" "$cache/jars/spark" "$cache/jars/s3proxy" "$cache/jars/s3a"
mkdir -p "$cache/jars"
for part in kafka spark-kafka s3proxy s3a; do
  out="$cache/jars/${part%-kafka}"
  echo "jars: resolving jvm/$part/pom.xml -> ${out#$root/}"
  mvn -q -B -f "$root/jvm/$part/pom.xml" -Dmaven.repo.local="$cache/m2" \
      dependency:copy-dependencies -DoutputDirectory="$out" -DincludeScope=runtime
done
echo "$want" > "$stamp"
echo "jars: $(ls "$cache/jars/kafka" | wc -l) kafka, $(ls "$cache/jars/spark" | wc -l) spark, $(ls "$cache/jars/s3a" | wc -l) s3a, $(ls "$cache/jars/s3proxy")"
