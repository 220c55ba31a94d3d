import AccmonTestSupport
import Foundation
import Testing

@testable import AccmonMQTT

private let base = HostStatus(state: .online, host: "lab-1", machineID: "m", runID: "r", since: 1, bridge: "0.1.0")

@Test func aStatusCarriesItsCountsSortedAndWithoutThemAsBefore() {
    var counted = base
    counted.retained = ["accessories": 3]
    #expect(
        String(decoding: counted.payload, as: UTF8.self)
            == #"{"bridge":"0.1.0","host":"lab-1","machineID":"m","retained":{"accessories":3},"runID":"r","since":1,"#
            + #""state":"online"}"#)
    #expect(
        String(decoding: base.payload, as: UTF8.self)
            == #"{"bridge":"0.1.0","host":"lab-1","machineID":"m","runID":"r","since":1,"state":"online"}"#)
    #expect(HostStatus.decode(counted.payload) == counted)
    #expect(HostStatusReader.status(counted.payload) == counted, "the bridge's form is read directly")
    #expect(
        HostStatusReader.status(base.with(.offline, reason: "stopped").payload)
            == base.with(.offline, reason: "stopped"))
    #expect(HostStatusReader.status(Array(#"{"bridge":"0", "host":"h"}"#.utf8)) == nil)
    #expect(counted.retainedCount(.accessories) == 3)
    #expect(base.retainedCount(.accessories) == nil)
    #expect(counted.withoutCounts == base)
    #expect(counted.with(.offline, reason: "stopped").retainedCount(.accessories) == 3, "a clean stop keeps the count")
}

@Test func readersIgnoreFieldsAndFamiliesTheyDoNotKnow() {
    let newer =
        #"{"bridge":"9","claims":{"x":1},"host":"h","machineID":"m","retained":{"accessories":2,"claims":5},"#
        + #""runID":"r","since":2.5,"state":"offline","reason":"stopped","future":[1,2]}"#
    let status = HostStatus.decode(Array(newer.utf8))
    #expect(status?.retainedCount(.accessories) == 2)
    #expect(status?.retained?["claims"] == 5)
    #expect(status?.state == .offline)
    let older = #"{"bridge":"0.1.0","host":"h","machineID":"m","runID":"r","since":1,"state":"online"}"#
    #expect(HostStatus.decode(Array(older.utf8))?.retainedCount(.accessories) == nil, "an older bridge: no count")
    let negative =
        #"{"bridge":"0","host":"h","machineID":"m","retained":{"accessories":-1},"runID":"r","since":1,"#
        + #""state":"online"}"#
    #expect(HostStatus.decode(Array(negative.utf8))?.retainedCount(.accessories) == nil, "a negative count is none")
}

/// The direct reader of the bridge's form and JSONDecoder agree on every status, whatever its strings hold (escapes
/// go through JSONDecoder).
@Test func aStatusReadsTheSameDirectlyAndThroughJSONDecoder() throws {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    func text() -> String { Fixtures.randomText(using: &random) }
    for _ in 0..<3_000 {
        var status = HostStatus(
            state: Bool.random(using: &random) ? .online : .offline, host: text(), machineID: text(), runID: text(),
            since: Double(random.next(below: 1 << 40)) / Double(1 + random.next(below: 1000)), bridge: text(),
            reason: Bool.random(using: &random) ? text() : nil)
        if Bool.random(using: &random) { status.lease = Int(random.next(below: 100_000)) }
        if Bool.random(using: &random) {
            status.retained = Dictionary(
                (0..<random.next(below: 3)).map { _ in (text(), Int(random.next(below: 1 << 40))) }
            ) { first, _ in first }
        }
        let payload = status.payload
        let decoded = try JSONDecoder().decode(HostStatus.self, from: Data(payload))
        #expect(HostStatus.decode(payload) == decoded, "\(String(decoding: payload, as: UTF8.self))")
        #expect(decoded == status)
    }
}

@Test func anOnlineStatusCarriesItsLeaseAndAnOfflineOneNone() {
    var leased = base
    leased.lease = 20
    leased.retained = ["accessories": 3]
    #expect(
        String(decoding: leased.payload, as: UTF8.self)
            == #"{"bridge":"0.1.0","host":"lab-1","lease":20,"machineID":"m","retained":{"accessories":3},"#
            + #""runID":"r","since":1,"state":"online"}"#)
    #expect(HostStatusReader.status(leased.payload) == leased, "the bridge's form is read directly")
    #expect(leased.leaseSeconds == 20)
    #expect(leased.with(.offline, reason: "stopped").lease == nil)
    #expect(leased.with(.offline, reason: "stopped").leaseSeconds == nil)
    #expect(base.leaseSeconds == nil, "a bridge older than the lease")
}
