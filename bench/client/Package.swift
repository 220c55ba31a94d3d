// swift-tools-version:6.0
// The bench's AccmonClient app, kept out of the main package so that `make test` never builds or runs it.
import PackageDescription

let package = Package(
    name: "accmon-bench-client",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "accmon", path: "../..")],
    targets: [
        .executableTarget(
            name: "accmon-bench-client", dependencies: [.product(name: "AccmonClient", package: "accmon")],
            path: "Sources")
    ],
    swiftLanguageModes: [.v6]
)
