#!/usr/bin/env bash
# Installs the Debian packages the local provider and the tests need, only when they are missing.
# swtpm: a software TPM per node (lib/tpm/swtpm.ts makes its state: swtpm-tools' swtpm_setup is not needed);
# tpm2-tools: cross-checks of our TPM client; iproute2 (ip) and
# util-linux (nsenter): a network namespace per node; gocryptfs + fuse3: the local nodes' encrypted state
# directories; etcd-server: the control planes' cluster store.
# cryptsetup-bin: the LUKS2 state disk of cloud nodes (its tests format and check headers; no device-mapper here).
# openssl: cross-checks of certificates and of measurement signatures with an independent tool.
# Node images and VM nodes (docs/workflows/node-images.md): qemu-system-x86 + ovmf (UEFI firmware) + qemu-utils boot
# and convert images; systemd-boot-efi ships the UEFI stub of a unified kernel image; dosfstools, mtools, fdisk and gdisk (sgdisk) lay
# out the image's EFI system partition and GPT; zstd compresses the initrd. osslsigncode and binutils (objdump) cross-check
# our PE reader and Authenticode digests (test/node-image).
# openssh-client (ssh, ssh-keygen) + openssh-server (sshd): `constellation ssh`'s certificates are read back by
# ssh-keygen and let in by a real sshd with a node's configuration (test/ssh). Debian's package starts no sshd where
# services are not started (containers); it makes the privilege-separation user sshd needs.
set -euo pipefail
missing=()
command -v swtpm >/dev/null 2>&1 || missing+=(swtpm)
command -v tpm2_checkquote >/dev/null 2>&1 || missing+=(tpm2-tools)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
command -v gocryptfs >/dev/null 2>&1 || missing+=(gocryptfs)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v cryptsetup >/dev/null 2>&1 || missing+=(cryptsetup-bin)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || missing+=(qemu-utils)
[ -e /usr/share/OVMF/OVMF_CODE.fd ] || missing+=(ovmf)
[ -e /usr/lib/systemd/boot/efi/linuxx64.efi.stub ] || missing+=(systemd-boot-efi)
command -v mkfs.vfat >/dev/null 2>&1 || missing+=(dosfstools)
command -v mcopy >/dev/null 2>&1 || missing+=(mtools)
command -v sfdisk >/dev/null 2>&1 || missing+=(fdisk)
command -v sgdisk >/dev/null 2>&1 || missing+=(gdisk)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v osslsigncode >/dev/null 2>&1 || missing+=(osslsigncode)
command -v objdump >/dev/null 2>&1 || missing+=(binutils)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
