# shellcheck shell=bash
# Sourced by the arm64 scripts: sof_binfmt_aarch64 makes the kernel run aarch64 ELF files through
# qemu-aarch64 (a binfmt_misc entry; needs root and a kernel that lets it mount binfmt_misc).
# The entry names /usr/bin/qemu-aarch64, resolved when a file is run: on the host the dynamic
# qemu-user binary (libraries of the arm64 root through QEMU_LD_PREFIX), inside an arm64 chroot a
# static copy placed there (scripts/arm64/chroot_main_job.sh). Returns 1 where it cannot.
sof_binfmt_aarch64() {
  local d=/proc/sys/fs/binfmt_misc
  [ -e "$d/qemu-aarch64" ] && return 0
  [ -e "$d/register" ] || mount -t binfmt_misc binfmt_misc "$d" 2>/dev/null || return 1
  [ -w "$d/register" ] || return 1
  # magic: a 64-bit little-endian ELF executable or shared object for machine 0xb7 (aarch64)
  printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64:' \
    >"$d/register" 2>/dev/null
  [ -e "$d/qemu-aarch64" ]
}
