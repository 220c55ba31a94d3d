#!/bin/bash
# Runs one check file inside the test container: packaging/test-systemd.sh starts it as a transient unit of the
# container's systemd (systemd-run --wait --pipe), so that what the checks start in the background (accmon watch)
# ends with the unit. Prints the file's PASS and FAIL lines; exits 1 when one failed.
#
# Usage: run-check.sh checks/NN-name.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 2
# shellcheck source=lib.sh
. ./lib.sh
# shellcheck disable=SC1090 # the check file named on the command line
. "./${1:?usage: run-check.sh checks/NN-name.sh}"
[ "$failed" = 0 ]
