import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// The table's cells, row after row: each row cut at the columns where the header's words start (counted in
/// characters), each cell without the spaces that pad it. `nil` when a row's cell does not start where its header's
/// word does (a cell too wide or too narrow for its column).
private func cells(of table: String) -> [[String]]? {
    let lines = table.split(separator: "\n").map { Array($0) }
    guard let header = lines.first else { return nil }
    var starts: [Int] = []
    for (index, character) in header.enumerated() where character != " " && (index == 0 || header[index - 1] == " ") {
        starts.append(index)
    }
    var rows: [[String]] = []
    for line in lines {
        var row: [String] = []
        for (column, start) in starts.enumerated() {
            let end = column + 1 < starts.count ? min(starts[column + 1], line.count) : line.count
            guard start < line.count, line[start] != " ", start == 0 || line[start - 1] == " " else { return nil }
            row.append(String(line[start..<end]).trimmingCharacters(in: .whitespaces))
        }
        rows.append(row)
    }
    return rows
}

extension BridgeProcessTests {
    /// `accmon list --broker` as a table, whose rows are made while the fleet is read.
    @Suite struct FleetTable {
        /// A fleet bigger than the broker's queue, with names the table must quote or measure in characters, and one
        /// accessory topic that holds no accessory object: a row per accessory, in aligned columns; the bad topic
        /// named on standard error, not read again as if the broker had dropped it, and the exit status 1.
        @Test func aRowPerAccessoryInAlignedColumnsAndABadTopicNamed() async throws {
            let broker = try await Mosquitto.start(Mosquitto.Options(settings: ["max_queued_messages 50"]))
            let fleet = SyntheticFleet(hosts: 120, accessories: 20)
            let names = [
                "Café ünit": #""Café ünit""#, #"a "quoted" name"#: #""a \"quoted\" name""#,
                #"back\slash"#: #"back\slash"#, "tab\there": #""tab\u{9}here""#, "Ünïcödé": "Ünïcödé",
            ]
            var odd: [UInt64: Accessory] = [:]
            var messages = fleet.messages
            for (index, name) in names.keys.sorted().enumerated() {
                var accessory = SyntheticFleet.accessory(host: 7, index)
                accessory.name = name
                odd[accessory.connectionID.rawValue] = accessory
                messages.append(
                    (
                        fleet.topics.accessory(
                            host: "lab-00007", accessoryID: accessory.accessoryID,
                            connectionID: accessory.connectionID.rawValue),
                        JSONOutput.bytes(startingOnTheStack: 1024) { EventLineWriter.accessory(accessory, into: &$0) }
                    ))
            }
            let bad = SyntheticFleet.accessory(host: 9, 4)
            messages.append(
                (
                    fleet.topics.accessory(host: "lab-00009", accessoryID: bad.accessoryID, connectionID: 5),
                    Array(#"{"accessoryID":"#.utf8)
                ))
            try await publishRetained(messages, to: broker)

            let listed = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--broker-queue", "50"], in: broker.directory,
                timeout: .seconds(120))
            #expect(listed.termination == .exited(1), "\(listed.stderr)")
            #expect(
                listed.stderr.contains(
                    "host 'lab-00009': the accessory topics of connections 5 hold no accessory object"),
                "\(listed.stderr)")
            #expect(!listed.stderr.contains("dropped"), "\(listed.stderr)")

            var expected = [["HOST", "STATE", "CONN", "KIND", "ID", "NAME", "SERIAL", "NODES", "HOLDER"]]
            for (host, accessories) in fleet.truth.sorted(by: { $0.key < $1.key }) {
                for (connection, truth) in accessories.sorted(by: { $0.key < $1.key }) {
                    if host == "lab-00009", connection == 5 { continue }
                    let accessory = host == "lab-00007" ? odd[connection] ?? truth : truth
                    expected.append([
                        host, "online", String(connection), "serial", accessory.usbID,
                        names[accessory.name] ?? "\"\(accessory.name)\"", accessory.serialNumber,
                        accessory.deviceNodes.joined(separator: ","), "-",
                    ])
                }
            }
            let table = try #require(cells(of: listed.stdout), "columns not aligned: \(listed.stdout.prefix(3000))")
            #expect(table.count == expected.count)
            let wrong = zip(table, expected).filter { $0 != $1 }
            #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        }
    }
}
