#!/usr/bin/env bash
# Runs the store benchmark twice: on plain loopback, and with a simulated
# network round trip (tc netem delay on lo, 100 us each way) when this user
# may change qdiscs. The delay is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo bench -p microdcs-tests --bench store --no-run >/dev/null 2>&1 || cargo bench -p microdcs-tests --bench store --no-run
echo "# Loopback"
cargo bench -q -p microdcs-tests --bench store -- "$@"
if tc qdisc add dev lo root netem delay 100us 2>/dev/null; then
  trap 'tc qdisc del dev lo root 2>/dev/null || true' EXIT
  echo
  echo "# Loopback with netem delay 100us each way (200us round trip)"
  cargo bench -q -p microdcs-tests --bench store -- "$@"
else
  echo "(tc netem not permitted here: skipped the simulated-network run)"
fi
