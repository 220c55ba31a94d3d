/// Read, write and execute permission: one class of a file's mode (`rwx`), or the permissions of one entry of a
/// POSIX ACL.
public struct Permission: OptionSet, Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue & 0o7 }

    public static let read = Permission(rawValue: 0o4)
    public static let write = Permission(rawValue: 0o2)
    public static let execute = Permission(rawValue: 0o1)
    public static let readWrite: Permission = [.read, .write]

    public static func < (left: Permission, right: Permission) -> Bool { left.rawValue < right.rawValue }

    /// `rw-`, `r--`, `---`: as `ls -l` and `getfacl` write it.
    public var description: String {
        (contains(.read) ? "r" : "-") + (contains(.write) ? "w" : "-") + (contains(.execute) ? "x" : "-")
    }

    /// Reads `rw-`-style text (exactly three characters).
    public init?(text: some StringProtocol) {
        let characters = Array(text)
        guard characters.count == 3 else { return nil }
        var value: UInt16 = 0
        for (character, (letter, bit)) in zip(
            characters, [("r", 0o4), ("w", 0o2), ("x", 0o1)] as [(Character, UInt16)])
        {
            if character == letter {
                value |= bit
            } else if character != "-" {
                return nil
            }
        }
        self.init(rawValue: value)
    }
}

/// The part of a POSIX access ACL that the mode bits do not hold: the owning group's entry and the named users'
/// and groups' entries. The owner's and others' entries are the mode's owner and other bits, and the mask entry is
/// the mode's group bits (the kernel keeps them in step), so a ``NodeState`` holds each value once.
///
/// A file with such an ACL has a mask entry; a file without one has no ACL (a "minimal" ACL, of the three base
/// entries only, is stored as mode bits alone: the kernel never keeps it as an attribute).
public struct ExtendedACL: Sendable, Hashable {
    /// The owning group's entry (`group::`); under the mask, like the named entries.
    public var owningGroup: Permission
    /// The named users' entries (`user:UID:`), by uid.
    public var users: [UInt32: Permission]
    /// The named groups' entries (`group:GID:`), by gid.
    public var groups: [UInt32: Permission]

    public init(owningGroup: Permission, users: [UInt32: Permission] = [:], groups: [UInt32: Permission] = [:]) {
        self.owningGroup = owningGroup
        self.users = users
        self.groups = groups
    }

    /// Every permission the entries under the mask grant: the mask `setfacl` computes for them.
    public var unionOfEntries: Permission {
        users.values.reduce(groups.values.reduce(owningGroup) { $0.union($1) }) { $0.union($1) }
    }
}

/// The `system.posix_acl_access` extended attribute: the kernel's binary form of a POSIX access ACL (`struct
/// posix_acl_xattr_header` then `struct posix_acl_xattr_entry`s, little-endian: a 32-bit version, 2; per entry a
/// 16-bit tag, 16-bit permissions and a 32-bit id, `ACL_UNDEFINED_ID` for the owner, owning group, mask and other
/// entries), sorted as the kernel requires: by tag, then by id.
public enum PosixACLAttribute {
    /// The attribute's name.
    public static let name = "system.posix_acl_access"
    static let version: UInt32 = 2
    static let undefinedID: UInt32 = 0xFFFF_FFFF

    /// The entry tags (`ACL_USER_OBJ`...).
    enum Tag: UInt16, CaseIterable {
        case owner = 0x01, user = 0x02, owningGroup = 0x04, group = 0x08, mask = 0x10, other = 0x20
    }

    /// A malformed attribute, with what is wrong and where.
    public struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var description: String { "\(PosixACLAttribute.name): \(reason)" }
    }

    /// The attribute for the permission bits `mode` and `acl`: owner and other entries from `mode`, the mask from
    /// its group bits.
    public static func encode(mode: UInt16, _ acl: ExtendedACL) -> [UInt8] {
        var entries: [(Tag, UInt32, Permission)] = [(.owner, undefinedID, Permission(rawValue: mode >> 6))]
        entries += acl.users.sorted { $0.key < $1.key }.map { (.user, $0.key, $0.value) }
        entries.append((.owningGroup, undefinedID, acl.owningGroup))
        entries += acl.groups.sorted { $0.key < $1.key }.map { (.group, $0.key, $0.value) }
        entries.append((.mask, undefinedID, Permission(rawValue: mode >> 3)))
        entries.append((.other, undefinedID, Permission(rawValue: mode)))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 + 8 * entries.count)
        append(version, to: &bytes)
        for (tag, id, permission) in entries {
            append(UInt32(tag.rawValue) | UInt32(permission.rawValue) << 16, to: &bytes)
            append(id, to: &bytes)
        }
        return bytes
    }

    /// The ACL an attribute holds, checked as the kernel checks it (`posix_acl_valid`): one owner, owning group and
    /// other entry, a mask when there are named entries, named entries sorted by id without duplicates.
    ///
    /// - Returns: the entries the mode does not hold, and the mode's owner, group (the mask, or the owning group's
    ///   entry without one) and other bits as the attribute has them; `acl` is `nil` for a minimal ACL.
    public static func decode(_ bytes: [UInt8]) throws(FormatError) -> (acl: ExtendedACL?, modeBits: UInt16) {
        guard bytes.count >= 4 else { throw FormatError(reason: "\(bytes.count) bytes, shorter than its header") }
        guard (bytes.count - 4) % 8 == 0 else {
            throw FormatError(reason: "\(bytes.count) bytes: the entries are not a whole number of 8-byte entries")
        }
        let foundVersion = read32(bytes, 0)
        guard foundVersion == version else { throw FormatError(reason: "version \(foundVersion), not \(version)") }
        var owner: Permission?
        var owningGroup: Permission?
        var mask: Permission?
        var other: Permission?
        var users: [UInt32: Permission] = [:]
        var groups: [UInt32: Permission] = [:]
        var previous: (tag: UInt16, id: UInt32)?
        for offset in stride(from: 4, to: bytes.count, by: 8) {
            let index = (offset - 4) / 8
            let word = read32(bytes, offset)
            let rawTag = UInt16(truncatingIfNeeded: word)
            let rawPermission = UInt16(truncatingIfNeeded: word >> 16)
            let id = read32(bytes, offset + 4)
            guard let tag = Tag(rawValue: rawTag) else { throw FormatError(reason: "entry \(index): tag \(rawTag)") }
            guard rawPermission <= 0o7 else {
                throw FormatError(reason: "entry \(index): permissions \(rawPermission), more than rwx")
            }
            if let previous, rawTag < previous.tag || rawTag == previous.tag && (!tag.isNamed || id <= previous.id) {
                throw FormatError(reason: "entry \(index): out of order or repeated (tag \(rawTag), id \(id))")
            }
            previous = (rawTag, id)
            let permission = Permission(rawValue: rawPermission)
            switch tag {
            case .owner: owner = permission
            case .user: users[id] = permission
            case .owningGroup: owningGroup = permission
            case .group: groups[id] = permission
            case .mask: mask = permission
            case .other: other = permission
            }
        }
        guard let owner, let owningGroup, let other else {
            throw FormatError(reason: "no owner, owning group or other entry")
        }
        if mask == nil && !(users.isEmpty && groups.isEmpty) {
            throw FormatError(reason: "named entries without a mask entry")
        }
        let groupBits = (mask ?? owningGroup).rawValue
        let modeBits = owner.rawValue << 6 | groupBits << 3 | other.rawValue
        guard mask != nil else { return (nil, modeBits) }
        return (ExtendedACL(owningGroup: owningGroup, users: users, groups: groups), modeBits)
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func read32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }
}

extension PosixACLAttribute.Tag {
    var isNamed: Bool { self == .user || self == .group }
}
