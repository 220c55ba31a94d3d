# accmon: the two commands that matter are `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
BUILD_DIR ?= .build
# accmon-dashboard: its HTTP server library, and what its tests drive (a real browser) and parse (/metrics).
DASHBOARD_APT_PACKAGES := python3-aiohttp chromium chromium-driver python3-selenium python3-prometheus-client
# accmon.fleet, the Python client's optional part (claims across the fleet), and the claims bench: an MQTT 5 client.
FLEET_APT_PACKAGES := python3-paho-mqtt
# accmond on the system bus: its tests start a private dbus-daemon and drive it with busctl (systemd) and GLib (gi).
DBUS_APT_PACKAGES := dbus systemd python3-gi bubblewrap xdg-dbus-proxy
# The second MQTT 5 broker the bridge's suites run against (docs/MQTT.md §10). The tests start nodes of their own on
# free ports; the service the package starts where systemd runs is not used (Debian's configuration has it listen on
# 1883, as mosquitto's does: `systemctl disable --now ejabberd` when it is not wanted).
BROKER_APT_PACKAGES := ejabberd
APT_PACKAGES := libudev-dev libsystemd-dev libssl-dev socat umockdev gir1.2-umockdev-1.0 python3-gi util-linux procps udev \
  python3-venv libmosquitto-dev mosquitto mosquitto-clients openssl python3-fusepy acl $(DASHBOARD_APT_PACKAGES) \
  $(FLEET_APT_PACKAGES) $(BROKER_APT_PACKAGES) $(DBUS_APT_PACKAGES)
DEBUG_BIN = $(BUILD_DIR)/debug
# The package: built and tested under PACKAGE_DIR (release build, staging tree, cached minbase chroot).
PACKAGE_DIR ?= build
PACKAGE_APT_PACKAGES := dpkg-dev binutils xz-utils man-db python3 systemd debootstrap lintian
# What booting the package's test container needs on the host (systemd-nspawn).
SYSTEMD_TEST_APT_PACKAGES := systemd-container
VERSION = $(shell sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/AccmonProtocol/Version.swift)
DEB = $(PACKAGE_DIR)/accmon_$(VERSION)_amd64.deb
PYTHON_DEB = $(PACKAGE_DIR)/python3-accmon_$(VERSION)_all.deb
DASHBOARD_DEB = $(PACKAGE_DIR)/accmon-dashboard_$(VERSION)_all.deb

.PHONY: all build deps deps-package deps-systemd-test run test test-python test-dashboard test-dbus test-package test-systemd deb \
  fuzz soak clean

all: build

# Installs the Debian packages the build and tests need, when any is missing (root, or sudo).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The same, plus what building and testing the .deb needs.
deps-package:
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(APT_PACKAGES) $(PACKAGE_APT_PACKAGES)"

# The same, plus what booting the systemd test container needs.
deps-systemd-test:
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(APT_PACKAGES) $(PACKAGE_APT_PACKAGES) $(SYSTEMD_TEST_APT_PACKAGES)"

# `make test` builds with a compiler warning in the project's own sources (Sources/, Tests/, the C shims) as an error:
# -warnings-as-errors for swiftc, -Werror for clang. Flags, not a check of the build log: an incremental build prints
# only the warnings of the files it recompiles, so a log check passes on the second run of an unchanged tree, while
# an error keeps failing until the warning is gone. Only `make test` sets them (CI and whoever changes the sources):
# `make build`, `make run`, `make deb`, a plain `swift build` and the AccmonClient package the .deb ships never do,
# so a newer toolchain's new warnings never break a user's build. `make test WARNINGS_AS_ERRORS=no` tests on a
# toolchain that warns about what this one does not, until the sources are fixed. The flags are passed to every
# build of one `make test` (SwiftPM rebuilds everything when they change).
WARNINGS_AS_ERRORS ?= yes
TEST_SWIFT_FLAGS := $(if $(filter yes,$(WARNINGS_AS_ERRORS)),-Xswiftc -warnings-as-errors -Xcc -Werror)
SWIFT_BUILD_FLAGS ?=

build: deps
	$(SWIFT) build --scratch-path $(BUILD_DIR) $(SWIFT_BUILD_FLAGS)

# Starts accmond with the example manifest on a temporary socket and shows `accmon watch --all`: on a host with a
# running udev it watches the machine; elsewhere it plays a scripted demo of plug events through umockdev (real
# libudev). On a terminal it keeps watching until Ctrl-C; otherwise it exits by itself.
run: build
	@scripts/run.sh $(DEBUG_BIN)

# A run that hangs is stopped after 15 minutes, with the tests still running and their threads' stacks.
test: SWIFT_BUILD_FLAGS = $(TEST_SWIFT_FLAGS)
test: build check-layering check-bench-figures
	$(SWIFT) build --scratch-path $(BUILD_DIR) --build-tests $(SWIFT_BUILD_FLAGS)
	scripts/test-deadline.sh 900 $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build
	@$(MAKE) --no-print-directory test-python SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)"
	@$(MAKE) --no-print-directory test-dashboard SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)"
	@$(MAKE) --no-print-directory test-dbus SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)"
	@$(MAKE) --no-print-directory test-package test-systemd

# Fails when a module dependency points the wrong way (docs/ARCHITECTURE.md, "Layers"); its self-test first.
.PHONY: check-layering
check-layering:
	@python3 scripts/check-layering.py --self-test >/dev/null || python3 scripts/check-layering.py --self-test
	SWIFT=$(SWIFT) python3 scripts/check-layering.py

# Fails when a figure the docs quote from a bench run is not in that run's summary in bench/results (or listed in
# bench/figures-not-in-results.tsv with what it is), a summary is cited by no doc, raw lines are there, or
# bench/results is 300 KiB or more (bench/README.md, "Raw lines and summaries"); its self-test first.
.PHONY: check-bench-figures
check-bench-figures:
	@python3 scripts/check-bench-figures.py --self-test >/dev/null || python3 scripts/check-bench-figures.py --self-test
	python3 scripts/check-bench-figures.py

# The Python client (clients/python): the check that no Python modules import each other in a cycle; a virtual
# environment made from Debian's /usr/bin/python3 under the build directory, with the pinned test tools; mypy --strict
# (for this Python and for 3.9), then pytest against the accmond and accmon built above.
PYTHON_VENV = $(abspath $(BUILD_DIR))/python-venv
PYTHON_REQUIREMENTS = clients/python/requirements-test.txt

$(PYTHON_VENV)/installed: $(PYTHON_REQUIREMENTS)
	rm -rf $(PYTHON_VENV)
	/usr/bin/python3 -m venv $(PYTHON_VENV)
	$(PYTHON_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PYTHON_REQUIREMENTS)
	touch $@

test-python: check-python-imports build $(PYTHON_VENV)/installed
	cd clients/python && $(PYTHON_VENV)/bin/mypy --strict --cache-dir $(PYTHON_VENV)/mypy-cache src/accmon tests examples
	cd clients/python && $(PYTHON_VENV)/bin/mypy --strict --python-version 3.9 --cache-dir $(PYTHON_VENV)/mypy-cache-3.9 \
	  src/accmon
	cd clients/python && PYTHONPATH=src PYTHONDONTWRITEBYTECODE=1 ACCMON_BIN_DIR=$(abspath $(DEBUG_BIN)) \
	  $(PYTHON_VENV)/bin/python -m pytest -p no:cacheprovider
	@$(MAKE) --no-print-directory test-python-fleet

# Fails when modules of the Python packages (accmon, accmon_dashboard) import each other in a cycle, counting imports
# under TYPE_CHECKING and inside functions; its self-test (packages with cycles, each to be refused) first.
.PHONY: check-python-imports
check-python-imports:
	@python3 scripts/check-python-imports.py --self-test >/dev/null || python3 scripts/check-python-imports.py --self-test
	python3 scripts/check-python-imports.py clients/python/src/accmon clients/dashboard/src/accmon_dashboard

# accmon.fleet (claims across the fleet) with Debian's python3-paho-mqtt: its tests in a virtual environment that sees
# the system's packages (the one above must not: the accmon package itself needs nothing), against real mosquitto,
# accmond and bridges.
FLEET_VENV = $(abspath $(BUILD_DIR))/python-fleet-venv

$(FLEET_VENV)/installed: $(PYTHON_REQUIREMENTS)
	rm -rf $(FLEET_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(FLEET_VENV)
	$(FLEET_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PYTHON_REQUIREMENTS)
	touch $@

# accmond on the system bus (docs/DBUS.md): a private dbus-daemon with the system bus's rules and the shipped policy,
# the accmond built above with --dbus, and peers made of GLib (python3-gi) and busctl run as other users (Tests/dbus).
# The fleet's environment serves: it sees Debian's packages (gi) and has the pinned test tools.
.PHONY: test-dbus
test-dbus: build $(FLEET_VENV)/installed
	cd Tests/dbus && PYTHONDONTWRITEBYTECODE=1 ACCMON_BIN_DIR=$(abspath $(DEBUG_BIN)) \
	  $(FLEET_VENV)/bin/python -m pytest -p no:cacheprovider

.PHONY: test-python-fleet
test-python-fleet: build $(FLEET_VENV)/installed
	cd clients/python && $(FLEET_VENV)/bin/mypy --strict --cache-dir $(FLEET_VENV)/mypy-cache src/accmon/fleet.py tests_fleet
	cd clients/python && PYTHONPATH=src PYTHONDONTWRITEBYTECODE=1 ACCMON_BIN_DIR=$(abspath $(DEBUG_BIN)) \
	  $(FLEET_VENV)/bin/python -m pytest -p no:cacheprovider tests_fleet

# accmon-dashboard (clients/dashboard): a virtual environment made with --system-site-packages (Debian's aiohttp,
# selenium, prometheus_client) with the pinned test tools; the package installed into it with pip (offline, as a user
# would), mypy --strict, then pytest: the page in headless Chromium against real mosquitto, accmond and bridges. The
# test's screenshot of the page goes to $(BUILD_DIR)/dashboard.png (docs/images/dashboard.png is a copy).
DASHBOARD_VENV = $(abspath $(BUILD_DIR))/dashboard-venv

$(DASHBOARD_VENV)/installed: $(PYTHON_REQUIREMENTS)
	rm -rf $(DASHBOARD_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(DASHBOARD_VENV)
	$(DASHBOARD_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PYTHON_REQUIREMENTS)
	touch $@

test-dashboard: build $(DASHBOARD_VENV)/installed
	$(DASHBOARD_VENV)/bin/pip uninstall --quiet --yes accmon-dashboard 2>/dev/null
	$(DASHBOARD_VENV)/bin/pip install --quiet --disable-pip-version-check --no-index --no-build-isolation ./clients/dashboard
	cd clients/dashboard && MYPYPATH=../python/src $(DASHBOARD_VENV)/bin/mypy --strict \
	  --cache-dir $(DASHBOARD_VENV)/mypy-cache src/accmon_dashboard tests
	cd clients/dashboard && $(DASHBOARD_VENV)/bin/mypy --strict --python-version 3.9 \
	  --cache-dir $(DASHBOARD_VENV)/mypy-cache-3.9 src/accmon_dashboard
	cd clients/dashboard && PYTHONPATH=src PYTHONDONTWRITEBYTECODE=1 ACCMON_BIN_DIR=$(abspath $(DEBUG_BIN)) \
	  ACCMON_DASHBOARD_SCREENSHOT=$(abspath $(BUILD_DIR))/dashboard.png $(DASHBOARD_VENV)/bin/python -m pytest -p no:cacheprovider

# Builds $(DEB): static release binaries, units, udev rules, manifest, man pages, completion, client library source;
# $(PYTHON_DEB), the Python client; and $(DASHBOARD_DEB), the dashboard.
deb: deps-package
	BUILD_DIR=$(PACKAGE_DIR) SWIFT=$(SWIFT) packaging/build-deb.sh

# Checks the .debs: lintian, systemd-analyze, man pages, then install, run and purge in a minbase bookworm chroot.
test-package: deb
	packaging/test-package.sh $(DEB) $(PACKAGE_DIR) $(PYTHON_DEB) $(DASHBOARD_DEB)

# Boots a bookworm container with systemd as its PID 1 (systemd-nspawn; the root is built once and cached in
# $(PACKAGE_DIR)/chroot-cache), installs the .deb in it and checks the shipped units under the container's systemd.
test-systemd: deb deps-systemd-test
	packaging/test-systemd.sh $(DEB) $(PACKAGE_DIR) $(DASHBOARD_DEB)

# The long versions, not part of make test: the daemon-crash trials (500 SIGKILLs at random points of storms), a
# hostile user misbehaving in every way for 60 s while a healthy client must get every event, the MQTT fleet of
# 50 hosts of up to 100 accessories through one mosquitto and through one ejabberd, 10 of whose bridges stop at the
# end, claims across the fleet: 20 claimers cycling accmon claim --broker on 50 hosts for 5 minutes (docs/MQTT.md
# §12), and the same across two site brokers bridged to a centre, the brokers killed at random (§11.1).
soak: build
	$(SWIFT) build --scratch-path $(BUILD_DIR) --build-tests
	ACCMON_SOAK_TRIALS=$${SOAK_TRIALS:-500} $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build \
	  --filter daemonKilledDuringStormsLosesNothing
	ACCMON_HOSTILE_SECONDS=$${HOSTILE_SECONDS:-60} $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build \
	  --filter aHealthyClientGetsEveryEventWhileAnotherUserMisbehavesInEveryWay
	ACCMON_FLEET_HOSTS=$${SOAK_FLEET_HOSTS:-50} ACCMON_FLEET_ACCESSORIES=$${SOAK_FLEET_ACCESSORIES:-100} \
	  ACCMON_FLEET_STOPPED=10 $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build \
	  --filter aFleetThroughOneBrokerShowsEveryHostsTruth
	ACCMON_CLAIM_SOAK_HOSTS=$${SOAK_CLAIM_HOSTS:-50} ACCMON_CLAIM_SOAK_CLAIMERS=$${SOAK_CLAIMERS:-20} \
	  ACCMON_CLAIM_SOAK_SECONDS=$${SOAK_CLAIM_SECONDS:-300} $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build \
	  --filter claimersCyclingOnAFleetNeverHoldOneAccessoryTwiceAndEveryClaimEnds
	ACCMON_SITE_SOAK_HOSTS=$${SOAK_SITE_HOSTS:-50} ACCMON_SITE_SOAK_CLAIMERS=$${SOAK_CLAIMERS:-20} \
	  ACCMON_SITE_SOAK_SECONDS=$${SOAK_SITE_SECONDS:-300} $(SWIFT) test --scratch-path $(BUILD_DIR) --skip-build \
	  --filter aFleetOnTwoSitesWhoseBrokersDieAtRandomEndsRightAtTheCentre

# The libFuzzer targets, $(FUZZ_SECONDS) each (default 60), from the corpora in Fuzz/corpus/, which they grow
# (Fuzz/README.md). FUZZ_TARGETS: some of them.
fuzz: deps
	@FUZZ_BUILD_DIR=$${FUZZ_BUILD_DIR:-$(BUILD_DIR)/fuzz} scripts/fuzz.sh $${FUZZ_SECONDS:-60} $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD_DIR) $(PACKAGE_DIR) Fuzz/bin

# Benchmarks, never part of `make test`: one JSON line per measurement (bench/README.md). BENCH_SUITES, BENCH_REPEATS.
# bench-ab: two revisions side by side, A=REV B=REV [ROUNDS=3] (bench/ab.sh).
.PHONY: bench bench-ab
bench:
	@bench/run.sh

bench-ab:
	@bench/ab.sh $(A) $(B) $(or $(ROUNDS),3)
