#!/bin/bash
# Compiles the bench's C tools (bench/tools/*.c) into DIR: the uevent sender, the line stamper, the fan-out ends,
# the minimal relay, the scale suite's fleet publisher and plain windowed subscriber, and the MQTT bridge's floors
# (mqtt_pairs: the broker alone; mqtt_relay: every hop of the bridge, none of its work), and the bus suite's clients
# (bus_client: sd-bus; bus_glib_client: GLib's GDBus; bus_subscribers: many subscriptions) and floor (bus_relay).
# Used by run.sh and ab.sh.
#
#   bench/tools/build.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: bench/tools/build.sh DIR}
mkdir -p "$out"
cc -O2 -Wall -o "$out/uevent_blast" "$here/uevent_blast.c"
cc -O2 -Wall -o "$out/stamp" "$here/stamp.c"
cc -O2 -Wall -pthread -o "$out/fanout" "$here/fanout.c"
cc -O2 -Wall -o "$out/relay" "$here/relay.c" -ludev -lcrypto
cc -O2 -Wall -o "$out/sysfs_read" "$here/sysfs_read.c"
cc -O2 -Wall -o "$out/clockstamp" "$here/clockstamp.c"
cc -O2 -Wall -o "$out/fleet_publish" "$here/fleet_publish.c" -lmosquitto
cc -O2 -Wall -o "$out/fleet_baseline" "$here/fleet_baseline.c" -lmosquitto
cc -O2 -Wall -o "$out/mqtt_pairs" "$here/mqtt_pairs.c" -lmosquitto
cc -O2 -Wall -o "$out/mqtt_relay" "$here/mqtt_relay.c" -lmosquitto
cc -O2 -Wall -o "$out/bus_client" "$here/bus_client.c" $(pkg-config --cflags --libs libsystemd)
cc -O2 -Wall -o "$out/bus_subscribers" "$here/bus_subscribers.c" $(pkg-config --cflags --libs libsystemd)
cc -O2 -Wall -o "$out/bus_relay" "$here/bus_relay.c" $(pkg-config --cflags --libs libsystemd) -ludev
cc -O2 -Wall -o "$out/bus_glib_client" "$here/bus_glib_client.c" $(pkg-config --cflags --libs gio-2.0)
