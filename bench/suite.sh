#!/bin/bash
# One bench suite against one build: `make bench` (run.sh) and the side-by-side tool (ab.sh) both run suites here,
# so that both measure the same way.
#
#   bench/suite.sh run SUITE BIN_DIR TOOLS_DIR CLIENT SOURCE_DIR
#       runs SUITE with the binaries in BIN_DIR (accmond, accmon, accmon-mqtt), the compiled tools in TOOLS_DIR, the
#       bench's AccmonClient app CLIENT, and SOURCE_DIR the source tree of that build (its Python client); one JSON
#       line per measurement on stdout
#   bench/suite.sh supports SUITE BIN_DIR SOURCE_DIR
#       exit status 0 when that build has what SUITE needs (an older revision may lack a binary, a flag or the Python
#       client); otherwise says what is missing on stderr and exits 1
#
# Environment: BENCH_REPEATS (default 3; fan-out at least 11, start-up at least 5), BENCH_FANOUT_COUNTS (default
# 1,10,100,1000), BENCH_MQTT_OUTAGE (seconds, default 600), BENCH_HOSTILE_SECONDS (seconds per attack, default 20),
# BENCH_DASHBOARD_SECONDS (seconds of load per repeat, default 60), BENCH_SCALE_HOSTS and BENCH_SCALE_ACCESSORIES (the
# scale and sites suites' fleet, default 500 x 100).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SUITES="stream fanout memory startup instructions sysfs python mqtt scale sites census hostile history claims dashboard bus open"

supports() {
    local suite=$1 bin=$2 source=$3
    case $suite in
        stream|fanout|memory|startup|instructions|sysfs) [ -x "$bin/accmond" ] && [ -x "$bin/accmon" ] ;;
        python) [ -d "$source/clients/python/src/accmon" ] || { echo "no clients/python in $source" >&2; return 1; } ;;
        mqtt) [ -x "$bin/accmon-mqtt" ] || { echo "no accmon-mqtt in $bin" >&2; return 1; } ;;
        claims)
            "$bin/accmon" --help 2>&1 | grep -q -- 'claim ' || { echo "$bin/accmon has no claim" >&2; return 1; } ;;
        history)
            "$bin/accmond" --help 2>&1 | grep -q -- '--history-entries' \
                || { echo "$bin/accmond has no --history-entries" >&2; return 1; } ;;
        dashboard)
            [ -x "$bin/accmon-mqtt" ] || { echo "no accmon-mqtt in $bin" >&2; return 1; }
            [ -d "$source/clients/dashboard/src/accmon_dashboard" ] ||
                { echo "no clients/dashboard in $source" >&2; return 1; } ;;
        scale) "$bin/accmon" list --help 2>&1 | grep -q -- '--broker' || { echo "no accmon list --broker in $bin" >&2; return 1; } ;;
        sites)
            grep -q 'accmon-centre.conf (on each site' "$source/docs/MQTT.md" 2>/dev/null \
                || { echo "$source/docs/MQTT.md has no site configuration" >&2; return 1; } ;;
        census)
            "$bin/accmon" list --help 2>&1 | grep -q -- '--census-wait' || { echo "$bin/accmon has no --census-wait" >&2; return 1; } ;;
        hostile)
            # The attacks need the limits of issue 21 (without them accmond has no answer to the fd-limit attack).
            "$bin/accmond" --help 2>&1 | grep -q -- '--max-connections-per-user' \
                || { echo "$bin/accmond has no --max-connections-per-user" >&2; return 1; } ;;
        bus)
            # accmond on the bus (issue 39): --dbus, and the build's bus policy for the bench's private bus.
            "$bin/accmond" --help 2>&1 | grep -q -- '--dbus' || { echo "$bin/accmond has no --dbus" >&2; return 1; }
            [ -f "$source/packaging/dbus/org.accmon.Accmon1.conf" ] \
                || { echo "no packaging/dbus/org.accmon.Accmon1.conf in $source" >&2; return 1; } ;;
        open)
            # Accessory.Open (issue 40): accmon open, and the bus as for the bus suite.
            "$bin/accmon" --help 2>&1 | grep -q -- 'open ' || { echo "$bin/accmon has no open" >&2; return 1; }
            [ -f "$source/packaging/dbus/org.accmon.Accmon1.conf" ] \
                || { echo "no packaging/dbus/org.accmon.Accmon1.conf in $source" >&2; return 1; } ;;
        *) echo "bench: unknown suite '$suite' ($SUITES)" >&2; return 1 ;;
    esac
}

run() {
    local suite=$1 bin=$2 tools=$3 client=$4 source=$5
    local repeats=${BENCH_REPEATS:-3}
    case $suite in
        stream) /usr/bin/python3 "$here/udev_stream.py" "$bin" "$tools" "$client" --repeats "$repeats" ;;
        fanout) /usr/bin/python3 "$here/fanout.py" "$bin" "$tools" --repeats "$(( repeats > 11 ? repeats : 11 ))" \
                    --counts "${BENCH_FANOUT_COUNTS:-1,10,100,1000}" ;;
        memory) /usr/bin/python3 "$here/memory.py" "$bin" --repeats "$repeats" ;;
        startup) /usr/bin/python3 "$here/startup.py" "$bin" --repeats "$(( repeats > 5 ? repeats : 5 ))" ;;
        instructions) /usr/bin/python3 "$here/instructions.py" "$bin" "$tools" "$client" ;;
        sysfs) /usr/bin/python3 "$here/sysfs_read.py" "$tools" --repeats "$repeats" ;;
        python) /usr/bin/python3 "$here/python_client.py" "$bin" "$tools" --repeats "$repeats" \
                    --python-source "$source/clients/python/src" ;;
        mqtt) /usr/bin/python3 "$here/mqtt.py" "$bin" "$tools" --repeats "$repeats" \
                  --outage-seconds "${BENCH_MQTT_OUTAGE:-600}" ;;
        scale) /usr/bin/python3 "$here/scale.py" "$bin" "$tools" --repeats "$repeats" \
                   --hosts "${BENCH_SCALE_HOSTS:-500}" --accessories "${BENCH_SCALE_ACCESSORIES:-100}" ;;
        sites) /usr/bin/python3 "$here/sites.py" "$bin" "$tools" --docs "$source/docs/MQTT.md" --repeats "$repeats" \
                   --hosts "${BENCH_SCALE_HOSTS:-500}" --accessories "${BENCH_SCALE_ACCESSORIES:-100}" ;;
        census) /usr/bin/python3 "$here/census.py" "$bin" "$tools" --repeats "$repeats" \
                    --hosts "${BENCH_SCALE_HOSTS:-500}" --accessories "${BENCH_SCALE_ACCESSORIES:-100}" ;;
        hostile) /usr/bin/python3 "$here/hostile.py" "$bin" --attack-seconds "${BENCH_HOSTILE_SECONDS:-20}" \
                     --rounds "$repeats" ;;
        history) /usr/bin/python3 "$here/history.py" "$bin" --rounds "$(( repeats > 5 ? repeats : 5 ))" ;;
        claims) /usr/bin/python3 "$here/claims.py" "$bin" "$tools" --repeats "$repeats" --source "$source" ;;
        dashboard) /usr/bin/python3 "$here/dashboard.py" "$bin" --source "$source/clients/dashboard/src" \
                       --repeats "$repeats" --seconds "${BENCH_DASHBOARD_SECONDS:-60}" ;;
        bus) /usr/bin/python3 "$here/bus_stream.py" "$bin" "$tools" --repeats "$repeats" \
                 --policy "$source/packaging/dbus/org.accmon.Accmon1.conf"
             /usr/bin/python3 "$here/bus_memory.py" "$bin" "$tools" --repeats "$repeats" \
                 --policy "$source/packaging/dbus/org.accmon.Accmon1.conf" ;;
        open) /usr/bin/python3 "$here/open.py" "$bin" "$tools" --repeats "$repeats" --source "$source" ;;
        *) echo "bench: unknown suite '$suite' ($SUITES)" >&2; return 64 ;;
    esac
}

command=${1:-}
shift || true
case $command in
    run) [ $# -eq 5 ] || { echo "usage: bench/suite.sh run SUITE BIN_DIR TOOLS_DIR CLIENT SOURCE_DIR" >&2; exit 64; }
         supports "$1" "$2" "$5" || exit 1
         run "$@" ;;
    supports) [ $# -eq 3 ] || { echo "usage: bench/suite.sh supports SUITE BIN_DIR SOURCE_DIR" >&2; exit 64; }
              supports "$@" ;;
    list) echo "$SUITES" ;;
    *) echo "usage: bench/suite.sh run|supports|list ..." >&2; exit 64 ;;
esac
