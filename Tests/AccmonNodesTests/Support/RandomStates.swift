import AccmonNodes
import AccmonTestSupport

/// Users and groups the property tests draw from: owners, named ACL entries, subjects and holders. None needs to
/// exist in /etc/passwd (setpriv takes numbers); 20 is dialout.
enum Pool {
    static let users: [UInt32] = [4001, 4002, 4003]
    static let groups: [UInt32] = [20, 4101, 4102]
    /// A user in no ACL and owning nothing.
    static let outsider: UInt32 = 4004
}

extension SplitMix64 {
    mutating func chance(_ percent: UInt64) -> Bool { next(below: 100) < percent }

    mutating func pick<Element>(_ elements: [Element]) -> Element { elements[Int(next(below: UInt64(elements.count)))] }

    mutating func permission() -> Permission { Permission(rawValue: UInt16(next(below: 8))) }

    mutating func subset(_ elements: [UInt32]) -> [UInt32] { elements.filter { _ in chance(50) } }

    /// A node state: an owner of the pool or root, a group of the pool or root, any permission bits (set-id bits
    /// only when `special`), and an ACL half of the time.
    mutating func nodeState(special: Bool = false) -> NodeState {
        let owner = chance(25) ? 0 : pick(Pool.users)
        let group = chance(15) ? 0 : pick(Pool.groups)
        var mode = UInt16(next(below: 0o1000))
        if special { mode |= UInt16(next(below: 8)) << 9 }
        var state = NodeState(owner: owner, group: group, mode: mode)
        if chance(50) {
            state.acl = ExtendedACL(
                owningGroup: permission(),
                users: Dictionary(uniqueKeysWithValues: subset(Pool.users).map { ($0, permission()) }),
                groups: Dictionary(uniqueKeysWithValues: subset(Pool.groups).map { ($0, permission()) }))
        }
        return state
    }

    /// A process's identity: a user of the pool or the outsider, a primary group and supplementary groups.
    mutating func subject() -> (uid: UInt32, gids: [UInt32]) {
        let uid = chance(20) ? Pool.outsider : pick(Pool.users)
        let primary = pick(Pool.groups + [UInt32(5000)])
        return (uid, [primary] + subset(Pool.groups + [0]).filter { $0 != primary })
    }

    mutating func holder() -> NodeHolder {
        if chance(10) { return NodeHolder(uid: 0, gids: [0], grant: chance(50)) }
        let (uid, gids) = subject()
        return NodeHolder(uid: uid, gids: gids, grant: chance(30))
    }
}

/// Every identity a check looks at: the pool's users with every combination of the pool's groups, the outsider.
let everySubject: [(uid: UInt32, gids: [UInt32])] = {
    let groups = Pool.groups + [0]
    let groupSets: [[UInt32]] = (0..<(1 << groups.count)).map { bits in
        [5000] + groups.enumerated().filter { bits & (1 << $0.offset) != 0 }.map(\.element)
    }
    return (Pool.users + [Pool.outsider]).flatMap { uid in groupSets.map { (uid, $0) } }
}()
