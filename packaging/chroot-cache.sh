# Sourced by packaging/test-package.sh and packaging/test-systemd.sh: the bookworm roots they run the .deb in, built
# once and cached as tarballs in BUILD_DIR/chroot-cache. Needs root and debootstrap.

# The Debian mirror apt uses on this host (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
  local mirror
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*debian\)\/* bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
  printf '%s\n' "${mirror:-http://deb.debian.org/debian}"
}

# minbase_tarball CACHE_DIR WORK_DIR: makes CACHE_DIR/bookworm-minbase.tar (debootstrap --variant=minbase) unless it
# exists; the log goes to WORK_DIR/debootstrap.log. Returns non-zero when debootstrap fails.
minbase_tarball() {
  local cache=$1/bookworm-minbase.tar work=$2 mirror
  [ -f "$cache" ] && return 0
  mirror=$(debian_mirror)
  printf '     debootstrap --variant=minbase bookworm from %s (cached in %s)\n' "$mirror" "$cache"
  mkdir -p "$1" "$work"
  rm -rf --one-file-system "$work/bootstrap"
  if debootstrap --variant=minbase bookworm "$work/bootstrap" "$mirror" >"$work/debootstrap.log" 2>&1 &&
    tar -C "$work/bootstrap" -cf "$cache.partial" . && mv "$cache.partial" "$cache"; then
    rm -rf --one-file-system "$work/bootstrap"
    return 0
  fi
  rm -f "$cache.partial"
  return 1
}
