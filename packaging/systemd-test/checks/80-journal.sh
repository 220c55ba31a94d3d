# accmond logs to the journal with structured fields: ACCESSORY_ID, CONNECTION_ID, MESSAGE_ID.

use_test_service
start=$(cursor)
r=$(plug serial 1d6b 0104 JR-1 "Rejected R")   # vendor 1d6b: no entry admits it, accmond logs the rejection
# journalctl -o json writes one object per line, as "KEY" : "value".
entry_of_r() { journal_after "$start" -u accmond.service -o json | grep -E "\"CONNECTION_ID\" *: *\"$r\""; }
if wait_for 5 entry_of_r >/dev/null; then
  entry=$(entry_of_r | tail -1)
  pass "journalctl -u accmond -o json: the rejection of connection $r carries CONNECTION_ID"
  check "... ACCESSORY_ID" grep -qE '"ACCESSORY_ID" *: *"serial:1d6b:0104:serial=JR-1"' <<<"$entry"
  check "... and MESSAGE_ID" grep -qE '"MESSAGE_ID" *: *"[0-9a-f]{32}"' <<<"$entry"
else
  fail "journalctl -u accmond -o json: no entry with CONNECTION_ID=$r within 5 s"
  journal_after "$start" -u accmond.service -o cat | indent
fi
# The query accmond(8) shows (by connection), and one by kind of message.
finds_rejection_of_r() { journalctl -b -q --no-pager -o cat -u accmond.service CONNECTION_ID="$r" | grep -q '^accessory rejected: '; }
check "journalctl -u accmond CONNECTION_ID=$r finds the rejection" finds_rejection_of_r
finds_listening() {
  journalctl -b -q --no-pager -o cat -u accmond.service MESSAGE_ID=fde6b016229a48e0801432d9f53682a1 | grep -q '^listening on '
}
check "journalctl -u accmond MESSAGE_ID=fde6b016229a48e0801432d9f53682a1 finds accmond's 'listening on' lines" finds_listening
