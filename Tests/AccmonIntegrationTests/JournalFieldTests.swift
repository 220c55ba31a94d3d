import Testing

@testable import AccmonLogging

@Suite("Journal fields and message ids")
struct JournalFieldTests {
    @Test func metadataKeysBecomeJournalFieldNames() {
        #expect(Logger.journalFieldName("accessory.id") == "ACCESSORY_ID")
        #expect(Logger.journalFieldName("client.pid") == "CLIENT_PID")
        #expect(Logger.journalFieldName("_private") == "PRIVATE")
        #expect(Logger.journalFieldName("1st") == "ACCMON_1ST")
        #expect(Logger.journalFieldName("héllo-wörld") == "H_LLO_W_RLD")
        #expect(Logger.journalFieldName(String(repeating: "a", count: 80)).count == 64)
    }

    @Test func eachKindOfMessageHasItsOwnID() {
        let ids = LogMessageID.all.map(\.id.rawValue)
        #expect(Set(ids).count == ids.count, "two kinds share an id")
        #expect(Set(LogMessageID.all.map(\.name)).count == ids.count, "a kind is listed twice")
        #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }, "an id is not 128-bit hex")
    }

    @Test func journalEntryCarriesLevelCodeLocationAndMetadata() {
        let logger = Logger(label: "accmond", level: .debug, destination: .journal)
        let fields = logger.journalFields(
            .warning, .clientSlow, "client does not read: suspending it", ["session": "s-16", "client.pid": "42"],
            file: "AccmondKit/Broker.swift", function: "deliver(_:_:to:)", line: 7)
        let map = Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(map["MESSAGE"] == "client does not read: suspending it")
        #expect(map["PRIORITY"] == "4")
        #expect(map["SYSLOG_IDENTIFIER"] == "accmond")
        #expect(map["MESSAGE_ID"] == LogMessageID.clientSlow.rawValue)
        #expect(map["CODE_FILE"] == "AccmondKit/Broker.swift" && map["CODE_LINE"] == "7")
        #expect(map["CODE_FUNC"] == "deliver(_:_:to:)")
        #expect(map["SESSION"] == "s-16" && map["CLIENT_PID"] == "42")
        #expect(fields.count == map.count, "a field appears twice")
    }
}
