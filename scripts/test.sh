#!/usr/bin/env bash
# Installs what the tests need (m4 for rug's GMP build) and runs them all:
# the self-contained workspace tests, then the benchmark tests that read
# ../shared (they skip themselves when it is absent).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v m4 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq m4; else sudo apt-get install -y m4; fi
fi
# Default members: everything but xtask (its codegen tools need not build for tests).
cargo test
