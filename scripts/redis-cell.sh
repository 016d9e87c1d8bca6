#!/usr/bin/env bash
# Builds the peer of the RESP front's differential test (crates/sluice-server/tests/resp_redis_cell.rs):
# redis-cell, the Redis module whose CL.THROTTLE the front answers like, as a module
# redis-server loads. crates.io holds its release 0.2.2, whose GCRA arithmetic is that of the
# latest release, 0.5.0; two things in the reply differ, and scripts/redis-cell-0.5-reply.patch
# changes them in its src/lib.rs so that it answers as 0.5.0 does:
#   - 0.2.5 and later refuse a zero rate (count 0, period 0, or an interval that comes out
#     as 0 ns) with "Zero rates are not supported"; 0.2.2 answers it limited;
#   - 0.4.0 and later round retry_after and reset_after up to the next whole second when a
#     millisecond or more remains; 0.2.2 truncates them.
# Cargo fetches the crate through a throwaway package that depends on it; the copy is built as a
# cdylib (its manifest says dylib, which Redis cannot load) into target/redis-cell/. Prints the
# module's path; a second run reuses the build while the patch is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$PWD/target/redis-cell"
module="$dir/build/release/libredis_cell.so"
patch_file="$PWD/scripts/redis-cell-0.5-reply.patch"
stamp="$(sha256sum "$patch_file" | cut -d' ' -f1)"
if [ -f "$module" ] && [ "$(cat "$dir/patched" 2>/dev/null)" = "$stamp" ]; then
  echo "$module"
  exit 0
fi
mkdir -p "$dir/fetch/src"
printf '[package]\nname = "fetch-redis-cell"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nredis-cell = "=0.2.2"\n\n[workspace]\n' \
  >"$dir/fetch/Cargo.toml"
: >"$dir/fetch/src/lib.rs"
cargo fetch --manifest-path "$dir/fetch/Cargo.toml" >&2
source="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/redis-cell-0.2.2 | head -n 1)"
rm -rf "$dir/src"
cp -r "$source" "$dir/src"
chmod -R u+w "$dir/src"
# Its own workspace, even inside this one.
printf '\n[workspace]\n' >>"$dir/src/Cargo.toml"
patch --quiet -d "$dir/src" -p1 <"$patch_file"
cargo rustc --release --manifest-path "$dir/src/Cargo.toml" --crate-type cdylib --target-dir "$dir/build" >&2
echo "$stamp" >"$dir/patched"
echo "$module"
