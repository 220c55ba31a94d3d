import AccmonCrypto
import Foundation
import Testing

@Suite("SHA-256 through libcrypto")
struct SHA256Tests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
    ])
    func knownVectors(_ input: String, _ expected: String) throws {
        #expect(try SHA256.hexDigest(Array(input.utf8)) == expected)
        #expect(try SHA256.digest(Array(input.utf8)).count == SHA256.digestLength)
    }

    /// The documented way to pin a device by hand: `sha256sum` of the descriptors file gives the same digest.
    @Test func matchesSha256sumOnBinaryData() async throws {
        let directory = try ScratchDirectory()
        var random = SplitMix64(seed: 42)
        let bytes = (0..<4099).map { _ in UInt8(truncatingIfNeeded: random.next()) }  // NULs included
        let path = "\(directory.path)/descriptors"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/sha256sum"), [path], in: directory)
        #expect(result.status == 0, "\(result)")
        #expect(String(result.stdout.prefix(64)) == (try SHA256.hexDigest(bytes)))
    }
}
