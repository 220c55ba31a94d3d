import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Testing

@Suite struct PosixACLAttributeTests {
    @Test func encodesTheKernelsLayout() {
        // user::rw- user:1000:r-- group::r-- group:20:rw- mask::rw- other::---, as the kernel stores it.
        let acl = ExtendedACL(owningGroup: .read, users: [1000: .read], groups: [20: .readWrite])
        let bytes = PosixACLAttribute.encode(mode: 0o660, acl)
        let words: [UInt32] = stride(from: 0, to: bytes.count, by: 4).map { offset in
            (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
        }
        let none: UInt32 = 0xFFFF_FFFF
        let expected: [UInt32] = [
            2,
            0x0001 | 6 << 16, none, 0x0002 | 4 << 16, 1000, 0x0004 | 4 << 16, none, 0x0008 | 6 << 16, 20,
            0x0010 | 6 << 16, none, 0x0020, none,
        ]
        #expect(words == expected)
    }

    @Test func randomACLsSurviveEncodingAndDecoding() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for round in 0..<2000 {
            var state = random.nodeState()
            state.mode &= 0o777
            guard let acl = state.acl else { continue }
            let decoded = try? PosixACLAttribute.decode(PosixACLAttribute.encode(mode: state.mode, acl))
            #expect(decoded?.acl == acl && decoded?.modeBits == state.mode, "seed \(seed), round \(round): \(state)")
        }
    }

    @Test func aMinimalACLDecodesAsModeBitsAlone() throws {
        // user::rw- group::r-- other::r--: no mask, so no ACL beyond the mode.
        let bytes: [UInt8] = [2, 0, 0, 0] + entry(0x01, 6) + entry(0x04, 4) + entry(0x20, 4)
        let decoded = try PosixACLAttribute.decode(bytes)
        #expect(decoded.acl == nil && decoded.modeBits == 0o644)
    }

    @Test(arguments: [
        ([UInt8]([3, 0, 0, 0]), "version 3, not 2"),
        ([2, 0, 0], "shorter than its header"),
        ([2, 0, 0, 0, 1], "not a whole number"),
        ([2, 0, 0, 0] + entry(0x01, 6) + entry(0x40, 4), "entry 1: tag 64"),
        ([2, 0, 0, 0] + entry(0x01, 9), "permissions 9, more than rwx"),
        ([2, 0, 0, 0] + entry(0x04, 6) + entry(0x01, 6) + entry(0x20, 0), "out of order"),
        ([2, 0, 0, 0] + entry(0x01, 6) + entry(0x01, 6) + entry(0x04, 0) + entry(0x20, 0), "repeated"),
        (
            [2, 0, 0, 0] + entry(0x01, 6) + entry(0x02, 6, 7) + entry(0x02, 6, 7) + entry(0x04, 0) + entry(0x10, 6)
                + entry(0x20, 0), "repeated"
        ),
        ([2, 0, 0, 0] + entry(0x01, 6) + entry(0x02, 6, 7) + entry(0x04, 0) + entry(0x20, 0), "without a mask"),
        ([2, 0, 0, 0] + entry(0x01, 6) + entry(0x20, 0), "no owner, owning group or other"),
    ])
    func malformedAttributesAreRefusedSayingWhy(bytes: [UInt8], reason: String) {
        #expect {
            try PosixACLAttribute.decode(bytes)
        } throws: { error in
            "\(error)".hasPrefix("system.posix_acl_access: ") && "\(error)".contains(reason)
        }
    }

    /// setfacl writes ACLs, the decoder reads what the kernel stored; the encoder writes them, getfacl reads them.
    @Test func agreesWithSetfaclAndGetfaclOnRealFiles() async throws {
        let directory = try TemporaryDirectory()
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for round in 0..<40 {
            let state = random.nodeState()
            guard let acl = state.acl else { continue }
            let mode = state.mode & 0o777
            let path = directory.file("f\(round)")
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            let spec = aclSpec(mode: mode, acl)
            let setfacl = try await command(["/usr/bin/setfacl", "--set", spec, path], in: directory)
            #expect(setfacl.termination == .exited(0), "seed \(seed): setfacl --set \(spec): \(setfacl)")
            let file = try PathDescriptor.open("f\(round)", beneath: PathDescriptor.openDirectory(directory.path))
            defer { file.close() }
            let attribute = try #require(try file.extendedAttribute(PosixACLAttribute.name))
            let decoded = try PosixACLAttribute.decode(attribute)
            #expect(decoded.acl == acl && decoded.modeBits == mode, "seed \(seed), round \(round): \(spec)")

            try file.removeExtendedAttribute(PosixACLAttribute.name)
            try file.setExtendedAttribute(PosixACLAttribute.name, to: PosixACLAttribute.encode(mode: mode, acl))
            let getfacl = try await command(
                ["/usr/bin/getfacl", "--omit-header", "--numeric", "--absolute-names", path], in: directory)
            let entries = Set(
                getfacl.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] }.map(String.init))
            #expect(entries == Set(spec.split(separator: ",").map(String.init)), "seed \(seed), round \(round)")
        }
    }
}

private func entry(_ tag: UInt16, _ permission: UInt16, _ id: UInt32 = 0xFFFF_FFFF) -> [UInt8] {
    let word = UInt32(tag) | UInt32(permission) << 16
    return (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * $0)) }
        + (0..<4).map { UInt8(truncatingIfNeeded: id >> (8 * $0)) }
}

/// The ACL as setfacl's `--set` text, in getfacl's order and words.
func aclSpec(mode: UInt16, _ acl: ExtendedACL) -> String {
    var entries = ["user::\(Permission(rawValue: mode >> 6))"]
    entries += acl.users.sorted { $0.key < $1.key }.map { "user:\($0.key):\($0.value)" }
    entries.append("group::\(acl.owningGroup)")
    entries += acl.groups.sorted { $0.key < $1.key }.map { "group:\($0.key):\($0.value)" }
    entries += ["mask::\(Permission(rawValue: mode >> 3))", "other::\(Permission(rawValue: mode))"]
    return entries.joined(separator: ",")
}

/// Runs a short command (the first argument is the executable's path).
func command(_ arguments: [String], in directory: TemporaryDirectory) async throws -> CommandResult {
    try await run(URL(fileURLWithPath: arguments[0]), Array(arguments.dropFirst()), in: directory)
}
