#!/usr/bin/env bash
# Proves that adding an execution provider is adding one table (docs/ep-tables.md, "Adding an
# EP"): copies the tracked files of this workspace, adds `ep-sets/tables/newep.toml` (default.toml
# under another name) and nothing else, builds `tailor` there, deletes the copy, and from another
# directory checks that `tailor build --ep newep` builds the tiny-llama fixture, that its
# build_report.json says `"ep": "newep"`, and that `tailor build --help` lists newep. Exits
# non-zero with a message saying which step failed.
#
# Run by scripts/test.sh after `cargo test`. Dependencies come from the target directory the
# tests use (CARGO_TARGET_DIR, default ./target), so only the workspace crates compile again;
# the copy lives at a fixed place inside it (tmp/add-an-ep) so that a second run recompiles
# only what the new table touches and the target directory does not grow with every run.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
cargo=${CARGO:-cargo}
ep=newep
copy="$target/tmp/add-an-ep"
elsewhere=$(mktemp -d)
started=$(date +%s)

fail() {
  echo "check-new-ep: FAILED: $*" >&2
  exit 1
}

# Building the copy uses the same target directory and so overwrites $target/debug/tailor:
# build this workspace's binaries again afterwards (the command scripts/test.sh uses, so
# nothing but the uplift is redone), also when a step fails.
restore() {
  (cd "$repo" && "$cargo" build --quiet --workspace --bins) || fail "could not rebuild this workspace's binaries in $target"
}
on_exit() {
  local status=$?
  rm -rf "$elsewhere" "$copy"
  if [ -z "${restored:-}" ]; then
    restore || status=1
  fi
  exit "$status"
}
trap on_exit EXIT

git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "$repo is not a git work tree (the copy is made from \`git ls-files\`)"

# 1. The tracked files, as they are in the work tree (a tracked file deleted there is left out).
rm -rf "$copy"
mkdir -p "$copy/ws"
(cd "$repo" && git ls-files -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$copy/ws" || fail "copying the tracked files to $copy/ws"
[ -f "$copy/ws/ep-sets/tables/default.toml" ] || fail "the copy has no ep-sets/tables/default.toml"
[ ! -e "$copy/ws/ep-sets/tables/$ep.toml" ] || fail "ep-sets/tables/$ep.toml already exists: pick another name for the check"
copied=$(date +%s)

# 2. One new table: default.toml with `name` in its [ep] section changed, nothing else.
awk -v ep="$ep" '
  /^\[/ { section = $0 }
  section == "[ep]" && /^name *= *"default"/ && !done { print "name = \"" ep "\""; done = 1; next }
  { print }
' "$copy/ws/ep-sets/tables/default.toml" >"$copy/ws/ep-sets/tables/$ep.toml"
[ "$(grep -c "^name = \"$ep\"\$" "$copy/ws/ep-sets/tables/$ep.toml")" = 1 ] ||
  fail "could not rename the [ep] name of default.toml to $ep"
[ "$(diff "$copy/ws/ep-sets/tables/default.toml" "$copy/ws/ep-sets/tables/$ep.toml" | grep -c '^[<>]')" = 2 ] ||
  fail "$ep.toml must differ from default.toml in its [ep] name only"

# 3. Build tailor in the copy; keep the binary and delete the copy, so that the runs below
#    show it needs no file of the workspace. Cargo names a workspace crate's artifacts by its
#    path relative to the workspace root, so the copy's crates would share (and overwrite) this
#    workspace's artifacts, ep-sets' generated table list included. A profile setting that
#    changes no code (codegen-units 255 instead of 256), for ep-sets alone, gives ep-sets and
#    every crate above it artifacts of their own; the crates below, the same source in both,
#    stay shared and are not compiled again.
(cd "$copy/ws" && CARGO_TARGET_DIR="$target" "$cargo" build --quiet -p builder --bin tailor \
  --config 'profile.dev.package.ep-sets.codegen-units=255') ||
  fail "tailor does not build with ep-sets/tables/$ep.toml added"
built=$(date +%s)
mkdir -p "$elsewhere/bin"
cp "$target/debug/tailor" "$elsewhere/bin/tailor"
rm -rf "$copy"
tailor="$elsewhere/bin/tailor"

# 4. From another directory: a package for the new EP, its report, and --help.
cd "$elsewhere"
if ! "$tailor" build --model "$repo/tests/fixtures/tiny-llama" --output pkg --ep "$ep" 2>build.log; then
  cat build.log >&2
  fail "tailor build --ep $ep exited non-zero (its stderr is above)"
fi
[ -f pkg/build_report.json ] || fail "tailor build --ep $ep wrote no pkg/build_report.json"
grep -Eq "\"ep\": *\"$ep\"" pkg/build_report.json || fail "pkg/build_report.json does not say \"ep\": \"$ep\": $(head -c 300 pkg/build_report.json)"
"$tailor" build --help | grep -Eq -- "^ *- $ep: " || fail "tailor build --help does not list $ep among the --ep values"

# 5. This workspace's own tailor again, which has no such table: it must refuse the EP, so
#    the checks above can fail and the target directory is as the tests left it.
restored=1
restore
if "$target/debug/tailor" build --model "$repo/tests/fixtures/tiny-llama" --output pkg-main --ep "$ep" 2>/dev/null; then
  fail "this workspace's $target/debug/tailor accepts --ep $ep although it has no such table"
fi

echo "check-new-ep: ok: ep-sets/tables/$ep.toml alone makes --ep $ep build" \
  "(copy $((copied - started)) s, build $((built - copied)) s, total $(($(date +%s) - started)) s)"
