// swift-tools-version:6.0
import PackageDescription

// The layout, with every dependency pointing down (docs/ARCHITECTURE.md; Tests/layering.sh checks it):
//
//   executables      accmond            accmon                accmon-mqtt       accmon-nodes
//   daemon, bridge   AccmondKit                               AccmonBridge      AccmonNodeHelper
//   client                              AccmonClient
//   adapters         AccmonUdev  AccmonSystemd  AccmonLogging  AccmonCrypto  AccmonMQTT
//   pure logic       AccmonDevices  AccmonManifest  AccmonProtocol  AccmonJSON  AccmonOptions  (AccmonNodes: nodes)
//   system calls     AccmonSys
//   C                CUdev  CSystemd  CCrypto  CAccmonShims  CMosquitto
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "accmon",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AccmonClient", targets: ["AccmonClient"]),
        .executable(name: "accmond", targets: ["accmond"]),
        .executable(name: "accmon", targets: ["accmon"]),
        .executable(name: "accmon-mqtt", targets: ["accmon-mqtt"]),
        .executable(name: "accmon-nodes", targets: ["accmon-nodes"]),
    ],
    targets: [
        // C libraries and the shims over C macros. Only the adapter modules and AccmonSys import them.
        .target(name: "CAccmonShims"),
        .systemLibrary(name: "CUdev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),

        // System calls, thinly wrapped; imports no Accmon module.
        .target(name: "AccmonSys", dependencies: ["CAccmonShims"], swiftSettings: strictSettings),

        // Pure logic, no I/O.
        // JSON with comments, parsed with the position of every value, for files people write (manifest, configs).
        .target(name: "AccmonJSON", swiftSettings: strictSettings),
        // What a client needs: the accessory model, filters, messages, the codec, line framing, readers and writers.
        .target(name: "AccmonProtocol", swiftSettings: strictSettings),
        // The manifest: parser with positions, validation, globs, matching, writer, and loading its files.
        .target(
            name: "AccmonManifest", dependencies: ["AccmonJSON", "AccmonProtocol", "AccmonSys"],
            swiftSettings: strictSettings),
        // udev's view of devices: monitor datagrams, properties, classification, the event-order tracker.
        .target(name: "AccmonDevices", dependencies: ["AccmonProtocol"], swiftSettings: strictSettings),
        // One command-line option parser for every executable.
        .target(name: "AccmonOptions", swiftSettings: strictSettings),

        // Device nodes held for claims: the nodes' states (owner, group, mode, POSIX ACL) and the kernel's access
        // check, enforcement and restoration through O_PATH descriptors (NodeKeeper), the helper's protocol and the
        // client accmond uses (NodeHelperLink). No libudev: the helper injects its device check.
        .target(name: "AccmonNodes", dependencies: ["AccmonSys"], swiftSettings: strictSettings),

        // Adapters over C libraries.
        // OpenSSL's libcrypto, for the SHA-256 of USB descriptors (manifest pinning).
        .target(name: "AccmonCrypto", dependencies: ["CCrypto"], swiftSettings: strictSettings),
        // libudev: handles that unref in one place, used on one thread.
        .target(
            name: "AccmonUdev",
            dependencies: ["AccmonCrypto", "AccmonDevices", "AccmonProtocol", "AccmonSys", "CUdev"],
            swiftSettings: strictSettings),
        // libsystemd: sd_notify, socket activation, the watchdog, the journal. Not linked by the client library or
        // the CLI.
        .target(name: "AccmonSystemd", dependencies: ["AccmonSys", "CSystemd"], swiftSettings: strictSettings),
        // The logger of the long-running programs: stderr, or native journal entries under systemd.
        .target(name: "AccmonLogging", dependencies: ["AccmonSys", "AccmonSystemd"], swiftSettings: strictSettings),
        // libmosquitto, driven from the caller's loop; the fleet's topics, status payload and retained state, and the
        // reader the CLI's fleet view uses.
        .target(
            name: "AccmonMQTT", dependencies: ["AccmonProtocol", "AccmonSys", "CMosquitto"],
            swiftSettings: strictSettings),

        // The daemon's machinery, in folders by role: Loop, Requests, Publishing, Sessions, State, Sources,
        // Authorization.
        .target(
            name: "AccmondKit",
            dependencies: [
                "AccmonDevices", "AccmonLogging", "AccmonManifest", "AccmonNodes", "AccmonProtocol", "AccmonSys",
                "AccmonSystemd", "AccmonUdev",
            ],
            swiftSettings: strictSettings),
        // The MQTT bridge's machinery: configuration, accmond session, broker link, relay and reconciliation.
        .target(
            name: "AccmonBridge",
            dependencies: ["AccmonJSON", "AccmonLogging", "AccmonMQTT", "AccmonProtocol", "AccmonSys"],
            swiftSettings: strictSettings),
        // The node helper's machinery: its loop (peer credentials, requests on a NodeKeeper, the change watch), the
        // libudev device check, restore-all.
        .target(
            name: "AccmonNodeHelper",
            dependencies: ["AccmonLogging", "AccmonNodes", "AccmonSys", "AccmonSystemd", "AccmonUdev"],
            swiftSettings: strictSettings),
        // The library for client apps; re-exports AccmonProtocol.
        .target(name: "AccmonClient", dependencies: ["AccmonProtocol", "AccmonSys"], swiftSettings: strictSettings),

        .executableTarget(
            name: "accmond",
            dependencies: [
                "AccmondKit", "AccmonLogging", "AccmonOptions", "AccmonProtocol", "AccmonSys", "AccmonSystemd",
            ],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "accmon",
            dependencies: ["AccmonClient", "AccmonManifest", "AccmonMQTT", "AccmonOptions", "AccmonSys", "AccmonSystemd"],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "accmon-mqtt",
            dependencies: [
                "AccmonBridge", "AccmonLogging", "AccmonMQTT", "AccmonOptions", "AccmonProtocol", "AccmonSys",
                "AccmonSystemd",
            ],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "accmon-nodes",
            dependencies: [
                "AccmonLogging", "AccmonNodeHelper", "AccmonOptions", "AccmonProtocol", "AccmonSys", "AccmonSystemd",
            ],
            swiftSettings: strictSettings),
        // A minimal client app, built by the tests, showing the library's use with one import.
        .executableTarget(
            name: "AccmonExampleWatcher", dependencies: ["AccmonClient"], path: "Examples/AccmonExampleWatcher",
            swiftSettings: strictSettings),

        // What the test targets share: locating the built binaries, child processes, polling, a seeded generator,
        // sample accessories.
        .target(
            name: "AccmonTestSupport", dependencies: ["AccmonProtocol"], path: "Tests/AccmonTestSupport",
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonProtocolTests", dependencies: ["AccmonProtocol", "AccmonTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonDevicesTests", dependencies: ["AccmonDevices", "AccmonProtocol", "AccmonTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmondKitTests",
            dependencies: [
                "AccmondKit", "AccmonDevices", "AccmonLogging", "AccmonManifest", "AccmonProtocol", "AccmonSys",
                "AccmonSystemd", "AccmonTestSupport",
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonOptionsTests", dependencies: ["AccmonOptions"], swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonManifestTests",
            dependencies: [
                "AccmonClient", "AccmonCrypto", "AccmonJSON", "AccmonManifest", "AccmonProtocol", "AccmonTestSupport",
            ],
            exclude: ["Corpus"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonUdevTests",
            dependencies: [
                "AccmonClient", "AccmonCrypto", "AccmonDevices", "AccmonProtocol", "AccmonTestSupport", "AccmonUdev",
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonNodesTests",
            dependencies: ["AccmondKit", "AccmonLogging", "AccmonNodes", "AccmonSys", "AccmonTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonMQTTTests", dependencies: ["AccmonMQTT", "AccmonProtocol", "AccmonTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonBridgeTests",
            dependencies: [
                "AccmonBridge", "AccmonClient", "AccmonMQTT", "AccmonProtocol", "AccmonSys", "AccmonTestSupport",
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonIntegrationTests",
            dependencies: [
                "AccmonClient", "AccmonDevices", "AccmonLogging", "AccmonProtocol", "AccmonSys", "AccmondKit",
                "AccmonTestSupport",
            ],
            swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
