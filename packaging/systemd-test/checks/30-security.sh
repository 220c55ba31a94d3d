# The unit's hardening as the container's systemd sees it (all drop-ins of the later checks are not there yet).

report=$(systemd-analyze security --no-pager accmond.service 2>&1)
exposure=$(sed -n 's/.*Overall exposure level for accmond.service: \([0-9.]*\).*/\1/p' <<<"$report")
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
  pass "systemd-analyze security accmond.service: exposure $exposure (at most 2.0)"
else
  fail "systemd-analyze security accmond.service: exposure '${exposure:-?}' (at most 2.0)"
  grep -v '✓' <<<"$report" | indent 60
fi
