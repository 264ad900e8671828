#!/bin/bash
# packaging/bunstr.service and bunstr@.service under a real systemd: boots Debian 12 in qemu
# (software emulation, no network) and runs guest.sh there: the
# install, reload, restart, crash, open-files and upgrade steps of docs/deploy.md, then the
# blue/green hand-over blocks of docs/operations.md, as written, against
# dist/release/bunstr-linux-x64. Not part of CI.
# Needs root and Debian's debootstrap, qemu-system-x86 and e2fsprogs; about 10 minutes the first
# time (the root filesystem with a kernel is kept in WORK for later runs), 4-5 minutes after.
#   npx bun build.ts --release --only linux-x64,linux-x64-baseline
#   sudo test/systemd-vm/run.sh [WORK=/var/tmp/bunstr-systemd-vm]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${1:-/var/tmp/bunstr-systemd-vm}
release=$repo/dist/release
for f in bunstr-linux-x64 bunstr-linux-x64-baseline SHA256SUMS; do
  [ -f "$release/$f" ] || { echo "missing $release/$f: npx bun build.ts --release --only linux-x64,linux-x64-baseline" >&2; exit 2; }
done
for tool in debootstrap qemu-system-x86_64 mkfs.ext4 debugfs; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install debootstrap qemu-system-x86 e2fsprogs" >&2; exit 2; }
done
mkdir -p "$work"
base=$work/base
if ! ls "$base"/boot/vmlinuz-* >/dev/null 2>&1; then
  rm -rf "$base"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,ca-certificates,curl,procps bookworm "$base" http://deb.debian.org/debian
  unshare -m sh -c "mount -t proc proc '$base/proc' && mount --rbind /dev '$base/dev' && mount -t sysfs sys '$base/sys' &&
    chroot '$base' sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-image-amd64 initramfs-tools'"
  echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$base/etc/fstab"
  echo bunstr-vm > "$base/etc/hostname"
fi
guest=$work/guest
rm -rf "$guest"
cp -a "$base" "$guest"
mkdir -p "$guest/root/release" "$guest/root/packaging"
cp "$release"/bunstr-linux-x64 "$release"/bunstr-linux-x64-baseline "$release"/SHA256SUMS "$guest/root/release/"
cp "$repo"/packaging/bunstr.service "$repo"/packaging/bunstr@.service "$repo"/packaging/config.toml "$guest/root/packaging/"
install -m 0755 "$here/guest.sh" "$guest/root/guest.sh"
cp "$here/client.js" "$here/handover-client.js" "$guest/root/"
# The ```sh blocks of operations.md's blue/green section, as written: handover-1.sh, -2, -3.
mkdir -p "$guest/root/doc"
blocks=$(awk -v out="$guest/root/doc" '
  $0 == "### With systemd: bunstr@blue and bunstr@green" { s = 1; next }
  s && !b && /^##/ { s = 0 }
  s && $0 == "```sh" { b = 1; n++; next }
  b && $0 == "```" { b = 0; next }
  b { print > (out "/handover-" n ".sh") }
  END { print n + 0 }' "$repo/docs/operations.md")
[ "$blocks" = 3 ] || { echo "docs/operations.md's blue/green section has $blocks sh blocks, guest.sh runs 3: update it" >&2; exit 2; }
(cd "$repo" && npx bun -e '
  const { signer } = await import("./test/helpers.ts");
  const good = signer().sign({ kind: 1, content: "published to bunstr under systemd" });
  const forged = { ...signer().sign({ kind: 1, content: "forged" }), sig: good.sig };
  const keys = [signer(), signer(), signer()]; // handover-client.js: 3 slices of 400
  const stream = Array.from({ length: 1200 }, (_, i) => keys[i % 3].sign({ kind: 1, content: `through the hand-over ${i}` }));
  await Bun.write(process.argv[1], JSON.stringify({ good, forged, stream }));' "$guest/root/events.json")
cat > "$guest/etc/systemd/system/bunstr-selftest.service" <<'UNIT'
[Unit]
Description=bunstr packaging self-test
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/root/guest.sh
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/bunstr-selftest.service "$guest/etc/systemd/system/multi-user.target.wants/bunstr-selftest.service"
rm -f "$work/disk.img"
truncate -s 3G "$work/disk.img"
mkfs.ext4 -q -F -d "$guest" "$work/disk.img"
echo "booting (software emulation, a few minutes)..."
timeout 1500 qemu-system-x86_64 -machine q35 -cpu max -m 3072 -smp 2 -nographic -no-reboot \
  -kernel "$(ls "$guest"/boot/vmlinuz-* | head -1)" -initrd "$(ls "$guest"/boot/initrd.img-* | head -1)" \
  -append "root=/dev/vda rw console=ttyS0 quiet" -drive "file=$work/disk.img,format=raw,if=virtio" -nic none > "$work/serial.log" 2>&1 || true
debugfs -R "cat /root/guest.log" "$work/disk.img" 2>/dev/null > "$work/guest.log"
cat "$work/guest.log"
grep -q '^SELFTEST-OK$' "$work/guest.log" || { echo "systemd-vm: FAIL (see $work/guest.log, $work/serial.log)"; exit 1; }
echo "systemd-vm: ok"
