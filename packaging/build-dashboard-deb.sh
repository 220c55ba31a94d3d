#!/usr/bin/env bash
# Builds BUILD_DIR/accmon-dashboard_<version>_all.deb (clients/dashboard) for Debian's python3 and python3-aiohttp:
# the modules and their static files in /usr/lib/python3/dist-packages (byte-compiled by postinst with py3compile, as
# dh_python3 does) with their dist-info, the command /usr/bin/accmon-dashboard (next to /usr/bin/accmon, which it
# runs), the systemd unit (disabled), /etc/accmon/dashboard.json, the man page and the docs. build-deb.sh runs it
# after the main package; it runs on its own too: packaging/build-dashboard-deb.sh BUILD_DIR.
set -euo pipefail
umask 022
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
BUILD_DIR=${1:-${BUILD_DIR:-build}}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
fail() { printf 'build-dashboard-deb: %s\n' "$*" >&2; exit 1; }

version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/AccmonProtocol/Version.swift)
source=clients/dashboard/src/accmon_dashboard
dashboard_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$source/__init__.py")
[ "$version" = "$dashboard_version" ] ||
  fail "the dashboard's version $dashboard_version ($source/__init__.py) is not accmon's $version"
changelog_date=$(sed -n 's/^ -- .*>  \(.*\)$/\1/p' packaging/debian/changelog | head -1)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$changelog_date" +%s)}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)

package=accmon-dashboard
stage=$BUILD_DIR/deb-dashboard
root=$stage/root
rm -rf "$stage"
mkdir -p "$root/DEBIAN"
site=$root/usr/lib/python3/dist-packages
install -d "$site/accmon_dashboard/static"
for module in "$source"/*.py "$source/py.typed"; do install -m 0644 "$module" "$site/accmon_dashboard/"; done
for file in "$source"/static/*; do install -m 0644 "$file" "$site/accmon_dashboard/static/"; done
# What importlib.metadata reads (as `pip install` writes it): the name, the version, the dependency, the script.
info=$site/accmon_dashboard-$version.dist-info
install -d "$info"
printf 'Metadata-Version: 2.1\nName: accmon-dashboard\nVersion: %s\nSummary: %s\nRequires-Python: >=3.9\nRequires-Dist: aiohttp>=3.8\n' \
  "$version" "A live web page of an accmon fleet or host, with Prometheus metrics" >"$info/METADATA"
printf '[console_scripts]\naccmon-dashboard = accmon_dashboard.cli:main\n' >"$info/entry_points.txt"
printf 'debian\n' >"$info/INSTALLER"
chmod 0644 "$info"/*
install -d "$root/usr/bin"
printf '#!/usr/bin/python3\n# accmon-dashboard(1): the web page of an accmon fleet or host.\nfrom accmon_dashboard.cli import main\n\nraise SystemExit(main())\n' \
  >"$root/usr/bin/accmon-dashboard"
chmod 0755 "$root/usr/bin/accmon-dashboard"

install -D -m 0644 packaging/accmon-dashboard.service "$root/usr/lib/systemd/system/accmon-dashboard.service"
install -D -m 0644 packaging/dashboard.json "$root/etc/accmon/dashboard.json"

# The man page, from its source and the command's --help (run from the staged tree with Debian's aiohttp).
COLUMNS=80 PYTHONPATH=$site python3 packaging/mkman.py packaging/man/accmon-dashboard.man.md "$stage/man" \
  "$root/usr/bin" "$version" "$date" >/dev/null
install -D -m 0644 "$stage/man/accmon-dashboard.1" "$root/usr/share/man/man1/accmon-dashboard.1"
gzip -9n "$root/usr/share/man/man1/accmon-dashboard.1"
find "$site" -name __pycache__ -prune -exec rm -rf {} +

doc=$root/usr/share/doc/$package
install -D -m 0644 packaging/debian/accmon-dashboard/copyright "$doc/copyright"
install -m 0644 packaging/debian/changelog "$doc/changelog"
gzip -9n "$doc/changelog"
install -m 0644 docs/DASHBOARD.md "$doc/DASHBOARD.md"

installed_size=$(du -s -k --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@INSTALLED_SIZE@/$installed_size/" \
  packaging/debian/accmon-dashboard/control.in >"$root/DEBIAN/control"
install -m 0644 packaging/debian/accmon-dashboard/conffiles "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "packaging/debian/accmon-dashboard/$script" "$root/DEBIAN/$script"
done
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
  >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$BUILD_DIR/${package}_${version}_all.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
printf '%s\n' "$deb"
