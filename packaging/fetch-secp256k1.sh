#!/bin/sh
# Fetches Debian's libsecp256k1 for another CPU architecture, to embed in a cross-built binary:
#   packaging/fetch-secp256k1.sh arm64 [DIR]    -> prints DIR/arm64/libsecp256k1.so.1
# Uses this machine's Debian sources with a private apt state in DIR (default dist/secp256k1),
# so nothing on the system changes (no `dpkg --add-architecture`) and root is not needed.
# Debian architectures: amd64, arm64 (bun-linux-arm64), armhf, ...; any with the package.
# SYSROOT=1 also unpacks that architecture's libc6 and libgcc-s1 into DIR/ARCH/sysroot, enough to
# run the cross-built binary here under qemu-user (`qemu-aarch64-static -L DIR/arm64/sysroot ...`,
# see test/smoke-qemu.ts).
set -eu
arch=${1:?usage: fetch-secp256k1.sh DEBIAN_ARCH [DIR]}
base=${2:-dist/secp256k1}
pkg=${SECP256K1_PACKAGE:-libsecp256k1-1}
mkdir -p "$base"
base=$(cd "$base" && pwd)
state=$base/apt-$arch
out=$base/$arch
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$out"
: >"$state/status"
apt_opts="-q -o APT::Architecture=$arch -o APT::Architectures::=$arch \
  -o Dir::State=$state -o Dir::State::Lists=$state/lists -o Dir::State::status=$state/status \
  -o Dir::Cache=$state/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get $apt_opts update >&2
deb_dir=$(mktemp -d)
trap 'rm -rf "$deb_dir"' EXIT
# shellcheck disable=SC2086
(cd "$deb_dir" && apt-get $apt_opts download "$pkg:$arch" >&2)
deb=$(ls "$deb_dir"/*.deb)
dpkg-deb -x "$deb" "$deb_dir/root"
# The real file, not the soname symlink: build.ts copies it into the binary.
so=$(find "$deb_dir/root" -name 'libsecp256k1.so.*' -type f | head -1)
[ -n "$so" ] || { echo "no libsecp256k1.so.* in $deb" >&2; exit 1; }
cp "$so" "$out/libsecp256k1.so.1"
echo "$(basename "$deb") -> $out/libsecp256k1.so.1" >&2
if [ "${SYSROOT:-}" = 1 ]; then
  rm -rf "$out/sysroot" "$deb_dir"/*.deb
  # shellcheck disable=SC2086
  (cd "$deb_dir" && apt-get $apt_opts download "libc6:$arch" "libgcc-s1:$arch" >&2)
  for d in "$deb_dir"/*.deb; do dpkg-deb -x "$d" "$out/sysroot"; done
  echo "sysroot -> $out/sysroot" >&2
fi
echo "$out/libsecp256k1.so.1"
