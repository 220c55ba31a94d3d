import AccmonTestSupport
import Testing

@testable import AccmonBridge

@Test func reconciliationMakesTheRetainedTopicsTheTruthWithTheFewestPublications() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let topics = (0..<12).map { "accmon/h/accessories/a/\($0)" }
    let payloads: [[UInt8]] = [Array("x".utf8), Array("y".utf8), Array("{\"kind\":\"usb\"}".utf8)]
    for _ in 0..<5_000 {
        var desired: [String: [UInt8]] = [:]
        var retained: [String: [UInt8]] = [:]
        for topic in topics {
            if Bool.random(using: &random) { desired[topic] = payloads.randomElement(using: &random)! }
            if Bool.random(using: &random) { retained[topic] = payloads.randomElement(using: &random)! }
        }
        let publications = RetainedReconciliation.publications(desired: desired, retained: retained)
        var broker = retained
        for publication in publications {
            broker[publication.topic] = publication.payload.isEmpty ? nil : publication.payload
        }
        let needed = Set(topics.filter { desired[$0] != retained[$0] })
        guard broker == desired, Set(publications.map(\.topic)) == needed, publications.count == needed.count else {
            Issue.record("retained \(retained), desired \(desired): published \(publications), leaving \(broker)")
            return
        }
    }
}
