import AccmonMQTT
import AccmonTestSupport
import Foundation
import Testing

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
