import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// The hand-written `ok` lines must be byte for byte what JSONEncoder writes (errors are written by JSONEncoder).
@Suite struct ReplyLineWriterTests {
    static let connectionIDs: [ConnectionID?] = [nil, ConnectionID(0), ConnectionID(9), ConnectionID(UInt64.max)]

    @Test(arguments: Fixtures.requestIDs)
    func matchesJSONEncoderForFixtures(id: RequestID?) {
        let codec = ProtocolCodec()
        var replies: [ServerMessage] = Self.connectionIDs.map { .ok(id: id, connectionID: $0) }
        replies.append(.error(id: id, ProtocolError(.invalidField, "subscribe: filter.kind: unknown kind")))
        replies.append(.error(id: id, ProtocolError(ProtocolError.Code(rawValue: "future/code"), "")))
        replies.append(.error(id: id, ProtocolError(.malformedJSON, "a \"quoted\" path/with\\slashes\n\u{1}é😀")))
        for reply in replies {
            #expect(codec.encode(reply) == codec.encodeWithJSONEncoder(reply), "\(reply)")
        }
    }

    /// An `ok` whose id is longer than the stack space the writer starts in (128 bytes) moves to the heap whole.
    @Test func anOKLongerThanItsStackStartIsWhole() {
        let codec = ProtocolCodec()
        let reply = ServerMessage.ok(
            id: .string(String(repeating: "a \"long\" id ", count: 100)), connectionID: ConnectionID(UInt64.max))
        #expect(codec.encode(reply).count > 1_000)
        #expect(codec.encode(reply) == codec.encodeWithJSONEncoder(reply))
    }

    @Test func matchesJSONEncoderForRandomReplies() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let codec = ProtocolCodec()
        for _ in 0..<3_000 {
            let id = Fixtures.randomRequestID(using: &random)
            let reply: ServerMessage =
                if Bool.random(using: &random) {
                    .ok(
                        id: id,
                        connectionID: Bool.random(using: &random) ? ConnectionID(random.next()) : nil)
                } else {
                    .error(
                        id: id,
                        ProtocolError(
                            ProtocolError.Code(rawValue: Fixtures.randomRequestText(using: &random)),
                            Fixtures.randomRequestText(using: &random)))
                }
            #expect(
                codec.encode(reply) == codec.encodeWithJSONEncoder(reply), "seed \(seed) (ACCMON_TEST_SEED): \(reply)")
        }
    }
}
