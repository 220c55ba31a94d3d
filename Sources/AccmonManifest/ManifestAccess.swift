/// A user or a group in an access list: by name or by numeric id.
public enum Principal: Sendable, Hashable, CustomStringConvertible {
    /// A user or group name, such as `alice` or `dialout`.
    case name(String)
    /// A numeric uid or gid.
    case id(UInt32)

    public var description: String {
        switch self {
        case .name(let name): name
        case .id(let id): String(id)
        }
    }
}

/// Users and groups allowed to see an accessory (or to administer). Root is always allowed.
public struct AccessList: Sendable, Hashable {
    /// Users, by name or uid.
    public var users: [Principal]
    /// Groups, by name or gid: their members are allowed.
    public var groups: [Principal]

    public init(users: [Principal] = [], groups: [Principal] = []) {
        self.users = users
        self.groups = groups
    }

    /// The group whose members see accessories of an entry with no `access`.
    public static let defaultGroup = "accmon"
    /// The access of an entry with no `access`: members of the `accmon` group (and root).
    public static let defaultAccess = AccessList(groups: [.name(defaultGroup)])

    /// Whether the list names nobody (root is still allowed).
    public var isEmpty: Bool { users.isEmpty && groups.isEmpty }

    /// Whether a user is allowed: root always; otherwise when the list names the user (by name or uid) or one of
    /// their groups (by name or gid).
    ///
    /// - Parameters:
    ///   - uid: the user's id (from `SO_PEERCRED`).
    ///   - gids: the groups of the user's process: primary and supplementary (`SO_PEERCRED`, `SO_PEERGROUPS`).
    ///   - accounts: the ids of the names the list holds; a name missing from it matches nobody.
    public func allows(uid: UInt32, gids: [UInt32], accounts: AccountIDs) -> Bool {
        if uid == 0 { return true }
        for user in users {
            switch user {
            case .id(let id) where id == uid: return true
            case .name(let name) where accounts.users[name] == uid: return true
            default: continue
            }
        }
        for group in groups {
            switch group {
            case .id(let id) where gids.contains(id): return true
            case .name(let name): if let id = accounts.groups[name], gids.contains(id) { return true }
            default: continue
            }
        }
        return false
    }

    /// This list with the users and groups of `other` that it lacks, appended.
    public func union(_ other: AccessList) -> AccessList {
        var result = self
        for user in other.users where !result.users.contains(user) { result.users.append(user) }
        for group in other.groups where !result.groups.contains(group) { result.groups.append(group) }
        return result
    }
}

/// The ids of the user and group names a manifest mentions, resolved from the account databases once per manifest
/// load: deciding what a client may see or do then needs only the ids the kernel gives for its socket, and no
/// account lookup (which can wait seconds on a directory service) happens per client.
public struct AccountIDs: Sendable, Hashable {
    /// User names to uids; a name that did not resolve is absent, and never matches.
    public var users: [String: UInt32]
    /// Group names to gids; a name that did not resolve is absent, and never matches.
    public var groups: [String: UInt32]

    public init(users: [String: UInt32] = [:], groups: [String: UInt32] = [:]) {
        self.users = users
        self.groups = groups
    }

    /// Resolves `names` with the given lookups (in the daemon, the account databases).
    public init(
        resolving names: (users: Set<String>, groups: Set<String>), userID: (String) -> UInt32?,
        groupID: (String) -> UInt32?
    ) {
        users = [:]
        groups = [:]
        for name in names.users { users[name] = userID(name) }
        for name in names.groups { groups[name] = groupID(name) }
    }
}
