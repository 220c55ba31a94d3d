# accmon-dashboard.service under systemd: installed disabled; its hardening as this systemd scores it; as a dynamic
# user in the group accmon it reads accmond's socket (local mode); beyond loopback without credentials it refuses to
# start, says why and is not restarted; with credentials handed over by LoadCredential= from a file only root may
# read, it answers only those who give them.

check "dpkg -i accmon-dashboard.deb in the booted container" dpkg -i /testdata/accmon-dashboard.deb
expect "the package does not enable accmon-dashboard.service" "$(systemctl is-enabled accmon-dashboard.service)" disabled
expect "... nor start it" "$(systemctl is-active accmon-dashboard.service)" inactive
report=$(systemd-analyze security --no-pager accmon-dashboard.service 2>&1)
exposure=$(sed -n 's/.*Overall exposure level for accmon-dashboard.service: \([0-9.]*\).*/\1/p' <<<"$report")
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 1.5) }'; then
  pass "systemd-analyze security accmon-dashboard.service: exposure $exposure (at most 1.5)"
else
  fail "systemd-analyze security accmon-dashboard.service: exposure '${exposure:-?}' (at most 1.5)"
  grep -v '✓' <<<"$report" | indent 60
fi

# http STATUS URL [HEADER]: whether a GET of URL answers STATUS (python3 is there: the package depends on it).
http() {
  python3 - "$@" <<'PY'
import sys, urllib.error, urllib.request
status, url = int(sys.argv[1]), sys.argv[2]
request = urllib.request.Request(url, headers=dict([sys.argv[3].split(": ", 1)]) if len(sys.argv) > 3 else {})
try:
    got = urllib.request.urlopen(request, timeout=3).status
except urllib.error.HTTPError as error:
    got = error.code
except OSError:
    got = None
sys.exit(0 if got == status else 1)
PY
}
# state_has TEXT: whether /api/state holds TEXT.
state_has() {
  python3 -c 'import sys, urllib.request; sys.exit(sys.argv[1] not in urllib.request.urlopen("http://127.0.0.1:8090/api/state").read().decode())' "$1"
}

use_test_service
connection=$(plug serial 0403 6001 DASH-1 "Dashboard adapter")
config=/etc/accmon/dashboard.json
cp "$config" "$scratch/dashboard.json.shipped"
systemctl start accmon-dashboard.service
check "accmon-dashboard.service starts as shipped (local mode, 127.0.0.1:8090): /healthz answers 200" \
  wait_for 20 http 200 http://127.0.0.1:8090/healthz
check "... and shows accmond's accessory (connection $connection) through the socket of the group accmon" \
  wait_for 10 state_has '"serialNumber":"DASH-1"'
pid=$(prop accmon-dashboard.service MainPID)
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
check "... as a dynamic user (uid $uid, in systemd's range 61184-65519) with the group accmon" bash -c \
  "[ $uid -ge 61184 ] && [ $uid -le 65519 ] && grep -qE '^Groups:.*\\b$(getent group accmon | cut -d: -f3)\\b' /proc/$pid/status"
# reader_uid: the uid of the service's child `accmon watch` (there is no ps in the container).
reader_uid() {
  local child
  for child in $(cat "/proc/$pid/task/$pid/children"); do
    tr '\0' ' ' <"/proc/$child/cmdline" | grep -q 'accmon watch --json' && awk '/^Uid:/ { print $2 }' "/proc/$child/status"
  done
}
expect "... and its reader (accmon watch --json) runs as that user too" "$(reader_uid)" "$uid"
systemctl stop accmon-dashboard.service

# Beyond loopback without credentials: refused, with the reason in the journal, and no restart loop.
printf '{"listen": "0.0.0.0:8090"}\n' >"$config"
start=$(cursor)
systemctl start accmon-dashboard.service
is_failed() { [ "$(systemctl is-active accmon-dashboard.service)" = failed ]; }
check "listening on 0.0.0.0:8090 without credentials: the service fails" wait_for 15 is_failed
expect "... with exit status 65 (a problem of the configuration file)" "$(prop accmon-dashboard.service ExecMainStatus)" 65
check "... saying why in the journal" journal_has "$start" "is reachable from other machines" -u accmon-dashboard -o cat
expect "... and is not restarted (RestartPreventExitStatus=)" "$(prop accmon-dashboard.service NRestarts)" 0
systemctl reset-failed accmon-dashboard.service

# With credentials: a root-only file handed to the service with LoadCredential=.
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
install -m 0600 /dev/null /etc/accmon/dashboard-auth
printf '%s\n' "$token" >/etc/accmon/dashboard-auth
printf '[Service]\nLoadCredential=dashboard-auth:/etc/accmon/dashboard-auth\n' | dropin accmon-dashboard.service 50-credentials
printf '{"listen": "0.0.0.0:8090", "authFile": "${CREDENTIALS_DIRECTORY}/dashboard-auth"}\n' >"$config"
systemctl start accmon-dashboard.service
check "with LoadCredential= and \"authFile\": \"\${CREDENTIALS_DIRECTORY}/dashboard-auth\": /healthz answers 200" \
  wait_for 20 http 200 http://127.0.0.1:8090/healthz
check "... the page without credentials: 401" http 401 http://127.0.0.1:8090/
check "... with a wrong token: 401" http 401 http://127.0.0.1:8090/api/state "Authorization: Bearer ${token%?}x"
check "... with the token: 200" http 200 http://127.0.0.1:8090/api/state "Authorization: Bearer $token"
credential=/run/credentials/accmon-dashboard.service/dashboard-auth
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$(prop accmon-dashboard.service MainPID)/status")
expect "... the service's copy of the file is its own and only it may read it" "$(stat -c '%u %a' "$credential")" "$uid 400"
refute "... a member of the group accmon cannot read the original" \
  setpriv --reuid=nobody --regid=nogroup --groups="$(getent group accmon | cut -d: -f3)" cat /etc/accmon/dashboard-auth
systemctl stop accmon-dashboard.service

# systemd 252 does not start a service whose LoadCredential= names a missing file: that is why the shipped unit names
# no credential and the admin adds the line with the file (DASHBOARD.md).
rm /etc/accmon/dashboard-auth
printf '{}\n' >"$config"
systemctl start accmon-dashboard.service 2>/dev/null
credentials_failed() { [ "$(prop accmon-dashboard.service ExecMainStatus)" = 243 ]; }
check "a LoadCredential= whose file is missing keeps the service from starting (status 243, CREDENTIALS)" \
  wait_for 10 credentials_failed
systemctl stop accmon-dashboard.service 2>/dev/null
systemctl reset-failed accmon-dashboard.service 2>/dev/null
remove_dropin accmon-dashboard.service 50-credentials
cp "$scratch/dashboard.json.shipped" "$config"
accmon simulate disconnect "$connection" >/dev/null
