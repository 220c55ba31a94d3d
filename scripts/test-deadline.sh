#!/usr/bin/env bash
# usage: scripts/test-deadline.sh SECONDS COMMAND [ARGUMENT...]
#
# Runs COMMAND (`swift test ...` in `make test`), its output shown as it comes. If it has not finished after SECONDS,
# prints the tests that started and did not finish (from Swift Testing's "◇ Test ... started." lines) and the stacks
# of every thread of the test processes still running (gdb when installed, else each thread's name and wait channel),
# then stops the command and exits 124. A hung suite then fails in minutes, saying where it hung, instead of running
# into CI's time limit with nothing to show.
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 SECONDS COMMAND [ARGUMENT...]" >&2
    exit 64
fi
limit=$1
shift
log=$(mktemp /tmp/accmon-test-output.XXXXXX)
trap 'rm -f "$log"' EXIT

# In a session of its own, so that the command and every process it started can be found and stopped together; its
# output line-buffered (stdbuf reaches the test binary too), so that the log says which tests started.
setsid bash -o pipefail -c 'stdbuf -oL -eL "$@" 2>&1 | tee "$0"' "$log" "$@" &
runner=$!
start=$SECONDS
while kill -0 "$runner" 2>/dev/null; do
    if ((SECONDS - start >= limit)); then
        {
            echo
            echo "test-deadline: still running after $limit s; the tests that started and did not finish:"
            python3 - "$log" <<'EOF'
import re, sys
started, finished = [], set()
for line in open(sys.argv[1], errors="replace"):
    if "Test case" in line or line.startswith(("◇ Test run started", "✔ Test run", "✘ Test run")):
        continue
    begun = re.match(r"^\S+ Test (.+?) started\.$", line.rstrip("\n"))
    if begun:
        started.append(begun.group(1))
    ended = re.match(r"^\S+ Test (.+?)(?: with \d+ test cases?)? (?:passed|failed|skipped)", line)
    if ended:
        finished.add(ended.group(1))
for name in dict.fromkeys(started):
    if name not in finished:
        print("  " + name)
EOF
            for pid in $(pgrep -s "$runner"); do
                tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '\.xctest ' || continue
                echo "test-deadline: threads of $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-120) (pid $pid):"
                if command -v gdb >/dev/null; then
                    timeout 60 gdb -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 30" 2>/dev/null |
                        grep -E '^(Thread|#)'
                else
                    for task in /proc/"$pid"/task/*; do
                        echo "  $(cat "$task/comm") waiting in $(cat "$task/wchan")"
                    done
                fi
            done
        } >&2
        # By session, not process group: SwiftPM starts the test binary in a process group of its own, which a kill of
        # the runner's group missed (the binary went on, holding what it held: a lock, a daemon).
        pkill -TERM -s "$runner" 2>/dev/null
        for _ in $(seq 50); do
            pgrep -s "$runner" >/dev/null || break
            sleep 0.1
        done
        pkill -KILL -s "$runner" 2>/dev/null
        wait "$runner" 2>/dev/null
        exit 124
    fi
    sleep 1
done
wait "$runner"
