import AccmonManifest
import AccmonProtocol
import Testing

@testable import AccmondKit

/// A small world of accessories for the claim book: who may claim what, the entry's policy, the clock.
struct ClaimFixture {
    var connected: [Accessory] = []
    var policy = ClaimPolicy()
    /// Uids that may claim nothing.
    var refused: Set<UInt32> = []
    /// Uids that see nothing.
    var hidden: Set<UInt32> = []
    var now: UInt64 = 1_000_000_000
    var nextConnection: UInt64 = 1

    var world: ClaimWorld {
        ClaimWorld(
            connected: connected, mayClaim: { [refused] claimant, _ in !refused.contains(claimant.principal?.uid ?? 0) },
            sees: { [hidden] claimant, _ in !hidden.contains(claimant.principal?.uid ?? 0) },
            policy: { [policy] _ in policy }, simulated: { _ in true }, now: now, wallNow: Double(now) / 1e9)
    }

    /// Connects an accessory; returns it with its new connection id.
    @discardableResult
    mutating func plug(_ id: String, kind: AccessoryKind = .serial, port: String = "") -> Accessory {
        var accessory = Accessory(kind: kind, accessoryID: id, name: id, serialNumber: id, vendorID: "0403")
        accessory.portPath = port
        accessory.deviceNodes = ["/dev/\(id)"]
        accessory.connectionID = ConnectionID(nextConnection)
        nextConnection += 1
        connected.append(accessory)
        return accessory
    }

    mutating func unplug(_ connection: ConnectionID) -> Accessory {
        let index = connected.firstIndex { $0.connectionID == connection }!
        return connected.remove(at: index)
    }

    static func claimant(_ uid: UInt32, session: UInt64? = nil, restoreKey: RestoreKey? = nil) -> Claimant {
        Claimant(
            party: Party(user: "u\(uid)", uid: uid), principal: ClientPrincipal(uid: uid, gids: [uid]),
            session: session ?? UInt64(uid), restoreKey: restoreKey)
    }
}

func makeBook() -> ClaimBook { ClaimBook(makeToken: randomToken) }

@Suite struct ClaimBookTests {
    @Test func aClaimOfSeveralAccessoriesTakesAllOrNone() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        let b = fixture.plug("B").connectionID
        var book = makeBook()
        guard case .granted = book.request(ClaimRequest(.connections([b])), by: .init(2), in: fixture.world) else {
            Issue.record("B is free")
            return
        }
        let outcome = book.request(ClaimRequest(.connections([a, b])), by: .init(1), in: fixture.world)
        #expect(outcome == .conflict([1]))
        #expect(book.holding[a] == nil, "nothing is taken when not everything can be")
        #expect(book.holding.count == 1)
    }

    @Test func aReleasedClaimPassesToTheFirstWaiterThatCanTakeAll() {
        var fixture = ClaimFixture()
        let x = fixture.plug("X").connectionID
        let y = fixture.plug("Y").connectionID
        var book = makeBook()
        _ = book.request(ClaimRequest(.connections([x])), by: .init(1), in: fixture.world)  // c-1 holds X
        _ = book.request(ClaimRequest(.connections([y])), by: .init(2), in: fixture.world)  // c-2 holds Y
        // c-3 waits for X and Y, then c-4 for X alone.
        guard case .queued = book.request(ClaimRequest(.connections([x, y]), wait: true), by: .init(3), in: fixture.world),
            case .queued = book.request(ClaimRequest(.connections([x]), wait: true), by: .init(4), in: fixture.world)
        else {
            Issue.record("both wait")
            return
        }
        book.end(1)
        let served = book.offer(fixture.world)
        // c-3 cannot take all (Y is held): X goes to c-4, and c-3 keeps its place.
        #expect(served.map(\.claim.holder.principal?.uid) == [4])
        #expect(book.waiters.map(\.number) == [3])
        book.end(served[0].claim.number)
        book.end(2)
        #expect(book.offer(fixture.world).map(\.claim.holder.principal?.uid) == [3])
        #expect(book.holding[x] == 3 && book.holding[y] == 3)
    }

    @Test func twoClaimersAskingInOppositeOrdersNeverHoldOneEach() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        let b = fixture.plug("B").connectionID
        var book = makeBook()
        for round in 0..<100 {
            let first: [ConnectionID] = round % 2 == 0 ? [a, b] : [b, a]
            _ = book.request(ClaimRequest(.connections(first), wait: true), by: .init(1), in: fixture.world)
            _ = book.request(ClaimRequest(.connections(first.reversed()), wait: true), by: .init(2), in: fixture.world)
            let holders = Set([book.holding[a], book.holding[b]])
            #expect(holders.count == 1 && holders.first! != nil, "round \(round): one claim holds both")
            let holder = book.holding[a]!
            book.end(holder)
            let next = book.offer(fixture.world)
            #expect(next.count == 1 && next[0].claim.connections.count == 2, "round \(round): the other gets both")
            book.end(next[0].claim.number)
            #expect(book.offer(fixture.world).isEmpty && book.waiters.isEmpty)
        }
    }

    @Test func aClaimByFilterTakesTheFirstFreeMatchesAndCountsThem() {
        var fixture = ClaimFixture()
        fixture.plug("U", kind: .usb)
        let s1 = fixture.plug("S1").connectionID
        let s2 = fixture.plug("S2").connectionID
        var book = makeBook()
        let serial = AccessoryFilter(kind: .serial)
        #expect(
            book.request(ClaimRequest(.matching(serial, serial: nil, count: 3)), by: .init(1), in: fixture.world).isRefused(.noMatch))
        guard case .granted(let claim) = book.request(
            ClaimRequest(.matching(serial, serial: "S2", count: 1)), by: .init(1), in: fixture.world)
        else {
            Issue.record("S2 is free")
            return
        }
        #expect(claim.connections == [s2])
        guard case .granted(let other) = book.request(
            ClaimRequest(.matching(serial, serial: nil, count: 1)), by: .init(2), in: fixture.world)
        else {
            Issue.record("S1 is free")
            return
        }
        #expect(other.connections == [s1])
        #expect(book.request(ClaimRequest(.matching(serial, serial: nil, count: 1)), by: .init(3), in: fixture.world)
            == .conflict([1, 2]))
    }

    @Test func whatAClaimerMayNotClaimIsNotConnectedForIt() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        fixture.refused = [8, 9]
        fixture.hidden = [9]
        var book = makeBook()
        #expect(book.request(ClaimRequest(.connections([a])), by: .init(9), in: fixture.world).isRefused(.noSuchConnection))
        #expect(book.request(ClaimRequest(.connections([a])), by: .init(8), in: fixture.world).isRefused(.permissionDenied))
        #expect(
            book.request(ClaimRequest(.matching(.all, serial: nil, count: 1)), by: .init(8), in: fixture.world)
                .isRefused(.permissionDenied))
        #expect(book.request(ClaimRequest(.connections([ConnectionID(77)])), by: .init(1), in: fixture.world)
            .isRefused(.noSuchConnection))
    }

    @Test func aClaimFollowsItsAccessoryBackByIdOrPortAndEndsWhenItDoesNotComeBack() {
        var fixture = ClaimFixture()
        fixture.policy.returnSeconds = 10
        let board = fixture.plug("BOARD", port: "1-1.2")
        var book = makeBook()
        _ = book.request(ClaimRequest(.connections([board.connectionID])), by: .init(1), in: fixture.world)
        // It resets: gone, back with the same id.
        let gone = fixture.unplug(board.connectionID)
        #expect(book.connectionEnded(gone, now: fixture.now) == [.returning(claim: 1, accessory: gone)])
        let back = fixture.plug("BOARD", port: "1-1.2")
        #expect(book.connectionStarted(back, fixture.world) == [.returned(claim: 1, accessory: back, previous: gone.connectionID)])
        #expect(book.holding[back.connectionID] == 1)
        // Its bootloader: another id, the same kind on the same port.
        _ = book.connectionEnded(fixture.unplug(back.connectionID), now: fixture.now)
        let other = fixture.plug("BOOTLOADER", kind: .usb, port: "1-1.2")
        #expect(book.connectionStarted(other, fixture.world).isEmpty, "another kind on the port is not the board")
        let loader = fixture.plug("DFU", port: "1-1.2")
        #expect(book.connectionStarted(loader, fixture.world).count == 1)
        #expect(book.holding[loader.connectionID] == 1)
        // Gone for longer than its window: the claim ends, lost.
        let last = fixture.unplug(loader.connectionID)
        _ = book.connectionEnded(last, now: fixture.now)
        #expect(book.expire(now: fixture.now + 9_000_000_000).isEmpty)
        let ended = book.expire(now: fixture.now + 10_000_000_000)
        guard case .ended(let claim, .lost(let accessory))? = ended.first else {
            Issue.record("lost: \(ended)")
            return
        }
        #expect(claim.number == 1 && accessory.connectionID == last.connectionID && book.claims.isEmpty)
    }

    @Test func aRemoteUsersClaimKeptWithItsBridgesSessionStaysTheRemoteUsers() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        let b = fixture.plug("B").connectionID
        let key = RestoreKey(uid: 5, restoreID: "accmon-mqtt-claims")
        var book = makeBook()
        var remote = ClaimFixture.claimant(5, session: 50, restoreKey: key)
        remote.remoteUser = "ci"
        remote.party = Party(user: "ci", remote: true)
        _ = book.request(ClaimRequest(.connections([a]), preserve: true), by: remote, in: fixture.world)
        _ = book.request(ClaimRequest(.connections([a, b]), wait: true, preserve: true), by: remote, in: fixture.world)
        _ = book.sessionEnded(50, preserved: key, graceSeconds: 30, now: fixture.now)
        #expect(book.sessionRestored(key, as: 51, party: Party(user: "bridge", uid: 5)) == [1])
        #expect(book.claims[1]?.holder.party == Party(user: "ci", remote: true) && book.claims[1]?.holder.session == 51)
        #expect(book.waiters.first?.claimant.party == Party(user: "ci", remote: true))
    }

    @Test func aClaimKeptWithAPreservedSessionWaitsForItsClientThenEnds() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        let key = RestoreKey(uid: 5, restoreID: "app")
        var book = makeBook()
        _ = book.request(
            ClaimRequest(.connections([a]), preserve: true), by: ClaimFixture.claimant(5, session: 50, restoreKey: key),
            in: fixture.world)
        #expect(book.sessionEnded(50, preserved: key, graceSeconds: 30, now: fixture.now).isEmpty)
        #expect(book.holding[a] == 1 && book.claims[1]?.holder.session == nil)
        #expect(book.sessionRestored(key, as: 51, party: Party(user: "u5", uid: 5)) == [1])
        #expect(book.claims[1]?.holder.session == 51)
        // Gone again, not back within the grace.
        _ = book.sessionEnded(51, preserved: key, graceSeconds: 30, now: fixture.now)
        let ended = book.expire(now: fixture.now + 30_000_000_000)
        #expect(ended.count == 1 && book.claims.isEmpty)
        // Without a preserved session, a claim ends with its connection.
        _ = book.request(ClaimRequest(.connections([a]), preserve: true), by: .init(6), in: fixture.world)
        #expect(book.sessionEnded(6, preserved: nil, graceSeconds: 30, now: fixture.now).count == 1)
    }

    @Test func aTokenTakesAClaimUpOnlyForTheSameUserAndOnlyWhenItsHolderIsAway() {
        var fixture = ClaimFixture()
        let a = fixture.plug("A").connectionID
        var book = makeBook()
        guard case .granted(let claim) = book.request(ClaimRequest(.connections([a])), by: .init(1), in: fixture.world)
        else { return }
        #expect(book.resume(token: claim.token, by: .init(1, session: 11)) != .claim(1), "its holder is still there")
        book.awaitClaimersBack(until: fixture.now + 30_000_000_000)
        #expect(book.resume(token: claim.token, by: .init(2, session: 12)) != .claim(1), "another user")
        #expect(book.resume(token: "guessed", by: .init(1, session: 11)) != .claim(1))
        #expect(book.resume(token: claim.token, by: .init(1, session: 11)) == .claim(1))
        #expect(book.expire(now: fixture.now + 31_000_000_000).isEmpty, "taken up in time")
    }

    @Test func theManifestCapsAClaimsDuration() {
        var fixture = ClaimFixture()
        fixture.policy.maxSeconds = 60
        let a = fixture.plug("A").connectionID
        let b = fixture.plug("B").connectionID
        var book = makeBook()
        _ = book.request(ClaimRequest(.connections([a]), maxSeconds: 3600), by: .init(1), in: fixture.world)
        _ = book.request(ClaimRequest(.connections([b]), maxSeconds: 5), by: .init(2), in: fixture.world)
        #expect(book.claims[1]?.expiresAt == fixture.now + 60_000_000_000)
        #expect(book.claims[2]?.expiresAt == fixture.now + 5_000_000_000)
        let ended = book.expire(now: fixture.now + 5_000_000_000)
        #expect(ended == [.ended(ended.first.flatMap { if case .ended(let c, _) = $0 { c } else { nil } }!, why: .expired)])
        #expect(book.claims.keys.sorted() == [1])
    }
}

extension Claimant {
    init(_ uid: UInt32, session: UInt64? = nil) { self = ClaimFixture.claimant(uid, session: session) }
}

extension ClaimBook.Outcome {
    func isRefused(_ code: ProtocolError.Code) -> Bool {
        if case .refused(let error) = self { return error.code == code }
        return false
    }
}
