import AccmonManifest
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmondKit

/// Random histories of plugs, unplugs, returns, claims, waits, releases, departures, restarts (every holder and
/// waiter away), returns with tokens and time, against the book's invariants: no connection held by two claims, a
/// claim holds all it asked for or nothing, what is held is connected (or away within its window), nothing is granted
/// to a waiter that is away, and nothing free sits idle while a waiter could take all it asked for, but what an earlier
/// waiter that is away could take.
@Suite struct ClaimBookPropertyTests {
    private static let identities = ["A", "B", "C", "D", "E", "F"]
    private static let uids: [UInt32] = [1, 2, 3, 4]

    @Test func randomHistoriesKeepTheInvariants() {
        let base = SplitMix64.testSeed()
        var coverage = (
            granted: 0, queued: 0, served: 0, conflicts: 0, returned: 0, lost: 0, expired: 0, restarts: 0, resumed: 0
        )
        for offset in 0..<200 {
            var random = SplitMix64(seed: base &+ UInt64(offset))
            var fixture = ClaimFixture()
            fixture.policy.returnSeconds = 2
            fixture.policy.maxSeconds = offset % 3 == 0 ? 20 : nil
            var book = makeBook()
            /// How many accessories each claim asked for, by claim number.
            var asked: [UInt64: Int] = [:]
            for step in 0..<300 {
                let context = "seed \(base &+ UInt64(offset)), step \(step)"
                var effects: [ClaimEffect] = []
                switch random.next(below: 11) {
                case 0, 1:
                    let id = Self.identities[Int(random.next(below: UInt64(Self.identities.count)))]
                    if !fixture.connected.contains(where: { $0.accessoryID == id }) {
                        let accessory = fixture.plug(id, port: "1-\(id)")
                        effects += book.connectionStarted(accessory, fixture.world)
                    }
                case 2:
                    guard !fixture.connected.isEmpty else { continue }
                    let accessory = fixture.connected[Int(random.next(below: UInt64(fixture.connected.count)))]
                    effects += book.connectionEnded(fixture.unplug(accessory.connectionID), now: fixture.now)
                case 3, 4, 5:
                    let claimant = ClaimFixture.claimant(Self.uids[Int(random.next(below: 4))])
                    let wait = Bool.random(using: &random)
                    let request: ClaimRequest
                    if Bool.random(using: &random), !fixture.connected.isEmpty {
                        let picked = fixture.connected.shuffled(using: &random)
                            .prefix(1 + Int(random.next(below: 2))).map(\.connectionID)
                        request = ClaimRequest(.connections(picked), wait: wait, maxSeconds: 5)
                    } else {
                        request = ClaimRequest(
                            .matching(.all, serial: nil, count: 1 + Int(random.next(below: 2))), wait: wait)
                    }
                    switch book.request(request, by: claimant, in: fixture.world) {
                    case .granted(let claim):
                        coverage.granted += 1
                        asked[claim.number] = claim.items.count
                        #expect(claim.items.count == Self.count(of: request, fixture), "\(context)")
                    case .queued(let waiter):
                        coverage.queued += 1
                        asked[waiter.number] = Self.count(of: request, fixture)
                    case .conflict(let holders):
                        coverage.conflicts += 1
                        #expect(!holders.isEmpty && holders.allSatisfy { book.claims[$0] != nil }, "\(context)")
                    case .refused: break
                    }
                case 6:
                    guard let number = book.claims.keys.sorted().randomElement(using: &random) else { continue }
                    if let claim = book.end(number) { effects.append(.ended(claim, why: .released)) }
                case 7:
                    let session = UInt64(Self.uids[Int(random.next(below: 4))])
                    effects += book.sessionEnded(session, preserved: nil, graceSeconds: 1, now: fixture.now)
                case 8 where random.next(below: 4) == 0:
                    // accmond restarts: every holder and waiter is away for a window.
                    book.awaitClaimersBack(until: fixture.now + 2_000_000_000)
                    coverage.restarts += 1
                case 8:
                    // One that is away comes back with its token (the same uid, a session of that number).
                    var tokens: [(claimant: Claimant, token: String)] = []
                    for claim in book.claims.values where claim.holder.session == nil && claim.holder.awayUntil != nil {
                        tokens.append((claim.holder, claim.token))
                    }
                    for waiter in book.waiters where waiter.claimant.session == nil && waiter.claimant.awayUntil != nil {
                        tokens.append((waiter.claimant, waiter.token))
                    }
                    guard let (claimant, token) = tokens.randomElement(using: &random) else { continue }
                    var back = ClaimFixture.claimant(claimant.principal?.uid ?? 1)
                    back.session = UInt64(claimant.principal?.uid ?? 1)
                    if case .refused = book.resume(token: token, by: back) {
                        Issue.record("\(context): an away claimant's token was refused")
                    }
                    coverage.resumed += 1
                default:
                    fixture.now += random.next(below: 3_000_000_000)
                    effects += book.expire(now: fixture.now)
                }
                for effect in effects {
                    switch effect {
                    case .returned: coverage.returned += 1
                    case .ended(_, .lost): coverage.lost += 1
                    case .ended(_, .expired): coverage.expired += 1
                    default: break
                    }
                }
                let kept = Self.keptForAwayWaiters(book, fixture)
                for (waiter, claim) in book.offer(fixture.world) {
                    coverage.served += 1
                    #expect(claim.items.count == asked[claim.number], "\(context): served all it asked for")
                    #expect(waiter.claimant.awayUntil == nil, "\(context): \(claim.claimID) granted while away")
                    #expect(
                        kept.isDisjoint(with: claim.items.compactMap(\.connection)),
                        "\(context): \(claim.claimID) took the turn of a waiter that is away")
                }
                Self.checkInvariants(book, fixture, asked, context)
            }
        }
        #expect(coverage.granted > 1000 && coverage.queued > 200 && coverage.served > 100, "\(coverage)")
        #expect(coverage.conflicts > 100 && coverage.returned > 20 && coverage.lost > 20, "\(coverage)")
        #expect(coverage.expired > 20 && coverage.restarts > 100 && coverage.resumed > 100, "\(coverage)")
    }

    private static func count(of request: ClaimRequest, _ fixture: ClaimFixture) -> Int {
        switch request.target {
        case .connections(let connections): connections.count
        case .matching(_, _, let count): count
        case .resume: 0
        }
    }

    private static func checkInvariants(
        _ book: ClaimBook, _ fixture: ClaimFixture, _ asked: [UInt64: Int], _ context: String
    ) {
        let connected = Set(fixture.connected.map(\.connectionID))
        var seen: [ConnectionID: UInt64] = [:]
        for claim in book.claims.values {
            #expect(claim.items.count == asked[claim.number], "\(context): \(claim.claimID) holds all it asked for")
            for item in claim.items {
                if let connection = item.connection {
                    #expect(seen[connection] == nil, "\(context): \(connection) held twice")
                    seen[connection] = claim.number
                    #expect(connected.contains(connection), "\(context): \(claim.claimID) holds a gone connection")
                } else {
                    #expect(item.awayUntil != nil && item.awayUntil! > fixture.now, "\(context): away past its window")
                }
            }
        }
        #expect(seen == book.holding, "\(context): the holding index matches the claims")
        // Nothing free is idle while a waiter present could take it, unless a waiter before it that is away could.
        var reserved: Set<ConnectionID> = []
        for waiter in book.waiters {
            let takeable = book.takeable(waiter, fixture.world, excluding: reserved)
            if waiter.claimant.session == nil && waiter.claimant.awayUntil != nil {
                reserved.formUnion(takeable?.compactMap(\.connection) ?? [])
            } else {
                #expect(takeable == nil, "\(context): \(waiter.claimID) could be served")
            }
        }
    }

    /// What the waiters that are away could take, in line order, each from what those before it left.
    private static func keptForAwayWaiters(_ book: ClaimBook, _ fixture: ClaimFixture) -> Set<ConnectionID> {
        var kept: Set<ConnectionID> = []
        var taken: Set<ConnectionID> = []
        for waiter in book.waiters {
            guard let items = book.takeable(waiter, fixture.world, excluding: taken) else { continue }
            let connections = items.compactMap(\.connection)
            taken.formUnion(connections)
            if waiter.claimant.session == nil && waiter.claimant.awayUntil != nil { kept.formUnion(connections) }
        }
        return kept
    }
}
