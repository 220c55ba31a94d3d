# The socket's permissions decide who may connect: members of the group accmon (and root), nobody else.

ensure_user accmon-outsider
ensure_user accmon-member accmon
output=$(as_user accmon-outsider accmon list 2>&1)
status=$?
expect "a user outside the group accmon cannot connect: accmon list exits 77 (permission denied)" "$status" 77
check "... saying so: '$output'" grep -q 'Permission denied' <<<"$output"
check "a member of the group accmon can: accmon list" as_user accmon-member accmon list
member_sees_own_uid() { as_user accmon-member accmon status --json | grep -q "\"uid\":$(id -u accmon-member)[,}]"; }
check "... and accmond knows it by its own uid (accmon status --json)" member_sees_own_uid
