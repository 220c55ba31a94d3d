# The unit's hardening as the container's systemd sees it (all drop-ins of the later checks are not there yet).

check_exposure accmond.service
