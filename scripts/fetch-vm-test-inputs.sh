#!/usr/bin/env bash
# Fetches, once, the Debian packages the measured-boot proof test boots (test/node-image/vm-boot.test.ts):
# Debian's cloud kernel (linux-image-*-cloud-amd64, the 6.1 series of bookworm) and busybox-static (the tiny initrd's
# shell). Tests never reach the network, so `pretest` runs this and the test reads only the cache, failing with a
# clear message under CI=true when the cache is missing. Cache: $CONSTELLATION_VM_TEST_CACHE, else
# ~/.cache/constellation-ts/vm-test-inputs. It holds vmlinuz, busybox and inputs.txt (package versions + SHA-256).
set -euo pipefail
cache="${CONSTELLATION_VM_TEST_CACHE:-$HOME/.cache/constellation-ts/vm-test-inputs}"
[ -s "$cache/vmlinuz" ] && [ -s "$cache/busybox" ] && [ -s "$cache/inputs.txt" ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "fetch-vm-test-inputs: apt-get is needed (Debian/Ubuntu host)" >&2; exit 1; }
# The metapackage names the current 6.1 cloud kernel package; take that exact package.
kernel_pkg="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-6\.1\.[^ ]*-cloud-amd64\)$/\1/p' | head -n1)"
if [ -z "$kernel_pkg" ]; then
  echo "fetch-vm-test-inputs: no linux-image-6.1.*-cloud-amd64 in the apt sources (run apt-get update)" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work" # apt-get download drops privileges to _apt when it can
echo "Fetching $kernel_pkg and busybox-static into $cache" >&2
(cd "$work" && apt-get download -qq "$kernel_pkg" busybox-static)
mkdir -p "$work/k" "$work/b" "$cache"
dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
dpkg-deb -x "$work"/busybox-static_*.deb "$work/b"
install -m 0644 "$work"/k/boot/vmlinuz-* "$cache/vmlinuz"
install -m 0755 "$work/b/bin/busybox" "$cache/busybox"
{
  for deb in "$work"/*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" "$(sha256sum "$deb" | cut -d' ' -f1)"
  done
} >"$cache/inputs.txt"
cat "$cache/inputs.txt" >&2
