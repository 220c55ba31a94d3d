#!/usr/bin/env bash
# Builds BUILD_DIR/python3-accmon_<version>_all.deb, the Python client (clients/python) for Debian's python3:
# the modules in /usr/lib/python3/dist-packages (byte-compiled by postinst with py3compile, as dh_python3 does), their
# dist-info with the pytest11 entry point of accmon.testing, and the package README. build-deb.sh runs it after the
# main package; it runs on its own too: packaging/build-python-deb.sh BUILD_DIR.
set -euo pipefail
umask 022
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
BUILD_DIR=${1:-${BUILD_DIR:-build}}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
fail() { printf 'build-python-deb: %s\n' "$*" >&2; exit 1; }

version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/AccmonProtocol/Version.swift)
python_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' clients/python/src/accmon/__init__.py)
[ "$version" = "$python_version" ] ||
  fail "the Python package's version $python_version (clients/python/src/accmon/__init__.py) is not accmon's $version"
changelog_date=$(sed -n 's/^ -- .*>  \(.*\)$/\1/p' packaging/debian/changelog | head -1)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$changelog_date" +%s)}

package=python3-accmon
root=$BUILD_DIR/deb-python/root
rm -rf "$BUILD_DIR/deb-python"
mkdir -p "$root/DEBIAN"
site=$root/usr/lib/python3/dist-packages
install -d "$site/accmon"
for module in clients/python/src/accmon/*.py clients/python/src/accmon/py.typed; do
  install -m 0644 "$module" "$site/accmon/"
done
# What importlib.metadata reads: the distribution's name and version, and the entry point that lets pytest load
# accmon.testing by itself (as `pip install` writes them).
info=$site/accmon-$version.dist-info
install -d "$info"
printf 'Metadata-Version: 2.1\nName: accmon\nVersion: %s\nSummary: %s\nRequires-Python: >=3.9\n' "$version" \
  "Python client of accmond, the accessory event broker" >"$info/METADATA"
printf '[pytest11]\naccmon.testing = accmon.testing\n' >"$info/entry_points.txt"
printf 'debian\n' >"$info/INSTALLER"
chmod 0644 "$info"/*

doc=$root/usr/share/doc/$package
install -D -m 0644 packaging/debian/python3-accmon/copyright "$doc/copyright"
install -m 0644 packaging/debian/changelog "$doc/changelog"
gzip -9n "$doc/changelog"
install -m 0644 clients/python/README.md "$doc/README.md"

installed_size=$(du -s -k --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@INSTALLED_SIZE@/$installed_size/" \
  packaging/debian/python3-accmon/control.in >"$root/DEBIAN/control"
for script in postinst prerm; do install -m 0755 "packaging/debian/python3-accmon/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
  >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$BUILD_DIR/${package}_${version}_all.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
printf '%s\n' "$deb"
