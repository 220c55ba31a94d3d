# Set-up: installs the .deb as an admin would, in the booted container (its dependencies are in the root already:
# the container has no network). postinst runs under a live systemd here, so it must enable and start the socket.

check "dpkg -i accmon.deb in the booted container" dpkg -i /testdata/accmon.deb
expect "postinst enabled accmond.socket" "$(systemctl is-enabled accmond.socket)" enabled
expect "postinst started accmond.socket" "$(systemctl is-active accmond.socket)" active
expect "accmond.service waits for its first client (not started by the installation)" \
  "$(systemctl is-active accmond.service)" inactive
