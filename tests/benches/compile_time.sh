#!/usr/bin/env bash
# What `#[derive(Document)]` and `keyspace!` cost a user's build.
#
# Generates a crate of 20 document types, each with a list, a unique and a
# group index, in two variants: (a) the structs with serde derives only, and
# (b) the same structs with `#[derive(Document)]` and one `keyspace!` over all
# of them. Both depend on this workspace's `microdcs-valkey` by path, so their
# dependency graphs are the same and only the crate itself differs. Each run
# touches the crate's source and times a `cargo check` with incremental
# compilation off, so rustc redoes the whole crate; the variants take turns so
# that noise on the shared machine hits both alike.
#
# Usage: tests/benches/compile_time.sh [BASE_REV] [RUNS]
#   BASE_REV: also measure variant (b) against that commit's workspace
#             (extracted with `git archive`), in the same run.
#   RUNS:     timed runs per variant (default 5), after one warm-up each.
# COMPILE_BENCH_TARGET_DIR sets the target directory (default: a fresh one
# in the temporary directory; never the workspace's, whose state would skew
# the first runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
base_rev="${1:-}"
runs="${2:-5}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
target="${COMPILE_BENCH_TARGET_DIR:-$tmp/target}"

# $1: crate dir, $2: crate name, $3: workspace root, $4: "serde" or "derive".
generate() {
  local dir="$1" name="$2" ws="$3" variant="$4"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<EOF
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
microdcs-valkey = { path = "$ws/microdcs-valkey" }
serde = { version = "1", features = ["derive"] }

[workspace]
EOF
  cp "$root/Cargo.lock" "$dir/Cargo.lock"
  {
    echo "#![allow(dead_code)]"
    echo "use serde::{Deserialize, Serialize};"
    if [ "$variant" = derive ]; then echo "use microdcs_valkey::{Document, keyspace};"; fi
    local names=()
    for i in $(seq -w 0 19); do
      local ty="Doc$i" kind="doc$i"
      names+=("$ty")
      if [ "$variant" = derive ]; then
        cat <<EOF
#[derive(Debug, Clone, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "$kind",
    key = "$kind:{id}",
    list(key = "$kind:list:{scope}", score = rank),
    unique(name = "by_code", key = "$kind:bycode:{code}"),
    group(name = "by_state", key = "$kind:bystate:{scope}:{state}"),
)]
EOF
      else
        echo "#[derive(Debug, Clone, Serialize, Deserialize)]"
      fi
      cat <<EOF
pub struct $ty {
    pub id: String,
    pub scope: String,
    pub code: String,
    pub state: String,
    pub rank: f64,
    pub note: Option<String>,
}
EOF
    done
    if [ "$variant" = derive ]; then
      local IFS=,
      echo "keyspace! { pub Bench { documents: [${names[*]}] } }"
    fi
  } >"$dir/src/lib.rs"
}

# Prints the wall time of one non-incremental check of the crate in $1.
check_once() {
  touch "$1/src/lib.rs"
  local t0 t1
  t0=$EPOCHREALTIME
  CARGO_INCREMENTAL=0 CARGO_TARGET_DIR="$target" cargo check -q --manifest-path "$1/Cargo.toml"
  t1=$EPOCHREALTIME
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

variants=(serde derive)
generate "$tmp/serde" ct_serde "$root" serde
generate "$tmp/derive" ct_derive "$root" derive
if [ -n "$base_rev" ]; then
  mkdir -p "$tmp/base-ws"
  git -C "$root" archive "$base_rev" | tar -x -C "$tmp/base-ws"
  generate "$tmp/base" ct_base "$tmp/base-ws" derive
  variants+=(base)
fi

# Warm-up: builds the dependencies once and checks that every variant compiles.
for v in "${variants[@]}"; do
  CARGO_INCREMENTAL=0 CARGO_TARGET_DIR="$target" cargo check -q --manifest-path "$tmp/$v/Cargo.toml"
  check_once "$tmp/$v" >/dev/null
done

declare -A times
for _ in $(seq "$runs"); do
  for v in "${variants[@]}"; do
    times[$v]+="$(check_once "$tmp/$v") "
  done
done

declare -A med
echo "non-incremental cargo check of the generated crate, $runs runs each (seconds)"
for v in "${variants[@]}"; do
  med[$v]=$(echo "${times[$v]}" | tr ' ' '\n' | grep . | median)
  case $v in
    serde) label="(a) serde derives only" ;;
    derive) label="(b) + Document derives + keyspace! (this tree)" ;;
    base) label="(b) + Document derives + keyspace! (at $base_rev)" ;;
  esac
  printf '%-52s median %6.3f  runs: %s\n' "$label" "${med[$v]}" "${times[$v]}"
done
printf '%-52s %+.3f\n' "difference (b) - (a), this tree" "$(echo "${med[derive]} ${med[serde]}" | awk '{ print $1 - $2 }')"
if [ -n "$base_rev" ]; then
  printf '%-52s %+.3f\n' "difference (b) - (a), at $base_rev" "$(echo "${med[base]} ${med[serde]}" | awk '{ print $1 - $2 }')"
fi
