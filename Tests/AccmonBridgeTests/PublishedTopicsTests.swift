import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@testable import AccmonBridge

/// The topics a bridge published, kept across runs and crashes (docs/MQTT.md §4, "What it published").
@Suite struct PublishedTopicsFileTests {
    /// A topic appended is read back by a new run; writing the set whole empties the journal; a line cut short (a
    /// full disk) is not a topic.
    @Test func theSetIsTheSnapshotAndTheJournalTogether() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("state")
        var file = try PublishedTopicsFile.open(path)
        #expect(try file.read().isEmpty)
        try file.append("accmon/lab-1/accessories/a/1")
        try file.append("accmon/lab-1/accessories/b/2")
        #expect(file.journalLines == 2)
        var again = try PublishedTopicsFile.open(path)
        #expect(try again.read() == ["accmon/lab-1/accessories/a/1", "accmon/lab-1/accessories/b/2"])
        #expect(again.journalLines == 2)

        try again.write(["accmon/lab-1/accessories/b/2"])
        #expect(again.journalLines == 0)
        #expect(try String(contentsOfFile: "\(path)/\(PublishedTopicsFile.journalName)", encoding: .utf8).isEmpty)
        try again.append("accmon/lab-1/accessories/c/3")
        let journal = try #require(FileHandle(forWritingAtPath: "\(path)/\(PublishedTopicsFile.journalName)"))
        journal.seekToEndOfFile()
        journal.write(Data("accmon/lab-1/accessories/cut".utf8))
        journal.closeFile()
        var third = try PublishedTopicsFile.open(path)
        #expect(try third.read() == ["accmon/lab-1/accessories/b/2", "accmon/lab-1/accessories/c/3"])
    }

    /// The journal asks to be folded into the set once it holds ``PublishedTopicsFile/journalCompaction`` lines, and
    /// not after the set was written whole.
    @Test func aLongJournalIsDueToBeFoldedIntoTheSet() throws {
        let directory = try TemporaryDirectory()
        var file = try PublishedTopicsFile.open(directory.file("state"))
        var topics: Set<String> = []
        for index in 0..<PublishedTopicsFile.journalCompaction {
            #expect(!file.wantsCompaction)
            let topic = "accmon/lab-1/accessories/a/\(index)"
            try file.append(topic)
            topics.insert(topic)
        }
        #expect(file.wantsCompaction)
        try file.write(topics)
        #expect(!file.wantsCompaction)
        var again = try PublishedTopicsFile.open(directory.file("state"))
        #expect(try again.read() == topics && !again.wantsCompaction)
    }
}

extension BridgeProcessTests {
    @Suite struct PublishedTopicsAcrossCrashes {
        /// Two accessories plugged one after the other, the bridge killed with SIGKILL as soon as the broker holds
        /// both: the state directory names both topics (before the journal, a topic published within a second of
        /// the last save was not in it).
        @Test func everyTopicPublishedBeforeASIGKILLIsInTheStateDirectory() async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "lab-1", broker: broker.url)
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.plug(using: &random)
            try await plugger.plug(using: &random)
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            host.killBridge()

            let topics = FleetTopics(prefix: "accmon")
            let expected = Set(
                try await host.truth().values.map {
                    topics.accessory(host: "lab-1", accessoryID: $0.accessoryID, connectionID: $0.connectionID.rawValue)
                })
            #expect(expected.count == 2)
            var file = try PublishedTopicsFile.open(host.directory.file("bridge-state"))
            #expect(try file.read() == expected)
        }
    }
}
