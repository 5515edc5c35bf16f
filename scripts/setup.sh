#!/usr/bin/env bash
# Set up everything from a fresh clone: Java/Maven check, the Python venv (.venv, from the hashed lock
# requirements.txt, installed with uv), and the JVM runtime of the bed (scripts/fetch_jars.sh).
# Idempotent and cheap when nothing changed (stamps in .venv and .cache).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || { echo "setup: $python not found (Python 3.11 is required)" >&2; exit 1; }

need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
# test tools: Debian's docker-compose validates docker-compose.yaml without an engine
command -v docker-compose >/dev/null || need_apt+=(docker-compose)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${need_apt[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install ${need_apt[*]} (Java 17+ and Maven run the local Kafka bed; docker-compose validates the compose file)" >&2; exit 1
  fi
fi

# --- Chromium for the UI test (tests/e2e/test_ui.py drives /usr/bin/chromium with Playwright; issue 7) ---
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing chromium chromium-driver with apt-get (the browser of the UI test)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: WARNING: /usr/bin/chromium is missing; the UI test (tests/e2e/test_ui.py) fails until it is" \
         "installed (Debian: apt-get install chromium chromium-driver)" >&2
  fi
fi
# --- end Chromium ---

# --- Redis for the several-workers bed (CeleryExecutor's broker: testbed/airflow_stack.py; issue 34) ---
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing redis-server with apt-get (the Celery broker of the several-workers test)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "setup: WARNING: redis-server is missing; the several-workers test (tests/e2e/test_ui.py) fails until it" \
         "is installed (Debian: apt-get install redis-server)" >&2
  fi
fi
# --- end Redis ---

uv="$root/.cache/bootstrap/bin/uv"
if [ ! -x "$uv" ]; then
  echo "setup: bootstrapping uv into .cache/bootstrap"
  "$python" -m venv .cache/bootstrap
  .cache/bootstrap/bin/pip install -q "uv==0.13.9"
fi
want="$(sha256sum requirements.txt | cut -c1-16)"
if [ ! -f .venv/.stamp ] || [ "$(cat .venv/.stamp)" != "$want" ]; then
  echo "setup: installing the pinned Python environment into .venv (uv pip sync requirements.txt)"
  [ -x .venv/bin/python ] || "$uv" venv -q --python "$python" .venv
  VIRTUAL_ENV="$root/.venv" "$uv" pip sync -q --require-hashes requirements.txt
  echo "$want" > .venv/.stamp
else
  echo "setup: .venv up to date"
fi
scripts/fetch_jars.sh
