extension NodeState {
    /// The state to restore once a held node was found rewritten: `current` in place of the `applied` enforcement,
    /// because udev (a `change` event's `OWNER=`, `GROUP=`, `MODE=`) or logind (`uaccess`: named user entries and a
    /// recomputed mask) changed it since. `self` is the state it had before the claim.
    ///
    /// Each part of the state is taken from `current` where it differs from `applied` (the rewriter set it), and
    /// from `self` where it does not (left alone, or set to what the claim had set: the two cannot be told apart):
    /// owner, group, set-id bits, owner bits, other bits, the owning group's permissions, and the named users and
    /// the named groups, each set as a whole (logind's `uaccess` replaces the named users as a whole), less the
    /// holder's entry when it is still the one the claim made. The mask: recomputed as the union of the entries when
    /// the named entries were rewritten (as logind and setfacl compute it), else a rewritten mask (a `chmod` of the
    /// group bits), else the original's. Without named entries, and without an ACL before, the node has none, and
    /// its group bits are a rewritten owning group entry, else a mask rewritten by a `chmod`, else the original's.
    public func adopting(rewrite current: NodeState, of applied: NodeState) -> NodeState {
        func pick<Value: Equatable>(_ part: (NodeState) -> Value) -> (value: Value, rewritten: Bool) {
            part(current) != part(applied) ? (part(current), true) : (part(self), false)
        }
        func named(_ part: (ExtendedACL) -> [UInt32: Permission]) -> (value: [UInt32: Permission], rewritten: Bool) {
            let now = current.acl.map(part) ?? [:]
            let enforced = applied.acl.map(part) ?? [:]
            guard now != enforced else { return (acl.map(part) ?? [:], false) }
            return (now.filter { enforced[$0.key] != $0.value }, true)
        }
        let owner = pick(\.owner).value
        let group = pick(\.group).value
        let special = pick { $0.mode & 0o7000 }.value
        let ownerBits = pick(\.ownerBits).value
        let otherBits = pick(\.otherBits).value
        // Without an ACL before and after, the owning group's permissions are the group bits: a chmod changed them,
        // which the group bits' own rule takes.
        let owningGroup =
            current.acl == nil && applied.acl == nil
            ? (value: owningGroupBits, rewritten: false) : pick(\.owningGroupBits)
        let groupClass = pick(\.groupClassBits)
        let users = named(\.users)
        let groups = named(\.groups)
        let namedRewritten = users.rewritten || groups.rewritten

        var result = NodeState(owner: owner, group: group, mode: special | ownerBits.rawValue << 6 | otherBits.rawValue)
        if acl != nil && !namedRewritten || !(users.value.isEmpty && groups.value.isEmpty) {
            let extended = ExtendedACL(owningGroup: owningGroup.value, users: users.value, groups: groups.value)
            let mask =
                namedRewritten
                ? extended.unionOfEntries
                : groupClass.rewritten ? groupClass.value : acl != nil ? groupClassBits : extended.unionOfEntries
            result.acl = extended
            result.mode |= mask.rawValue << 3
        } else {
            let bits =
                owningGroup.rewritten
                ? owningGroup.value : !namedRewritten && groupClass.rewritten ? groupClass.value : owningGroupBits
            result.mode |= bits.rawValue << 3
        }
        return result
    }
}
