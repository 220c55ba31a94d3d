// swift-tools-version:6.0
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The broker's release build skips Swift's run-time exclusivity checks: the broker loop reads and writes its own and
/// its sessions' stored properties for every event and every subscriber, and each access was a call into the runtime
/// (callgrind: 12 % of a fan-out event's instructions at 10 subscribers). Debug builds, which every test runs, keep
/// the checks. The flag is the daemon's alone: the `AccmonClient` product does not contain this target, so packages
/// that depend on it are not affected.
let brokerSettings = strictSettings + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "accmon",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AccmonClient", targets: ["AccmonClient"]),
        .executable(name: "accmond", targets: ["accmond"]),
        .executable(name: "accmon", targets: ["accmon"]),
    ],
    targets: [
        // Pure logic: accessory model, filters, protocol messages and codec. No I/O.
        .target(name: "AccmonCore", swiftSettings: strictSettings),
        // Thin wrappers over the system calls the daemon and the client use.
        .target(name: "CAccmonShims"),
        .systemLibrary(name: "CUdev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // OpenSSL's libcrypto, wrapped, for the SHA-256 of USB descriptors (manifest pinning); not linked by AccmonCore.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "AccmonCrypto", dependencies: ["CCrypto"], swiftSettings: strictSettings),
        .target(name: "AccmonSys", dependencies: ["AccmonCore", "CAccmonShims"], swiftSettings: strictSettings),
        // The daemon's machinery: event sources, registry, broker loop, sessions, transport.
        // libudev, wrapped: handles that unref in one place, used on one thread.
        .target(
            name: "AccmonUdev", dependencies: ["AccmonCore", "AccmonCrypto", "AccmonSys", "CUdev"],
            swiftSettings: strictSettings),
        // libsystemd, wrapped: sd_notify, socket activation, the watchdog, the journal. The daemon's alone, so that the
        // client library and the CLI do not link libsystemd.
        .target(name: "AccmonSystemd", dependencies: ["AccmonSys", "CSystemd"], swiftSettings: strictSettings),
        .target(
            name: "AccmondKit", dependencies: ["AccmonCore", "AccmonSys", "AccmonUdev", "AccmonSystemd"],
            swiftSettings: brokerSettings),
        // The library for client apps.
        .target(name: "AccmonClient", dependencies: ["AccmonCore", "AccmonSys"], swiftSettings: strictSettings),
        .executableTarget(
            name: "accmond", dependencies: ["AccmondKit", "AccmonSys", "AccmonSystemd"], swiftSettings: strictSettings),
        .executableTarget(name: "accmon", dependencies: ["AccmonClient"], swiftSettings: strictSettings),
        // A minimal client app, built by the tests, showing the library's use.
        .executableTarget(
            name: "AccmonExampleWatcher", dependencies: ["AccmonClient"], path: "Examples/AccmonExampleWatcher",
            swiftSettings: strictSettings),
        // What the test targets share: locating the built binaries, child processes, polling, a seeded generator.
        .target(name: "AccmonTestSupport", path: "Tests/AccmonTestSupport", swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonCoreTests", dependencies: ["AccmonCore", "AccmonTestSupport"], swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonUdevTests",
            dependencies: ["AccmonClient", "AccmonCore", "AccmonCrypto", "AccmonUdev", "AccmonTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonManifestTests", dependencies: ["AccmonClient", "AccmonCrypto", "AccmonTestSupport"],
            exclude: ["Corpus"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "AccmonIntegrationTests",
            dependencies: ["AccmonClient", "AccmonCore", "AccmonSys", "AccmondKit", "AccmonTestSupport"],
            swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
