#!/usr/bin/env bash
# `make deb`: builds BUILD_DIR/accmon_<version>_amd64.deb from the source tree, then
# BUILD_DIR/python3-accmon_<version>_all.deb (the Python client: packaging/build-python-deb.sh) and
# BUILD_DIR/accmon-dashboard_<version>_all.deb (the dashboard: packaging/build-dashboard-deb.sh).
#
# Release binaries with --static-swift-stdlib (the target needs no Swift runtime) and --disable-local-rpath, stripped;
# Depends from dpkg-shlibdeps; man pages generated from packaging/man/accmon.man.md and the binaries' --help; the
# AccmonClient library's source as a SwiftPM package. File dates come from debian/changelog (SOURCE_DATE_EPOCH).
set -euo pipefail
umask 022
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
BUILD_DIR=${BUILD_DIR:-build}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
SWIFT=${SWIFT:-swift}
say() { printf '== %s\n' "$*"; }
fail() { printf 'build-deb: %s\n' "$*" >&2; exit 1; }

version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/AccmonProtocol/Version.swift)
[ -n "$version" ] || fail "no version in Sources/AccmonProtocol/Version.swift"
changelog_version=$(sed -n '1s/^accmon (\(.*\)).*/\1/p' packaging/debian/changelog)
[ "$version" = "$changelog_version" ] ||
  fail "version $version (Sources/AccmonProtocol/Version.swift) is not the changelog's $changelog_version: add an entry to packaging/debian/changelog"
changelog_date=$(sed -n 's/^ -- .*>  \(.*\)$/\1/p' packaging/debian/changelog | head -1)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$changelog_date" +%s)}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)

scratch=$BUILD_DIR/release-static
flags=(-c release --static-swift-stdlib --disable-local-rpath --scratch-path "$scratch"
  -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now)
say "release build (static Swift stdlib) in $scratch"
"$SWIFT" build "${flags[@]}" --product accmond
"$SWIFT" build "${flags[@]}" --product accmon
"$SWIFT" build "${flags[@]}" --product accmon-mqtt
"$SWIFT" build "${flags[@]}" --product accmon-nodes
bin=$("$SWIFT" build "${flags[@]}" --show-bin-path)

stage=$BUILD_DIR/deb
root=$stage/root
rm -rf "$stage"
mkdir -p "$root/DEBIAN"
say "staging $root"
install -D -m 0755 "$bin/accmond" "$root/usr/sbin/accmond"
install -D -m 0755 "$bin/accmon" "$root/usr/bin/accmon"
install -D -m 0755 "$bin/accmon-mqtt" "$root/usr/sbin/accmon-mqtt"
# The node helper runs as root for accmond alone: not on PATH.
install -D -m 0755 "$bin/accmon-nodes" "$root/usr/lib/accmon/accmon-nodes"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/sbin/accmond" "$root/usr/bin/accmon" \
  "$root/usr/sbin/accmon-mqtt" "$root/usr/lib/accmon/accmon-nodes"
install -D -m 0644 packaging/accmond.service "$root/usr/lib/systemd/system/accmond.service"
install -D -m 0644 packaging/accmon-mqtt.service "$root/usr/lib/systemd/system/accmon-mqtt.service"
install -D -m 0644 packaging/accmond.socket "$root/usr/lib/systemd/system/accmond.socket"
install -D -m 0644 packaging/accmon-nodes.service "$root/usr/lib/systemd/system/accmon-nodes.service"
install -D -m 0644 packaging/accmon-nodes.socket "$root/usr/lib/systemd/system/accmon-nodes.socket"
install -D -m 0644 packaging/accmon-nodes-scan.service "$root/usr/lib/systemd/system/accmon-nodes-scan.service"
install -D -m 0644 packaging/accmon-nodes-scan.socket "$root/usr/lib/systemd/system/accmon-nodes-scan.socket"
install -D -m 0644 packaging/polkit/60-accmon.rules "$root/usr/share/polkit-1/rules.d/60-accmon.rules"
# accmond on the system bus (docs/DBUS.md): who may own and call org.accmon.Accmon1, its activation through
# accmond.service, and its interfaces.
install -D -m 0644 packaging/dbus/org.accmon.Accmon1.conf "$root/usr/share/dbus-1/system.d/org.accmon.Accmon1.conf"
install -D -m 0644 packaging/dbus/org.accmon.Accmon1.service \
  "$root/usr/share/dbus-1/system-services/org.accmon.Accmon1.service"
install -D -m 0644 packaging/dbus/org.accmon.Accmon1.xml "$root/usr/share/dbus-1/interfaces/org.accmon.Accmon1.xml"
# polkit's actions for bus callers: opening an accessory's node one could not open oneself, the admin methods.
install -D -m 0644 packaging/polkit/org.accmon.Accmon1.policy \
  "$root/usr/share/polkit-1/actions/org.accmon.Accmon1.policy"
for rules in udev-rules/*.rules; do
  install -D -m 0644 "$rules" "$root/usr/lib/udev/rules.d/$(basename "$rules")"
done
install -D -m 0644 packaging/manifest.json "$root/etc/accmon/manifest.json"
install -D -m 0644 packaging/mqtt.json "$root/etc/accmon/mqtt.json"
install -d -m 0755 "$root/etc/accmon/manifest.d"
install -D -m 0644 packaging/accmon.bash-completion "$root/usr/share/bash-completion/completions/accmon"

python3 packaging/mkman.py packaging/man/accmon.man.md "$stage/man" "$bin" "$version" "$date" >/dev/null
for page in "$stage"/man/*.[0-9]; do
  section=${page##*.}
  install -D -m 0644 "$page" "$root/usr/share/man/man$section/$(basename "$page")"
  gzip -9n "$root/usr/share/man/man$section/$(basename "$page")"
done

doc=$root/usr/share/doc/accmon
install -D -m 0644 packaging/debian/copyright "$doc/copyright"
install -m 0644 packaging/debian/changelog "$doc/changelog"
gzip -9n "$doc/changelog"
install -m 0644 README.md "$doc/README.md"
for file in docs/PROTOCOL.md docs/MANIFEST.md docs/ACCESSORIES.md docs/MQTT.md docs/CLAIMS.md docs/HISTORY.md \
  docs/SESSIONS.md docs/ARCHITECTURE.md; do
  [ -f "$file" ] && install -m 0644 "$file" "$doc/$(basename "$file")"
done

say "AccmonClient source package"
"$SWIFT" package --scratch-path "$scratch" describe --type json >"$stage/describe.json"
client=$root/usr/share/accmon/swift/AccmonClient
mkdir -p "$client"
python3 packaging/client-package.py "$stage/describe.json" "$top" "$client" >/dev/null
find "$client" -type d -exec chmod 0755 {} + && find "$client" -type f -exec chmod 0644 {} +

say "control"
mkdir -p "$stage/shlibs/debian"
printf 'Source: accmon\n\nPackage: accmon\nArchitecture: amd64\n' >"$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e"$root/usr/sbin/accmond" -e"$root/usr/bin/accmon" \
  -e"$root/usr/sbin/accmon-mqtt" -e"$root/usr/lib/accmon/accmon-nodes" |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || fail "dpkg-shlibdeps found no dependency"
installed_size=$(du -s -k --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@DEPENDS@/$depends/" -e "s/@INSTALLED_SIZE@/$installed_size/" \
  packaging/debian/control.in >"$root/DEBIAN/control"
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "packaging/debian/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
  >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$BUILD_DIR/accmon_${version}_amd64.deb
say "dpkg-deb --build"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
printf '%s\n' "$deb"
printf 'Depends: %s\n' "$depends"
printf 'size: %s bytes; binaries: accmond %s bytes, accmon %s bytes, accmon-mqtt %s bytes, accmon-nodes %s bytes\n' \
  "$(stat -c %s "$deb")" "$(stat -c %s "$root/usr/sbin/accmond")" "$(stat -c %s "$root/usr/bin/accmon")" \
  "$(stat -c %s "$root/usr/sbin/accmon-mqtt")" "$(stat -c %s "$root/usr/lib/accmon/accmon-nodes")"

say "python3-accmon"
packaging/build-python-deb.sh "$BUILD_DIR"

say "accmon-dashboard"
packaging/build-dashboard-deb.sh "$BUILD_DIR"
