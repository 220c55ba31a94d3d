# What accmond may not start: the manifest refuses units outside the form (accmon manifest check, and a reload),
# and polkit refuses accmond's user any other unit, any other verb, and a transient unit of its own making.

use_test_service
install_test_files launch

# The manifest: an entry naming rescue.target.
bad=$scratch/bad-launch.json
cat >"$bad" <<'JSON'
{"version": 1, "accessories": [
  {"name": "rescue", "match": {"id": "16c0:0001"}, "launch": {"unit": "rescue.target"}}
]}
JSON
output=$(accmon manifest check "$bad" 2>&1)
status=$?
expect "accmon manifest check refuses an entry whose launch names rescue.target: exit 65" "$status" 65
check "... with file:line:column: '$output'" grep -qE "^$bad:2:71: entry 'rescue': launch.unit: 'rescue.target' is refused" <<<"$output"
cp "$bad" /etc/accmon/manifest.d/91-bad-launch.json
start=$(cursor)
refute "systemctl reload accmond with that entry in a drop-in fails" systemctl reload accmond.service
check "... the journal names the problem with file:line:column" \
  journal_has "$start" "^manifest: /etc/accmon/manifest.d/91-bad-launch.json:2:71: entry 'rescue': launch.unit" -u accmond -o cat
plug usb 16c0 0001 RESCUE-1 "Rescue" >/dev/null
sleep 1
expect "... and plugging the accessory it names starts nothing: rescue.target stays inactive" \
  "$(systemctl is-active rescue.target)" inactive
rm -f /etc/accmon/manifest.d/91-bad-launch.json
systemctl reload accmond.service

# polkit, asked by systemd for accmond's user: busctl as accmond.
# as_accmond METHOD SIGNATURE ARGS...: a call to systemd's manager as the user accmond; prints the reply or the error.
as_accmond() {
  local method=$1
  shift
  setpriv --reuid=accmond --regid=accmon --init-groups --reset-env -- busctl call --timeout=10 -- \
    org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager "$method" "$@" 2>&1
}
refused() { ! output=$("$@" 2>&1) && grep -qE 'Access denied|Interactive authentication required' <<<"$output"; }
refused_as_accmond() {
  if refused as_accmond "$@"; then pass "polkit refuses accmond's user $1 ${3:-} ($output)"; else
    fail "polkit refuses accmond's user $1 ${3:-}"; printf '%s\n' "$output" | indent; fi
}
refused_as_accmond StartUnit ss rescue.target replace
expect "... rescue.target is still inactive" "$(systemctl is-active rescue.target)" inactive
refused_as_accmond StartUnit ss getty@tty1.service replace
refused_as_accmond StartUnit ss accmon-launchtest@abc.service replace
refused_as_accmond RestartUnit ss accmon-launchtest@4242.service replace
refused_as_accmond StartTransientUnit 'ssa(sv)a(sa(sv))' accmon-evil@4242.service replace \
  1 ExecStart 'a(sasb)' 1 /bin/sh 3 /bin/sh -c 'touch /run/accmon-test/evil' false 0
refused_as_accmond StartTransientUnit 'ssa(sv)a(sa(sv))' accmon-launchtest@4243.service replace \
  1 ExecStart 'a(sasb)' 1 /bin/sh 3 /bin/sh -c 'touch /run/accmon-test/evil' false 0
refute "... no transient unit ran (no /run/accmon-test/evil)" test -e "$scratch/evil"
check "polkit lets accmond's user start accmon-launchtest@4242.service (a numeric instance of the form)" \
  as_accmond StartUnit ss accmon-launchtest@4242.service replace
check "... and stop it" as_accmond StopUnit ss accmon-launchtest@4242.service replace
ensure_user accmon-member accmon
member_refused() {
  refused setpriv --reuid=accmon-member --regid=accmon-member --init-groups --reset-env -- busctl call --timeout=10 \
    org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager StartUnit ss \
    accmon-launchtest@4244.service replace
}
check "the rule is for accmond's user only: a member of the group accmon is refused the same unit" member_refused
