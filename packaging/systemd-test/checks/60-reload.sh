# systemctl reload accmond: accmond reads its manifest again; a broken manifest is refused, the old one stays in
# force, and the journal says why.

use_test_service
ensure_user accmon-member accmon
reload_manifest=/etc/accmon/manifest.d/60-reload-test.json
rm -f "$reload_manifest"
systemctl reload accmond.service
d=$(plug serial 1a86 7523 RL-D "CH340 D")   # vendor 1a86: not in the test manifest
member_sees_d() { as_user accmon-member accmon list --json | grep -q "\"connectionID\":$d,"; }
refute "before: the manifest rejects CH340 D (a member of accmon does not see it)" member_sees_d

cat >"$reload_manifest" <<'JSON'
{"version": 1, "accessories": [{"name": "reload-test", "match": {"id": "1a86:*"}}]}
JSON
pid=$(main_pid)
start=$(cursor)
check "systemctl reload accmond, with an entry for vendor 1a86 added" systemctl reload accmond.service
check "... accmond loaded the new manifest (journal)" journal_has "$start" '^manifest loaded: [0-9]+ entries' -u accmond -o cat
check "... and now admits CH340 D (the member sees it)" member_sees_d
expect "... without a restart (same main PID)" "$(main_pid)" "$pid"

printf '{"version": 1, "accessories": [{"name": "reload-test", "match": {"id": "1a86:*"}}\n' >"$reload_manifest"
start=$(cursor)
reload_output=$(systemctl reload accmond.service 2>&1)
status=$?
reload_job_failed() {
  printf '%s\n' "$reload_output"
  [ "$status" != 0 ] && grep -q 'Job for accmond.service failed' <<<"$reload_output" &&
    journal_has "$start" '^Reload failed for accmond.service' -u accmond -o cat
}
check "systemctl reload accmond with a broken manifest fails (status $status): systemd's reload job failed" \
  reload_job_failed
check "... the journal says it was refused and the previous manifest stays" \
  journal_has "$start" '^manifest: reload refused; the previous manifest stays in force' -u accmond -o cat
check "... and names the problem with file:line:column" \
  journal_has "$start" "^manifest: $reload_manifest:[0-9]+:[0-9]+: " -u accmond -o cat
check "... the previous manifest is in force (the member still sees CH340 D)" member_sees_d
expect "... and accmond runs on (same main PID, active)" "$(main_pid) $(systemctl is-active accmond.service)" "$pid active"

# SIGHUP reloads too (what `systemctl kill -s HUP accmond` sends): the test entry removed, CH340 D is rejected again.
rm -f "$reload_manifest"
start=$(cursor)
systemctl kill --kill-whom=main --signal=HUP accmond.service
check "SIGHUP (systemctl kill -s HUP accmond) reloads the manifest as well" \
  journal_has "$start" '^manifest loaded: [0-9]+ entries' -u accmond -o cat
member_misses_d() { ! member_sees_d; }
check "... which no longer admits CH340 D" wait_for 5 member_misses_d
expect "... and accmond runs on (same main PID, active)" "$(main_pid) $(systemctl is-active accmond.service)" "$pid active"
