# accmond.socket: where it listens, who may connect, and that the first client starts accmond.service.

expect "accmond.socket listens at /run/accmon/accmon.sock" "$(prop accmond.socket Listen)" \
  "/run/accmon/accmon.sock (Stream)"
expect "/run/accmon/accmon.sock is a socket, root:accmon, mode 0660; /run/accmon root:root 0755" \
  "$(stat -c '%F %U:%G %a' /run/accmon/accmon.sock) / $(stat -c '%F %U:%G %a' /run/accmon)" \
  "socket root:accmon 660 / directory root:root 755"
start=$(cursor)
check "the first 'accmon list' is answered" accmon list
expect "... and it started accmond.service (socket activation)" \
  "$(prop accmond.service ActiveState)/$(prop accmond.service SubState)" active/running
check "accmond serves the socket systemd passed it" \
  journal_has "$start" 'listening on /run/accmon/accmon.sock \(socket from the service manager\)' -u accmond
# systemd prepares a service's directories as its own: a RuntimeDirectory= that the socket unit made first would be
# chowned to accmond (under DynamicUser=, moved into /run/private), and every client but root would lose the socket.
expect "with accmond running, /run/accmon is still the socket unit's directory, and the socket root:accmon 0660" \
  "$(stat -c '%F %U:%G %a' /run/accmon/accmon.sock) / $(stat -c '%F %U:%G %a' /run/accmon)" \
  "socket root:accmon 660 / directory root:root 755"
