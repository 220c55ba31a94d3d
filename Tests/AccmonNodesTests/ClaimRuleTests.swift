import AccmonTestSupport
import Foundation
import Testing

/// The shipped udev rule 72-accmon-claims.rules with the real udev (`udevadm test`, in a mount namespace where the
/// rules are this system's, accmon's, and an admin's that gives seat users serial ports): a node that appears on a
/// marked port is root's alone, without the uaccess tag and on a seat with nobody; without a mark (or with another
/// port's), it is what the other rules make it (Tests/umockdev/claim_rule.py).
@Suite struct ClaimRuleTests {
    struct Scenario: Encodable {
        var node: String
        var marked: String?
        var action = "add"
    }

    struct Result: Decodable, Equatable {
        var owner: Int
        var group: Int
        var mode: String
        var current_tags: [String]
        var properties: [String: String]
    }

    func results(_ scenarios: [Scenario]) async throws -> [Result] {
        let directory = try TemporaryDirectory()
        let input = directory.file("scenarios")
        let lines = try scenarios.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let result = try await run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", "exec umockdev-wrapper /usr/bin/python3 \"$1\" <\"$2\"", "sh",
                Repository.file("Tests/umockdev/claim_rule.py").path, input,
            ], in: directory, timeout: .seconds(60))
        guard result.termination == .exited(0) else {
            throw Binaries.LocateError(description: "claim_rule.py: \(result)")
        }
        return try result.stdout.split(separator: "\n").map {
            try JSONDecoder().decode(Result.self, from: Data($0.utf8))
        }
    }

    @Test func aNodeOnAMarkedPortIsRootsAloneAndOtherwiseUnchanged() async throws {
        let found = try await results([
            Scenario(node: "tty", marked: nil), Scenario(node: "tty", marked: "1-3"),
            Scenario(node: "usb", marked: nil),
            Scenario(node: "usb", marked: "1-3"), Scenario(node: "tty", marked: "1-4"),
            Scenario(node: "tty", marked: "1-3", action: "change"),
        ])
        try #require(found.count == 6)
        // Unmarked: Debian's rules give serial ports root:dialout 0660, usbfs nodes root:root 0664; the admin's rule
        // tags the serial port for uaccess.
        let serial = found[0]
        #expect(
            serial.owner == 0 && serial.group == 20 && serial.mode == "0660" && serial.current_tags.contains("uaccess"))
        #expect(serial.properties["ACCMON_CLAIMED_PORT"] == nil && serial.properties["ID_SEAT"] == nil)
        #expect(found[2].owner == 0 && found[2].group == 0 && found[2].mode == "0664")
        #expect(found[4] == serial, "another port's mark changes nothing")
        for (index, claimed) in [(1, found[1]), (3, found[3]), (5, found[5])] {
            #expect(claimed.owner == 0 && claimed.group == 0 && claimed.mode == "0600", "scenario \(index): \(claimed)")
            #expect(!claimed.current_tags.contains("uaccess"), "scenario \(index): \(claimed)")
            #expect(claimed.properties["ID_SEAT"] == "seat-accmon-claimed", "scenario \(index)")
            #expect(claimed.properties["ACCMON_CLAIMED_PORT"] == "1-3", "scenario \(index)")
        }
    }
}
