/// A ``NodeState`` that a record file or a message holds is read strictly: a malformed one is an error naming what
/// is wrong, never a guess.
extension NodeState {
    private enum CodingKeys: String, CodingKey { case owner, group, mode, acl }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let owner = try container.decode(UInt32.self, forKey: .owner)
        let group = try container.decode(UInt32.self, forKey: .group)
        let text = try container.decode(String.self, forKey: .mode)
        guard text.count == 4, let mode = UInt16(text, radix: 8) else {
            throw DecodingError.dataCorruptedError(
                forKey: .mode, in: container, debugDescription: "'\(text)' is not four octal digits such as 0660")
        }
        var acl: ExtendedACL?
        if let entries = try container.decodeIfPresent([String].self, forKey: .acl) {
            do {
                acl = try Self.acl(fromEntryTexts: entries)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: .acl, in: container, debugDescription: error.reason)
            }
        }
        self.init(owner: owner, group: group, mode: mode, acl: acl)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(owner, forKey: .owner)
        try container.encode(group, forKey: .group)
        try container.encode(octalMode, forKey: .mode)
        if acl != nil { try container.encode(aclEntryTexts, forKey: .acl) }
    }

    /// The ACL's entries beyond the mode, in getfacl's words, sorted: `group::r--`, `group:20:rw-`,
    /// `user:1000:rw-`. Empty without an ACL.
    var aclEntryTexts: [String] {
        guard let acl else { return [] }
        return ["group::\(acl.owningGroup)"]
            + acl.groups.sorted { $0.key < $1.key }.map { "group:\($0.key):\($0.value)" }
            + acl.users.sorted { $0.key < $1.key }.map { "user:\($0.key):\($0.value)" }
    }

    struct EntryTextError: Error { var reason: String }

    /// The inverse of ``aclEntryTexts``: exactly one `group::` entry, named entries each once.
    static func acl(fromEntryTexts texts: [String]) throws(EntryTextError) -> ExtendedACL {
        var owningGroup: Permission?
        var users: [UInt32: Permission] = [:]
        var groups: [UInt32: Permission] = [:]
        for text in texts {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, let permission = Permission(text: parts[2]) else {
                throw EntryTextError(reason: "'\(text)' is not an entry such as user:1000:rw-")
            }
            switch (parts[0], parts[1]) {
            case ("group", ""):
                guard owningGroup == nil else { throw EntryTextError(reason: "two group:: entries") }
                owningGroup = permission
            case ("user", let id), ("group", let id):
                guard let number = UInt32(id) else { throw EntryTextError(reason: "'\(text)': '\(id)' is not an id") }
                if parts[0] == "user" {
                    guard users.updateValue(permission, forKey: number) == nil else {
                        throw EntryTextError(reason: "two entries for user \(number)")
                    }
                } else {
                    guard groups.updateValue(permission, forKey: number) == nil else {
                        throw EntryTextError(reason: "two entries for group \(number)")
                    }
                }
            default:
                throw EntryTextError(reason: "'\(text)' is not a group::, user:ID: or group:ID: entry")
            }
        }
        guard let owningGroup else { throw EntryTextError(reason: "no group:: entry") }
        return ExtendedACL(owningGroup: owningGroup, users: users, groups: groups)
    }
}
