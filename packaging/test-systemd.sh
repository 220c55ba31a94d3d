#!/usr/bin/env bash
# `make test-systemd`: the .deb under a real systemd. Boots a Debian bookworm container whose PID 1 is systemd (with
# D-Bus and polkit), installs the package in it and runs the check files of packaging/systemd-test/checks inside,
# each as a transient unit of the container's own systemd. Needs root and systemd-nspawn (the Makefile's
# deps-systemd-test target installs it).
#
# Usage: test-systemd.sh DEB BUILD_DIR [DASHBOARD_DEB]
# DASHBOARD_DEB (default: accmon-dashboard_<version>_all.deb next to DEB) is at /testdata/accmon-dashboard.deb for
# its check (96-dashboard.sh); its dependencies are in the root too.
# Prints one PASS or FAIL line per check and a closing "N passed, N failed" line; exits non-zero on any failure.
#
# The root file system (a minbase bookworm, see chroot-cache.sh, plus systemd, systemd-sysv, dbus, polkitd and the
# package's dependencies) is built once and cached in BUILD_DIR/chroot-cache/bookworm-systemd-KEY.tar; KEY changes
# with the package list and the .deb's Depends. Each run boots it with --volatile=overlay (the root stays pristine)
# and --private-network, and shuts the container down at the end, then checks that no process, mount or cgroup of
# it is left. Every step has a time limit, so a hung container cannot hang the run.
set -uo pipefail
deb=$(realpath "${1:?usage: test-systemd.sh DEB BUILD_DIR}")
BUILD_DIR=$(realpath "${2:?usage: test-systemd.sh DEB BUILD_DIR}")
dashboard_deb=$(realpath -m "${3:-$(dirname "$deb")/accmon-dashboard_$(dpkg-deb -f "$deb" Version)_all.deb}")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/chroot-cache.sh"
work=$BUILD_DIR/systemd-test
name=accmon-test-$$
# What the root holds besides minbase and the .deb's dependencies. Add a package here when a check needs its tool.
# libpam-systemd: the PAM sessions on seat0 that checks/99-open.sh makes (polkit's "active local session").
root_packages=(systemd systemd-sysv dbus polkitd libpam-systemd)
# Bump when the way the root is made changes, so that the cached tarball is rebuilt.
root_recipe=1
# Time limits, in seconds.
boot_timeout=60        # from systemd-nspawn's start to `systemctl is-system-running` = running
check_timeout=120      # one check file (the transient unit's RuntimeMaxSec=)
shutdown_timeout=30    # from SIGTERM to systemd-nspawn's exit
lifetime=900           # the container's whole life: `timeout` stops systemd-nspawn past it, whatever happens
passed=0
failed=0
started=$(date +%s.%N)

pass() { printf 'PASS: %s\n' "$*"; passed=$((passed + 1)); }
fail() { printf 'FAIL: %s\n' "$*"; failed=$((failed + 1)); }
info() { printf '     %s\n' "$*"; }
indent() { sed 's/^/    /'; }
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
finish() {
  printf '\nsystemd test: %s s\n' "$(seconds_since "$started")"
  printf '%s passed, %s failed\n' "$passed" "$failed"
  [ "$failed" -eq 0 ]
  exit
}

[ "$(id -u)" = 0 ] || { fail "the systemd test needs root (systemd-nspawn)"; finish; }
command -v systemd-nspawn >/dev/null || { fail "no systemd-nspawn: make deps-systemd-test (package systemd-container)"; finish; }
mkdir -p "$work"

# --- the host: which way systemd-nspawn can run here --------------------------------------------------------------
# A host booted with systemd (sd_booted(3): /run/systemd/system exists, and PID 1 is systemd) runs systemd-machined:
# systemd-nspawn registers the container with it and gets a scope unit (machine-NAME.scope) as its cgroup, which
# the host's systemd removes when the container ends. Elsewhere (a CI container, this project's build machines)
# there is no machined: systemd-nspawn must not register (--register=no) and must stay in the cgroup it was started
# in (--keep-unit), so the script makes that cgroup itself (sd-NAME in each hierarchy systemd-nspawn uses) and
# removes it afterwards. Verified here: the second way, on a hybrid cgroup host (v1 name=systemd plus cgroup2 at
# /sys/fs/cgroup/unified). The first way and a pure cgroup2 host without systemd are written from systemd-nspawn(1)
# and not run here.
if [ -d /run/systemd/system ] && [ "$(cat /proc/1/comm)" = systemd ]; then
  host_mode=machined
  nspawn_mode_flags=()
  cgroup_roots=()
else
  host_mode=own-cgroup
  nspawn_mode_flags=(--register=no --keep-unit)
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    cgroup_roots=(/sys/fs/cgroup)
  else
    cgroup_roots=()
    for hierarchy in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
      mountpoint -q "$hierarchy" && cgroup_roots+=("$hierarchy")
    done
  fi
  if [ ${#cgroup_roots[@]} = 0 ]; then
    fail "no cgroup hierarchy for systemd-nspawn: neither cgroup2 at /sys/fs/cgroup nor /sys/fs/cgroup/systemd"
    finish
  fi
fi
info "host: PID 1 is $(cat /proc/1/comm); systemd-nspawn: $host_mode${cgroup_roots[*]:+ (cgroups in ${cgroup_roots[*]})}"

# What a run killed before it could clean up left (its name is accmon-test-PID): its empty cgroups and
# systemd-nspawn's directory for it. A cgroup that still has processes is refused: they would be that run's.
for cgroup_root in "${cgroup_roots[@]}"; do
  for stale in "$cgroup_root"/sd-accmon-test-*; do
    [ -d "$stale" ] || continue
    if [ -n "$(find "$stale" -name cgroup.procs -exec cat {} + 2>/dev/null)" ]; then
      fail "a container of an earlier run is still running in $stale: stop it (kill its processes), then run again"
      finish
    fi
    find "$stale" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
done
for stale in /run/systemd/nspawn/propagate/accmon-test-*; do
  [ -d "$stale" ] && ! kill -0 "${stale##*-}" 2>/dev/null && rm -rf --one-file-system "$stale"
done

# --- the root: cached tarball, extracted once -------------------------------------------------------------------
depends=$(dpkg-deb -f "$deb" Depends)
# The dashboard's dependencies but accmon itself (the .deb under test).
[ -f "$dashboard_deb" ] || { fail "no dashboard package at $dashboard_deb"; finish; }
depends="$depends, $(dpkg-deb -f "$dashboard_deb" Depends | tr ',' '\n' | sed 's/^ *//' | grep -v '^accmon ' | paste -sd, |
  sed 's/,/, /g')"
key=$(printf '%s\n' "$root_recipe" "${root_packages[*]}" "$depends" | sha256sum | cut -c1-12)
cache=$BUILD_DIR/chroot-cache/bookworm-systemd-$key.tar
root=$work/root-$key

# build_root_tarball: minbase plus root_packages and the .deb's dependencies, installed in a chroot.
build_root_tarball() {
  local build=$work/root-build status=0
  minbase_tarball "$BUILD_DIR/chroot-cache" "$work" || { tail -20 "$work/debootstrap.log"; return 1; }
  rm -rf --one-file-system "$build" && mkdir -p "$build" && tar -C "$build" -xf "$BUILD_DIR/chroot-cache/bookworm-minbase.tar"
  mount -t proc proc "$build/proc" && mount -t sysfs -o ro sysfs "$build/sys" && mount --bind /dev "$build/dev" || status=1
  # No service may start in the chroot while packages are installed (invoke-rc.d asks policy-rc.d).
  printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d" && chmod 0755 "$build/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$build/etc/resolv.conf"
  in_build() { chroot "$build" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
  [ "$status" = 0 ] && in_build apt-get update -q && in_build apt-get install -y -q --no-install-recommends "${root_packages[@]}" &&
    in_build apt-get satisfy -y -q --no-install-recommends "$depends" &&
    in_build systemctl mask console-getty.service getty@.service && in_build apt-get clean || status=1
  rm -f "$build/usr/sbin/policy-rc.d"
  for mount in "$build/dev" "$build/sys" "$build/proc"; do mountpoint -q "$mount" && umount "$mount"; done
  [ "$status" = 0 ] && tar -C "$build" -cf "$cache.partial" . && mv "$cache.partial" "$cache" || status=1
  rm -rf --one-file-system "$build" "$cache.partial"
  return "$status"
}

if [ ! -f "$cache" ]; then
  info "building the root (${root_packages[*]} and the package's dependencies), cached in $cache"
  step=$(date +%s.%N)
  if build_root_tarball >"$work/root-build.log" 2>&1; then
    pass "a bookworm root with ${root_packages[*]} and the package's dependencies ($(seconds_since "$step") s, cached)"
    rm -f "$BUILD_DIR"/chroot-cache/bookworm-systemd-*.tar.partial
    for old in "$BUILD_DIR"/chroot-cache/bookworm-systemd-*.tar; do [ "$old" = "$cache" ] || rm -f "$old"; done
  else
    fail "building the root ($work/root-build.log)"
    tail -20 "$work/root-build.log" | indent
    finish
  fi
fi
if [ ! -f "$root/.accmon-test-root" ]; then
  for old in "$work"/root-*; do [ -d "$old" ] && rm -rf --one-file-system "$old"; done
  if ! { mkdir -p "$root" && tar -C "$root" -xf "$cache" && touch "$root/.accmon-test-root"; }; then
    fail "extracting $cache into $root"
    finish
  fi
fi

# What the container sees read-only at /testdata: the .deb and the in-container harness.
testdata=$work/testdata
rm -rf "$testdata" && mkdir -p "$testdata" && cp "$deb" "$testdata/accmon.deb" &&
  cp "$dashboard_deb" "$testdata/accmon-dashboard.deb" && cp -r "$here/systemd-test" "$testdata/harness"

# --- boot -----------------------------------------------------------------------------------------------------------
launcher='' nspawn='' pid1='' pidns=''
# The processes of the container's PID namespace still alive (recorded once it booted).
container_processes() {
  [ -n "$pidns" ] || return 0
  local proc
  for proc in /proc/[0-9]*; do
    [ "$(readlink "$proc/ns/pid" 2>/dev/null)" = "$pidns" ] && printf '%s ' "${proc#/proc/}"
  done
}
remove_own_cgroups() {
  local cgroup_root
  for cgroup_root in "${cgroup_roots[@]}"; do
    [ -d "$cgroup_root/sd-$name" ] && find "$cgroup_root/sd-$name" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
}
# The processes in the cgroups made for the container (own-cgroup mode).
own_cgroup_processes() {
  local cgroup_root
  for cgroup_root in "${cgroup_roots[@]}"; do
    [ -d "$cgroup_root/sd-$name" ] && find "$cgroup_root/sd-$name" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u | tr '\n' ' '
}
# stop_container: orderly shutdown (systemd-nspawn turns SIGTERM into SIGRTMIN+3 for the container's systemd); past
# shutdown_timeout, SIGKILL for systemd-nspawn and every process of the container, and the clean-up that
# systemd-nspawn could not do. Returns 1 when it had to kill.
stop_container() {
  local deadline=$((SECONDS + shutdown_timeout)) forced=0 pid
  [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null && [ -n "$nspawn" ] && kill -TERM "$nspawn" 2>/dev/null
  while [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
  {  # (bash would report the killed launcher on standard error)
    if [ -n "$launcher" ] && kill -0 "$launcher"; then
      forced=1
      deadline=$((SECONDS + 10))
      while [ "$SECONDS" -lt "$deadline" ]; do
        # shellcheck disable=SC2046 # lists of pids, split on purpose
        pids=$(printf '%s ' "$nspawn" "$launcher" $(container_processes) $(own_cgroup_processes))
        [ -n "${pids// /}" ] || break
        for pid in $pids; do kill -KILL "$pid"; done
        sleep 0.05
      done
      rm -rf --one-file-system "/run/systemd/nspawn/propagate/$name"
    fi
    if [ -n "$launcher" ]; then
      wait "$launcher"
      nspawn_status=$?
    fi
  } 2>/dev/null
  launcher='' nspawn=''
  remove_own_cgroups
  return "$forced"
}
trap 'stop_container >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM

mounts_of_run() { grep -E " ($work|/run/systemd/nspawn/propagate/$name)[/ ]" /proc/self/mountinfo; }
nspawn_flags=(-q -D "$root" -M "$name" --boot --volatile=overlay --private-network --console=passive
  --bind-ro="$testdata:/testdata" "${nspawn_mode_flags[@]}")
step=$(date +%s.%N)
(
  for cgroup_root in "${cgroup_roots[@]}"; do
    mkdir -p "$cgroup_root/sd-$name" && echo "$BASHPID" >"$cgroup_root/sd-$name/cgroup.procs" || exit 125
  done
  exec timeout -k 10 "$lifetime" systemd-nspawn "${nspawn_flags[@]}"
) </dev/null >"$work/console.log" 2>&1 &
launcher=$!
deadline=$((SECONDS + boot_timeout))
while [ -z "$pid1" ] && kill -0 "$launcher" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
  nspawn=$(pgrep -P "$launcher" -x systemd-nspawn)
  [ -n "$nspawn" ] && pid1=$(pgrep -P "$nspawn" -x systemd)
  [ -n "$pid1" ] || sleep 0.02
done
in_container() { nsenter -t "$pid1" -a "$@"; }
booted=0
if [ -z "$pid1" ]; then
  fail "systemd-nspawn --boot: no systemd as the container's PID 1 within $boot_timeout s ($work/console.log)"
  tail -20 "$work/console.log" | indent
else
  pidns=$(readlink "/proc/$pid1/ns/pid")
  # Until the container's systemd listens on its private bus socket, systemctl cannot reach it and says 'offline'
  # or 'Failed to connect to bus': ask again.
  while boot_state=$(timeout "$((deadline - SECONDS + 1))" nsenter -t "$pid1" -a systemctl is-system-running --wait 2>&1)
    [[ $boot_state == offline || $boot_state == *'Failed to connect to bus'* ]] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.02
  done
  if [ "$boot_state" = running ]; then
    pass "booted: $(in_container systemctl --version | head -1 | cut -d' ' -f1-2) is PID 1, is-system-running: running ($(seconds_since "$step") s)"
    booted=1
  else
    fail "booted: is-system-running: '$boot_state' (expected running; $work/console.log)"
    in_container systemctl --failed --no-pager 2>&1 | indent
  fi
fi

# --- the checks: each file of checks/ as a transient unit in the container ----------------------------------------
# A file's PASS and FAIL lines are counted as they come. A file that printed neither, or that stopped with a
# non-zero status without a FAIL line (killed at its time limit, say), counts as one FAIL. A failure in a 00- file
# (the set-up: installing the package) stops the run: the other checks need it.
# SYSTEMD_TEST_CHECKS=GLOB runs only the check files whose names match (and the set-up), e.g. '50-*'.
if [ "$booted" = 1 ]; then
  for file in "$here"/systemd-test/checks/[0-9]*.sh; do
    check_name=$(basename "$file" .sh)
    # shellcheck disable=SC2053 # a glob on purpose
    [[ $check_name == 00-* || $check_name == ${SYSTEMD_TEST_CHECKS:-*} || $check_name.sh == ${SYSTEMD_TEST_CHECKS:-*} ]] ||
      continue
    results=0 file_failed=0 status=
    while IFS= read -r line; do
      case $line in
        '@@status '*) status=${line#@@status }; continue ;;
        PASS:*) passed=$((passed + 1)); results=$((results + 1)) ;;
        FAIL:*) failed=$((failed + 1)); results=$((results + 1)); file_failed=$((file_failed + 1)) ;;
      esac
      printf '%s\n' "$line"
    done < <(
      timeout -k 5 "$((check_timeout + 15))" nsenter -t "$pid1" -a systemd-run --wait --pipe --quiet --collect \
        --unit="accmon-check-$check_name" -p RuntimeMaxSec="$check_timeout" \
        -- /testdata/harness/run-check.sh "checks/$check_name.sh" </dev/null 2>&1
      echo "@@status $?"
    )
    if [ "$results" = 0 ]; then
      fail "checks/$check_name.sh: no PASS or FAIL line (status ${status:-?})"
      file_failed=1
    elif [ "${status:-1}" != 0 ] && [ "$file_failed" = 0 ]; then
      fail "checks/$check_name.sh stopped with status ${status:-?} (time limit: $check_timeout s)"
      file_failed=1
    fi
    if [ "$file_failed" != 0 ] && [[ $check_name == 00-* ]]; then
      fail "the other checks were not run: checks/$check_name.sh, the set-up, failed"
      break
    fi
  done
  if [ "$failed" != 0 ]; then
    in_container journalctl -b --no-pager -o short-monotonic >"$work/journal.txt" 2>&1
    info "the container's journal: $work/journal.txt"
  fi
  # SYSTEMD_TEST_KEEP=1: leave the container up to look around in it, until a line (Enter) on standard input.
  if [ "${SYSTEMD_TEST_KEEP:-0}" = 1 ]; then
    info "the container runs; enter it with: nsenter -t $pid1 -a bash   (press Enter here to shut it down)"
    read -r -t "$lifetime" _ || true
  fi
fi

# --- shutdown, and what it left behind ----------------------------------------------------------------------------
step=$(date +%s.%N)
nspawn_status=
if stop_container; then
  pass "shut down: systemd-nspawn exited $nspawn_status after SIGTERM ($(seconds_since "$step") s)"
else
  fail "shut down: still running $shutdown_timeout s after SIGTERM; killed (SIGKILL)"
  tail -20 "$work/console.log" | indent
fi
leftovers=()
processes=$(container_processes)
[ -n "$processes" ] && leftovers+=("processes of the container: $processes")
mounts=$(mounts_of_run)
[ -n "$mounts" ] && leftovers+=("mounts: $mounts")
for cgroup_root in "${cgroup_roots[@]}"; do
  [ -e "$cgroup_root/sd-$name" ] && leftovers+=("cgroup $cgroup_root/sd-$name")
done
if [ "$host_mode" = machined ]; then
  # The scope systemd-machined made for the container: machine-accmon\x2dtest\x2dPID.scope.
  scope="machine-$(systemd-escape "$name").scope"
  [ "$(systemctl is-active "$scope")" = inactive ] || leftovers+=("$scope: $(systemctl is-active "$scope")")
  machinectl show "$name" >/dev/null 2>&1 && leftovers+=("machine $name still registered with systemd-machined")
fi
[ -e "/run/systemd/nspawn/propagate/$name" ] && leftovers+=("/run/systemd/nspawn/propagate/$name")
if [ ${#leftovers[@]} = 0 ]; then
  pass "nothing left behind: no process of the container's PID namespace, no mount of it, no cgroup ($host_mode)"
else
  fail "left behind:"
  printf '%s\n' "${leftovers[@]}" | indent
fi
finish
