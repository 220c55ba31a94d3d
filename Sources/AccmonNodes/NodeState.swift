/// Who may open a device node: its owner, group, permission bits and POSIX access ACL, each held once (see
/// ``ExtendedACL``: with an ACL, the group bits of ``mode`` are its mask).
///
/// On the wire and in record files: `{"owner":0,"group":20,"mode":"0660"}`, with
/// `"acl":["group::rw-","user:1000:rw-"]` (the entries the mode does not hold, in getfacl's words) when there is one.
public struct NodeState: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The owner's uid.
    public var owner: UInt32
    /// The owning group's gid.
    public var group: UInt32
    /// The permission bits with the set-id and sticky bits (`st_mode & 07777`).
    public var mode: UInt16
    /// The access ACL beyond the mode bits; `nil` when the node has none.
    public var acl: ExtendedACL?

    public init(owner: UInt32, group: UInt32, mode: UInt16, acl: ExtendedACL? = nil) {
        self.owner = owner
        self.group = group
        self.mode = mode & 0o7777
        self.acl = acl
    }

    /// The owner's, group class's (the mask, with an ACL) and others' permission bits.
    public var ownerBits: Permission { Permission(rawValue: mode >> 6) }
    public var groupClassBits: Permission { Permission(rawValue: mode >> 3) }
    public var otherBits: Permission { Permission(rawValue: mode) }
    /// The owning group's permissions: its ACL entry, or the group bits without an ACL.
    public var owningGroupBits: Permission { acl?.owningGroup ?? groupClassBits }

    /// The mode as four octal digits, `0660`.
    public var octalMode: String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// `0:20 0660`, then the ACL's entries: `0:0 0660 group::rw- user:1000:rw-`.
    public var description: String {
        ([("\(owner):\(group)"), octalMode] + aclEntryTexts).joined(separator: " ")
    }

    // MARK: The kernel's access check

    /// Whether a process with `uid` (its file-system uid) and `gids` (its file-system gid and supplementary groups)
    /// may open the node for `want`, as the kernel decides it (`acl_permission_check` and `posix_acl_permission` in
    /// fs/namei.c and fs/posix_acl.c): the owner gets the owner bits; with an ACL whose mask is not empty, a named
    /// user gets its entry under the mask, then a member of the owning group or of named groups gets access if one
    /// of those entries holds all of `want` and the mask does too, and is refused otherwise; everyone else gets the
    /// other bits. An ACL whose mask is empty is not consulted at all: the mode bits decide, with only the owning
    /// group as a group (so a named user then gets the other bits).
    ///
    /// uid 0 is outside the check: root's `CAP_DAC_OVERRIDE` opens any node for reading and writing.
    public func allows(_ want: Permission, uid: UInt32, gids: some Collection<UInt32>) -> Bool {
        if uid == 0 { return !want.contains(.execute) || mode & 0o111 != 0 }
        if uid == owner { return ownerBits.isSuperset(of: want) }
        if let acl, !groupClassBits.isEmpty {
            let mask = groupClassBits
            if let named = acl.users[uid] { return named.intersection(mask).isSuperset(of: want) }
            var found = false
            if gids.contains(group) {
                found = true
                if acl.owningGroup.isSuperset(of: want) { return mask.isSuperset(of: want) }
            }
            for (gid, permission) in acl.groups where gids.contains(gid) {
                found = true
                if permission.isSuperset(of: want) { return mask.isSuperset(of: want) }
            }
            if found { return false }
            return otherBits.isSuperset(of: want)
        }
        return (gids.contains(group) ? groupClassBits : otherBits).isSuperset(of: want)
    }

    /// What a process with `uid` and `gids` may open the node for: read and write, each checked alone
    /// (``allows(_:uid:gids:)``).
    public func access(uid: UInt32, gids: some Collection<UInt32>) -> Permission {
        Permission.readWrite.subtracting(Permission([.read, .write].filter { !allows($0, uid: uid, gids: gids) }))
    }

    // MARK: Enforcement

    /// The node's state while `holder` holds it: it opens for the holder and root, and for nobody else.
    ///
    /// The owner becomes root (an owner could `chmod` its node open again, so no one but root may own it while it
    /// is held); the group stays, with no permission; others get none; the holder gets a named ACL entry with the
    /// access it had (``access(uid:gids:)``: read and/or write), or read and write with ``NodeHolder/grant``, and
    /// the mask equals that entry. A holder that is root, or keeps no access, needs no entry: the node is then
    /// root's alone, without an ACL.
    ///
    /// One widening: a holder that could open the node for reading and for writing, but not for both at once (two
    /// group entries, one with `r`, the other with `w`), may open it for both while it holds it; it gains no access
    /// it lacked, since it could open two descriptors.
    public func enforced(holder: NodeHolder) -> NodeState {
        let kept = keptAccess(holder)
        if holder.uid == 0 || kept.isEmpty { return NodeState(owner: 0, group: group, mode: 0o600) }
        return NodeState(
            owner: 0, group: group, mode: 0o600 | kept.rawValue << 3,
            acl: ExtendedACL(owningGroup: [], users: [holder.uid: kept]))
    }

    /// The state while `holder` holds the node on a file system without POSIX ACLs (devpts), for simulated nodes
    /// only: the holder owns it, with the access it keeps as owner bits; the group and others get nothing. Unlike
    /// ``enforced(holder:)``, the holder could `chmod` the node open to others while it holds it.
    public func enforcedWithoutACL(holder: NodeHolder) -> NodeState {
        let kept = keptAccess(holder)
        if holder.uid == 0 || kept.isEmpty { return NodeState(owner: 0, group: group, mode: 0o600) }
        return NodeState(owner: holder.uid, group: group, mode: kept.rawValue << 6)
    }

    /// What the holder may open while it holds the node: what it could before, or read and write with grant.
    private func keptAccess(_ holder: NodeHolder) -> Permission {
        holder.grant ? .readWrite : access(uid: holder.uid, gids: holder.groupIDs)
    }
}

/// Who holds a node: the uid and groups of the claim's holder (the groups its access is judged by: its primary
/// group and supplementary groups), and whether the claim grants read and write whatever it had (`"grant": true`
/// of a manifest's `claim`).
public struct NodeHolder: Sendable, Hashable, Codable, CustomStringConvertible {
    public var uid: UInt32
    public var gids: [UInt32]
    public var grant: Bool

    public init(uid: UInt32, gids: [UInt32], grant: Bool = false) {
        self.uid = uid
        self.gids = gids
        self.grant = grant
    }

    var groupIDs: Set<UInt32> { Set(gids) }

    /// `uid 1000 (groups 20, 1000), granting read and write`.
    public var description: String {
        "uid \(uid) (groups \(gids.map(String.init).joined(separator: ", ")))"
            + (grant ? ", granting read and write" : "")
    }
}
