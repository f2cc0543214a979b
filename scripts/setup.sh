#!/usr/bin/env bash
# Installs what Skiff needs on this machine: redis-server (7+), a Python venv in .venv
# with Skiff and its dependencies; with --spark PySpark (extra `spark`) and Spark's Kafka
# connector jars (Maven Central, ~/.cache/skiff/spark-jars-<version>); with --test all
# of that and the test tools (Java client build).
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_spark=0
case "${1:-}" in
  --test) want_test=1 want_spark=1 ;;
  --spark) want_spark=1 ;;
esac

say() { echo "[setup] $*" >&2; }

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "missing: $*. Install it (Debian: sudo apt-get install -y $*) and run again."
    exit 1
  fi
  if [ ! -f /tmp/.skiff-apt-updated ]; then
    say "apt-get update"
    apt-get update -qq && touch /tmp/.skiff-apt-updated
  fi
  say "apt-get install -y $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v redis-server >/dev/null || apt_install redis-server
# Debian's package starts a system redis on 6379; Skiff does not need it.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  say "Python 3.11+ is required (found: $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11."
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv || { apt_install python3-venv && "$PY" -m venv .venv; }
fi

extras=""
[ $want_spark = 1 ] && extras="[spark]"
[ $want_test = 1 ] && extras="[test,spark]"
stamp=".venv/.installed${extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing Skiff${extras} into .venv (pip)"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ".${extras}"
  touch "$stamp"
fi

if [ $want_test = 1 ] || [ $want_spark = 1 ]; then
  command -v java >/dev/null || apt_install openjdk-17-jdk-headless
  command -v mvn >/dev/null || apt_install maven
fi
if [ $want_test = 1 ]; then
  # the console's browser tests (tests/test_console.py): Debian's chromium + its driver
  command -v chromedriver >/dev/null || apt_install chromium chromium-driver
fi
if [ $want_spark = 1 ]; then
  say "Spark's Kafka connector jars (Maven, cached)"
  .venv/bin/python -m pipeline.spark_jars >/dev/null
fi
