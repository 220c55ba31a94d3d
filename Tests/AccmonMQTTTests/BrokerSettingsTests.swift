import AccmonMQTT
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@Test func brokerURLsGiveHostPortAndTLS() throws {
    let cases: [(String, BrokerAddress)] = [
        ("mqtt://localhost", BrokerAddress(host: "localhost", port: 1883, usesTLS: false)),
        ("mqtt://broker.example.net:1884/", BrokerAddress(host: "broker.example.net", port: 1884, usesTLS: false)),
        ("mqtts://broker", BrokerAddress(host: "broker", port: 8883, usesTLS: true)),
        ("MQTTS://10.0.0.1:9000", BrokerAddress(host: "10.0.0.1", port: 9000, usesTLS: true)),
        ("mqtt://[::1]:1999", BrokerAddress(host: "::1", port: 1999, usesTLS: false)),
        ("mqtt://[fe80::1]", BrokerAddress(host: "fe80::1", port: 1883, usesTLS: false)),
    ]
    for (url, expected) in cases {
        #expect(try BrokerAddress.parse(url).get() == expected, "\(url)")
    }
    #expect(BrokerAddress(host: "::1", port: 1999, usesTLS: true).description == "mqtts://[::1]:1999")
}

@Test func badBrokerURLsSayWhatIsWrong() {
    let cases: [(String, String)] = [
        ("http://broker", "is not a broker URL (expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT])"),
        ("broker:1883", "is not a broker URL"),
        ("mqtt://", "the host is missing"),
        ("mqtt://:1883", "the host is missing"),
        ("mqtt://broker:0", "'0' is not a port (1 to 65535)"),
        ("mqtt://broker:65536", "'65536' is not a port"),
        ("mqtt://broker:x", "'x' is not a port"),
        ("mqtt://user:secret@broker", "credentials go in username and passwordFile, never in the URL"),
        ("mqtt://broker/topic", "only a host and a port may follow mqtt://"),
        ("mqtt://[::1", "an IPv6 address needs its closing ']'"),
    ]
    for (url, reason) in cases {
        guard case .failure(let problem) = BrokerAddress.parse(url) else {
            Issue.record("\(url) was accepted")
            continue
        }
        #expect(problem.reason.contains(reason), "\(url): \(problem.reason)")
    }
}

@Test func hostStatusRoundTripsAndGarbageIsNoStatus() {
    let status = HostStatus(
        state: .online, host: "lab/1", machineID: "0123", runID: "abcd", since: 1_700_000_000.5, bridge: "0.1.0")
    #expect(HostStatus.decode(status.payload) == status)
    let offline = status.with(.offline, reason: "stopped")
    #expect(HostStatus.decode(offline.payload) == offline)
    #expect(String(decoding: offline.payload, as: UTF8.self).contains(#""reason":"stopped""#))
    #expect(String(decoding: status.payload, as: UTF8.self).hasPrefix(#"{"bridge":"0.1.0","host":"lab/1""#))
    for garbage in ["", "{}", "online", #"{"state":"sleeping"}"#, "[1]"] {
        #expect(HostStatus.decode(Array(garbage.utf8)) == nil, "\(garbage)")
    }
}

@Suite struct PasswordFileTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory() }

    func write(_ name: String, _ contents: String, mode: mode_t) throws -> String {
        let path = directory.file(name)
        try contents.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
        return path
    }

    @Test func readsTheFirstLineOfAFileOthersCannotRead() throws {
        #expect(try PasswordFile.read(write("a", "s3cret\n", mode: 0o600)) == "s3cret")
        #expect(try PasswordFile.read(write("b", "with space\r\nsecond line\n", mode: 0o640)) == "with space")
        #expect(try PasswordFile.read(write("c", "no newline", mode: 0o400)) == "no newline")
    }

    @Test func refusesAWorldReadableFile() throws {
        let path = try write("open", "s3cret\n", mode: 0o644)
        #expect {
            try PasswordFile.read(path)
        } throws: { error in
            "\(error)".contains("every user may read or write it (mode 644)") && "\(error)".contains("chmod o-rw")
        }
    }

    @Test func refusesWhatIsNoPasswordFile() throws {
        let empty = try write("empty", "\nsecond\n", mode: 0o600)
        #expect(throws: PasswordFileProblem("it holds no password (the first line is empty or not UTF-8)")) {
            try PasswordFile.read(empty)
        }
        let link = directory.file("link")
        symlink(try write("target", "x\n", mode: 0o600), link)
        #expect { try PasswordFile.read(link) } throws: { "\($0)".hasPrefix("cannot open it:") }
        #expect { try PasswordFile.read(directory.path) } throws: { "\($0)" == "not a regular file" }
        #expect { try PasswordFile.read(directory.file("missing")) } throws: {
            "\($0)" == "cannot open it: No such file or directory"
        }
        let long = try write("long", String(repeating: "x", count: 5000), mode: 0o600)
        #expect { try PasswordFile.read(long) } throws: { "\($0)".hasPrefix("longer than 4096 bytes") }
    }
}

@Test func aCommaSeparatedBrokerListGivesEachAddressInOrder() throws {
    let list = try BrokerAddress.parseList("mqtt://a:1883, mqtt://b:1884 ,mqtt://[::1]").get()
    #expect(
        list == [
            BrokerAddress(host: "a", port: 1883, usesTLS: false), BrokerAddress(host: "b", port: 1884, usesTLS: false),
            BrokerAddress(host: "::1", port: 1883, usesTLS: false),
        ])
}

@Test(arguments: [
    ("", "URL 1 of 1 is empty"),
    ("mqtt://a,", "URL 2 of 2 is empty"),
    ("mqtt://a,ftp://b", "'ftp://b' is not a broker URL"),
    ("mqtt://a,mqtt://a:1883", "'mqtt://a:1883': given twice (as mqtt://a:1883)"),
    ("mqtts://a,mqtt://b", "mqtt:// and mqtts:// in one list"),
])
func aBrokerListIsRefusedSayingWhichURLAndWhy(text: String, reason: String) {
    guard case .failure(let problem) = BrokerAddress.parseList(text) else {
        Issue.record("'\(text)' was accepted")
        return
    }
    #expect(problem.reason.contains(reason), "\(text): \(problem.reason)")
}

@Test func aRotationTriesTheNextAddressAtOnceThenBacksOffOnceEveryOneFailed() {
    let a = BrokerAddress(host: "a", port: 1883, usesTLS: false)
    let b = BrokerAddress(host: "b", port: 1883, usesTLS: false)
    var rotation = BrokerRotation([a, b])
    #expect(rotation.current == a)
    // a dropped: b at once; b fails too: back off, then a.
    #expect(rotation.failed() == true)
    #expect(rotation.current == b)
    #expect(rotation.failed() == false)
    #expect(rotation.current == a)
    // A new round after the back-off: a fails, b at once, b connects; dropped later: a at once.
    #expect(rotation.failed() == true)
    rotation.connected()
    #expect(rotation.current == b)
    #expect(rotation.failed() == true)
    #expect(rotation.current == a)
    // One address: always back off, as before lists.
    var single = BrokerRotation([a])
    #expect(single.failed() == false)
    #expect(single.failed() == false)
    #expect(single.current == a)
}
