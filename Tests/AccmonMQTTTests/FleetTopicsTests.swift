import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmonMQTT

/// Characters a host name or accessory id may hold that topic levels must not carry as they are, and plain ones.
private let levelAlphabet: [Unicode.Scalar] =
    [
        0x2F, 0x2B, 0x23, 0x25, 0x24, 0x00, 0x1F, 0x7F, 0x85, 0x9F, 0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFF, 0x10FFFF,
        0x61, 0x5A, 0x30, 0x3A, 0x3D, 0x2D, 0x20, 0xE9, 0x4E2D, 0x1F600, 0x2028,
    ].map { Unicode.Scalar($0)! }

private func randomLevel(_ random: inout SplitMix64) -> String {
    var text = String.UnicodeScalarView()
    for _ in 0..<random.next(below: 16) { text.append(levelAlphabet.randomElement(using: &random)!) }
    return String(text)
}

/// Whether `level` is one MQTT accepts inside a topic name, as the encoding promises.
private func isCleanLevel(_ level: String) -> Bool {
    guard !level.hasPrefix("$") else { return false }
    let bytes = Array(level.utf8)
    for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "%") {
        guard index + 2 < bytes.count,
            bytes[index + 1...index + 2].allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit })
        else { return false }
    }
    return level.unicodeScalars.allSatisfy { scalar in
        let value = scalar.value
        return !"/+#$".unicodeScalars.contains(scalar) && !(0...0x1F).contains(value) && !(0x7F...0x9F).contains(value)
            && !(0xFDD0...0xFDEF).contains(value) && value & 0xFFFE != 0xFFFE
    }
}

@Test func encodedLevelsDecodeToTheTextAndHoldNothingMQTTRefuses() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    for _ in 0..<20_000 {
        let text = randomLevel(&random)
        let level = FleetTopics.encodeLevel(text)
        #expect(FleetTopics.decodeLevel(level) == text, "level \(level.debugDescription)")
        #expect(isCleanLevel(level), "level \(level.debugDescription) of \(text.debugDescription)")
    }
}

@Test func plainLevelsAreLeftAsTheyAre() {
    for text in ["lab-1", "usb:1209:0001:serial=ABC", "bluetooth-hid:-:-:serial=a4:c1:38:00:00:01", "héllo 中"] {
        #expect(FleetTopics.encodeLevel(text) == text)
    }
}

@Test func levelsAreEncodedByteByByte() {
    #expect(FleetTopics.encodeLevel("lab/1") == "lab%2F1")
    #expect(FleetTopics.encodeLevel("a+b#c") == "a%2Bb%23c")
    #expect(FleetTopics.encodeLevel("100%") == "100%25")
    #expect(FleetTopics.encodeLevel("$SYS") == "%24SYS")
    #expect(FleetTopics.encodeLevel("tab\there") == "tab%09here")
    #expect(FleetTopics.encodeLevel("\u{85}") == "%C2%85")
    #expect(FleetTopics.encodeLevel("usb:-:-:sysfs=/sys/devices/x") == "usb:-:-:sysfs=%2Fsys%2Fdevices%2Fx")
}

@Test func decodingLeavesAStrayPercentAsItIs() {
    #expect(FleetTopics.decodeLevel("100%") == "100%")
    #expect(FleetTopics.decodeLevel("%zz%2") == "%zz%2")
    #expect(FleetTopics.decodeLevel("%2f%2F") == "//")
}

@Test func topicsOfAHostAndTheirParse() {
    let topics = FleetTopics(prefix: "site/accmon")
    #expect(topics.status(host: "lab/1") == "site/accmon/lab%2F1/status")
    #expect(topics.events(host: "lab-1") == "site/accmon/lab-1/events")
    #expect(topics.sync(host: "lab-1") == "site/accmon/lab-1/sync")
    #expect(topics.accessories(host: "lab-1") == "site/accmon/lab-1/accessories/+/+")
    #expect(topics.statuses == "site/accmon/+/status")
    #expect(topics.readerSync(clientID: "cli/1") == "site/accmon/$readers/cli%2F1")
    let accessory = topics.accessory(host: "lab/1", accessoryID: "usb:-:-:sysfs=/sys/x", connectionID: 42)
    #expect(accessory == "site/accmon/lab%2F1/accessories/usb:-:-:sysfs=%2Fsys%2Fx/42")
    #expect(
        topics.parse(accessory)
            == .accessory(hostLevel: "lab%2F1", accessoryID: "usb:-:-:sysfs=/sys/x", connectionID: 42))
    #expect(topics.parse("site/accmon/lab%2F1/status") == .status(hostLevel: "lab%2F1"))
    let claim = topics.claim(host: "lab/1", accessoryID: "usb:-:-:sysfs=/sys/x", connectionID: 42)
    #expect(claim == "site/accmon/lab%2F1/claims/usb:-:-:sysfs=%2Fsys%2Fx/42")
    #expect(topics.parse(claim) == .claim(hostLevel: "lab%2F1", accessoryID: "usb:-:-:sysfs=/sys/x", connectionID: 42))
    #expect(topics.claims(hostLevel: "lab%2F1") == "site/accmon/lab%2F1/claims/+/+")
    for other in [
        "site/accmon/lab-1/claims/x", "site/accmon/lab-1/claims/x/notanumber", "site/accmon/lab-1/claims/x/1/2",
        "site/accmon/lab-1/claim-requests/ci", "site/accmon/lab-1/claim-replies/ci/x", "site/accmon/lab-1/events",
        "site/accmon/lab-1/sync", "site/accmon/lab-1/accessories/x", "site/accmon/status",
        "site/accmon/lab-1/accessories/x/notanumber", "site/accmonx/lab-1/status", "other/lab-1/status",
        "site/accmon//status", "site/accmon/$readers/cli",
    ] {
        #expect(topics.parse(other) == nil, "\(other)")
    }
    for other in ["site/accmon/lab%2F1/status", claim, "site/accmon/$hosts/7/lab-1", "site/accmon/lab-1/accessories/x"]
    {
        var bytes = other
        #expect(bytes.withUTF8 { topics.accessoryTopic($0) } == nil, "\(other)")
    }
}

@Test func everyAccessoryTopicParsesBackToItsHostIDAndConnection() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let topics = FleetTopics(prefix: "accmon")
    for _ in 0..<5_000 {
        let host = randomLevel(&random) + "h"
        let accessory = Fixtures.randomAccessory(using: &random)
        let topic = topics.accessory(
            host: host, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue)
        guard case .accessory(let level, let id, let connection)? = topics.parse(topic) else {
            Issue.record("not parsed: \(topic.debugDescription)")
            continue
        }
        #expect(FleetTopics.decodeLevel(level) == host)
        #expect(id == accessory.accessoryID)
        #expect(connection == accessory.connectionID.rawValue)
        // What a one-time read counts a host's accessory topics by: the same host and connection.
        var bytes = topic
        let counted = bytes.withUTF8 { bytes in
            topics.accessoryTopic(bytes).map { (String(decoding: bytes[$0.hostLevel], as: UTF8.self), $0.connectionID) }
        }
        #expect(counted?.0 == level && counted?.1 == connection, "\(topic.debugDescription)")
    }
}

@Test func prefixesMQTTCannotCarryAreRefused() {
    #expect(FleetTopics.problem(withPrefix: "accmon") == nil)
    #expect(FleetTopics.problem(withPrefix: "site-a/accmon") == nil)
    for bad in ["", "$SYS", "a/+", "a/#", "/accmon", "accmon/", "a//b", "a\u{1}b"] {
        #expect(FleetTopics.problem(withPrefix: bad) != nil, "\(bad.debugDescription)")
    }
}

@Test func theHostIndexAndTheWindowFiltersOfAHost() {
    let topics = FleetTopics(prefix: "site/accmon")
    // FNV-1a (32 bits) of the level's bytes, its low 8 bits: computed apart, in Python, for these levels.
    #expect(HostIndex.bucket(ofLevel: "lab-00042") == 0xFF)
    #expect(HostIndex.bucket(ofLevel: "lab-1") == 0x9E)
    #expect(HostIndex.bucket(ofLevel: "lab%2F1") == 0x4A)
    #expect(HostIndex.bucketLevel(0x0A) == "0a")
    #expect(topics.indexEntry(host: "lab/1") == "site/accmon/$hosts/4a/lab%2F1")
    #expect(topics.indexBucket(0x4A) == "site/accmon/$hosts/4a/+")
    #expect(topics.parse("site/accmon/$hosts/4a/lab%2F1") == .indexEntry(hostLevel: "lab%2F1"))
    #expect(topics.status(hostLevel: "lab%2F1") == topics.status(host: "lab/1"))
    #expect(topics.filter(.accessories, hostLevel: "lab%2F1") == topics.accessories(host: "lab/1"))
    #expect(topics.filter(.accessories) == "site/accmon/+/accessories/+/+")
    #expect(String(decoding: HostIndex.payload(host: "lab/1"), as: UTF8.self) == #"{"host":"lab/1"}"#)
    for other in [
        "site/accmon/$hosts/4a", "site/accmon/$hosts/4a/", "site/accmon/$hosts/4a/x/y", "site/accmon/$readers/status",
        "site/accmon/$hosts/status", "site/accmon/%24x/status",
    ] {
        let parsed = topics.parse(other)
        if other.hasSuffix("%24x/status") {
            #expect(parsed == .status(hostLevel: "%24x"), "an encoded '$' is a host like any")
        } else {
            #expect(parsed == nil, "\(other)")
        }
    }
}

@Test func everyIndexEntryAndStatusTopicParsesBackToItsHost() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let topics = FleetTopics(prefix: "accmon")
    var buckets = Set<Int>()
    for _ in 0..<5_000 {
        let host = randomLevel(&random) + "h"
        let level = FleetTopics.encodeLevel(host)
        #expect(topics.parse(topics.indexEntry(host: host)) == .indexEntry(hostLevel: level))
        #expect(topics.parse(topics.status(host: host)) == .status(hostLevel: level))
        buckets.insert(HostIndex.bucket(ofLevel: level))
    }
    #expect(buckets.count > 250, "the buckets spread the hosts")
    #expect(buckets.allSatisfy { (0..<HostIndex.bucketCount).contains($0) })
}
