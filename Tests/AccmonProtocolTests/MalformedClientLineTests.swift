import AccmonProtocol
import Testing

/// A client line the codec must refuse, with the error it must report.
struct MalformedLine: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var code: ProtocolError.Code
    /// The start of the message: `context: object: `.
    var prefix: String
    /// The request id the failure must carry.
    var id: RequestID?

    init(_ name: String, _ text: String, _ code: ProtocolError.Code, _ prefix: String, id: RequestID? = nil) {
        self.init(name, Array(text.utf8), code, prefix, id: id)
    }

    init(_ name: String, _ bytes: [UInt8], _ code: ProtocolError.Code, _ prefix: String, id: RequestID? = nil) {
        self.name = name
        self.bytes = bytes
        self.code = code
        self.prefix = prefix
        self.id = id
    }

    var testDescription: String { name }
}

private func simulate(_ fields: String, id: Int = 1) -> String {
    "{\"type\":\"simulate\",\"id\":\(id),\(fields)}"
}

private func connect(_ accessory: String) -> String {
    simulate("\"action\":\"connect\",\"accessory\":\(accessory)")
}

private let malformedLines: [MalformedLine] = [
    // Not JSON at all, or not UTF-8.
    MalformedLine("empty line", "", .malformedJSON, "message: line: "),
    MalformedLine("blanks only", "  \t ", .malformedJSON, "message: line: "),
    MalformedLine("truncated object", #"{"type":"#, .malformedJSON, "message: line: "),
    MalformedLine("truncated array", #"{"type":"hello","versions":[1"#, .malformedJSON, "message: line: "),
    MalformedLine("truncated string", #"{"type":"stat"#, .malformedJSON, "message: line: "),
    MalformedLine("trailing garbage", #"{"type":"status"} x"#, .malformedJSON, "message: line: "),
    MalformedLine("two objects", #"{"type":"status"}{"type":"status"}"#, .malformedJSON, "message: line: "),
    MalformedLine("single quotes", "{'type':'status'}", .malformedJSON, "message: line: "),
    MalformedLine("bare word", "status", .malformedJSON, "message: line: "),
    MalformedLine("raw control character in string", "{\"type\":\"sta\u{1}tus\"}", .malformedJSON, "message: line: "),
    MalformedLine("lone surrogate escape", #"{"type":"\ud800"}"#, .malformedJSON, "message: line: "),
    MalformedLine("invalid UTF-8 byte", [0xFF], .malformedJSON, "message: line: "),
    MalformedLine(
        "invalid UTF-8 in the type", Array(#"{"type":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8), .malformedJSON,
        "message: line: "),
    MalformedLine(
        "overlong UTF-8 encoding in an unread field",
        Array("{\"type\":\"status\",\"id\":3,\"x\":\"".utf8) + [0xC0, 0xAF] + Array("\"}".utf8), .malformedJSON,
        "message: line: "),
    MalformedLine(
        "UTF-8 encoded surrogate in the id",
        Array(#"{"type":"status","id":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), .malformedJSON,
        "message: line: "),
    MalformedLine(
        "deeply nested arrays", String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000),
        .malformedJSON, "message: line: "),
    MalformedLine(
        "deeply nested junk in an unread field",
        #"{"type":"status","id":2,"junk":"# + String(repeating: #"{"a":["#, count: 5_000) + "1"
            + String(repeating: "]}", count: 5_000) + "}",
        .malformedJSON, "message: line: "),

    // JSON, but not a message object.
    MalformedLine("array", "[]", .invalidMessage, "message: line: "),
    MalformedLine("array holding a message", #"[{"type":"status"}]"#, .invalidMessage, "message: line: "),
    MalformedLine("number", "42", .invalidMessage, "message: line: "),
    MalformedLine("huge number", "1e99999", .invalidMessage, "message: line: "),
    MalformedLine("string", #""status""#, .invalidMessage, "message: line: "),
    MalformedLine("null", "null", .invalidMessage, "message: line: "),
    MalformedLine("boolean", "true", .invalidMessage, "message: line: "),
    MalformedLine("empty object", "{}", .invalidMessage, "message: type: "),
    MalformedLine("object with only an id", #"{"id":5}"#, .invalidMessage, "message: type: ", id: .number(5)),
    MalformedLine("type null", #"{"type":null,"id":"n"}"#, .invalidMessage, "message: type: ", id: .string("n")),
    MalformedLine("type a number", #"{"type":7,"id":3}"#, .invalidMessage, "message: type: ", id: .number(3)),
    MalformedLine(
        "type an array", #"{"id":"x","type":["hello"]}"#,
        .invalidMessage, "message: type: ", id: .string("x")),
    MalformedLine("type an object", #"{"type":{},"id":-4}"#, .invalidMessage, "message: type: ", id: .number(-4)),

    // Unknown types.
    MalformedLine("unknown type", #"{"type":"frobnicate","id":6}"#, .unknownType, "message: type: ", id: .number(6)),
    MalformedLine("type in the wrong case", #"{"type":"HELLO"}"#, .unknownType, "message: type: "),
    MalformedLine("empty type", #"{"type":"","id":"e"}"#, .unknownType, "message: type: ", id: .string("e")),
    MalformedLine("server-only type", #"{"type":"snapshot"}"#, .unknownType, "message: type: "),

    // Bad request ids: the id cannot be recovered.
    MalformedLine("id a fraction", #"{"type":"status","id":1.5}"#, .invalidField, "message: id: "),
    MalformedLine("id a boolean", #"{"type":"status","id":true}"#, .invalidField, "message: id: "),
    MalformedLine("id an object", #"{"type":"status","id":{}}"#, .invalidField, "message: id: "),
    MalformedLine("id beyond Int64", #"{"type":"status","id":9223372036854775808}"#, .invalidField, "message: id: "),
    // A number id must be written as an integer: these were read as 0, 1 and 100 while 2^63-1 written so was refused.
    MalformedLine("id a vanishing exponent", #"{"type":"status","id":1e-999999}"#, .invalidField, "message: id: "),
    MalformedLine("id a zero fraction", #"{"type":"status","id":1.0}"#, .invalidField, "message: id: "),
    MalformedLine("id an exponent", #"{"type":"status","id":1e2}"#, .invalidField, "message: id: "),
    MalformedLine(
        "id Int64.max with an exponent", #"{"type":"status","id":9.223372036854775807e18}"#, .invalidField,
        "message: id: "),

    // A key twice in one object, at any depth (JSONDecoder alone kept the first).
    MalformedLine(
        "type sent twice", #"{"type":"status","type":"reload","id":1}"#, .invalidField, "message: type: ",
        id: .number(1)),
    MalformedLine("empty key sent twice", #"{"type":"status","":1,"":2}"#, .invalidField, "message: line: "),
    MalformedLine("id sent twice", #"{"type":"status","id":1,"id":2}"#, .invalidField, "message: id: "),
    MalformedLine(
        "filter key sent twice", #"{"type":"list","id":"l","filter":{"kind":"usb","kind":"serial"}}"#, .invalidField,
        "message: filter.kind: ", id: .string("l")),
    MalformedLine(
        "filter key sent twice, once escaped", #"{"type":"list","filter":{"vendorID":"0403","vendor\u0049D":"1"}}"#,
        .invalidField, "message: filter.vendorID: "),
    MalformedLine(
        "accessory field sent twice", connect(#"{"kind":"usb","name":"a","name":"b"}"#), .invalidField,
        "message: accessory.name: ", id: .number(1)),
    MalformedLine(
        "key sent twice deep in an unread member", #"{"type":"status","x":[{"a":{"b":1,"b":2}}],"id":3}"#,
        .invalidField, "message: x.[0].a.b: ", id: .number(3)),

    // Syntax JSONDecoder alone let through in a member it does not read.
    MalformedLine(
        "trailing comma in an unread array", #"{"type":"status","x":[1,]}"#, .malformedJSON, "message: line: "),
    MalformedLine("leading zero in an unread number", #"{"type":"status","x":01}"#, .malformedJSON, "message: line: "),
    MalformedLine(
        "unknown escape in an unread string", #"{"type":"status","x":"\q"}"#, .malformedJSON, "message: line: "),

    // Integer fields written with a fraction or an exponent.
    MalformedLine(
        "ack seq an exponent", #"{"type":"ack","seq":1e2,"id":3}"#, .invalidField, "ack: seq: ", id: .number(3)),
    MalformedLine(
        "hello version a zero fraction", #"{"type":"hello","versions":[1.0],"id":1}"#,
        .invalidField, "hello: versions.[0]: ", id: .number(1)),

    // hello.
    MalformedLine(
        "hello without versions", #"{"type":"hello","id":"h"}"#,
        .missingField, "hello: versions: ", id: .string("h")),
    MalformedLine(
        "hello versions null", #"{"type":"hello","versions":null,"id":1}"#,
        .invalidField, "hello: versions: ", id: .number(1)),
    MalformedLine(
        "hello versions a number", #"{"type":"hello","versions":1,"id":1}"#,
        .invalidField, "hello: versions: ", id: .number(1)),
    MalformedLine(
        "hello versions an object", #"{"type":"hello","versions":{},"id":1}"#,
        .invalidField, "hello: versions: ", id: .number(1)),
    MalformedLine(
        "hello version a string", #"{"type":"hello","versions":[1,"2"],"id":1}"#,
        .invalidField, "hello: versions.[1]: ", id: .number(1)),
    MalformedLine(
        "hello version a fraction", #"{"type":"hello","versions":[1.5],"id":1}"#,
        .invalidField, "hello: versions.[0]: ", id: .number(1)),
    MalformedLine(
        "hello version huge", #"{"type":"hello","versions":[1,99999999999999999999999],"id":1}"#,
        .invalidField, "hello: versions.[1]: ", id: .number(1)),
    MalformedLine(
        "hello version 1e400", #"{"type":"hello","versions":[1e400],"id":1}"#,
        .invalidField, "hello: versions.[0]: ", id: .number(1)),
    MalformedLine(
        "hello client a number", #"{"type":"hello","versions":[1],"client":5,"id":1}"#,
        .invalidField, "hello: client: ", id: .number(1)),
    MalformedLine(
        "hello restoreID a number", #"{"type":"hello","versions":[1],"restoreID":5,"id":1}"#,
        .invalidField, "hello: restoreID: ", id: .number(1)),

    // ack.
    MalformedLine("ack without seq", #"{"type":"ack","id":3}"#, .missingField, "ack: seq: ", id: .number(3)),
    MalformedLine("ack seq a string", #"{"type":"ack","seq":"5","id":3}"#, .invalidField, "ack: seq: ", id: .number(3)),
    MalformedLine("ack seq negative", #"{"type":"ack","seq":-1,"id":3}"#, .invalidField, "ack: seq: ", id: .number(3)),
    MalformedLine(
        "ack seq a fraction", #"{"type":"ack","seq":2.5,"id":3}"#,
        .invalidField, "ack: seq: ", id: .number(3)),

    // subscribe and list filters.
    MalformedLine(
        "filter a number", #"{"type":"subscribe","filter":5,"id":2}"#,
        .invalidField, "subscribe: filter: ", id: .number(2)),
    MalformedLine(
        "filter an array", #"{"type":"list","filter":[],"id":2}"#,
        .invalidField, "list: filter: ", id: .number(2)),
    MalformedLine(
        "filter kind unknown", #"{"type":"subscribe","filter":{"kind":"firewire"},"id":2}"#,
        .invalidField, "subscribe: filter.kind: ", id: .number(2)),
    MalformedLine(
        "filter kind a number", #"{"type":"subscribe","filter":{"kind":3},"id":2}"#,
        .invalidField, "subscribe: filter.kind: ", id: .number(2)),
    MalformedLine(
        "filter vendorID not hex", #"{"type":"subscribe","filter":{"vendorID":"xyz"},"id":2}"#,
        .invalidField, "subscribe: filter.vendorID: ", id: .number(2)),
    MalformedLine(
        "filter vendorID with 0x", #"{"type":"subscribe","filter":{"vendorID":"0x12"},"id":2}"#,
        .invalidField, "subscribe: filter.vendorID: ", id: .number(2)),
    MalformedLine(
        "filter vendorID too long", #"{"type":"list","filter":{"vendorID":"04030"},"id":2}"#,
        .invalidField, "list: filter.vendorID: ", id: .number(2)),
    MalformedLine(
        "filter vendorID empty", #"{"type":"list","filter":{"vendorID":""},"id":2}"#,
        .invalidField, "list: filter.vendorID: ", id: .number(2)),
    MalformedLine(
        "filter vendorID a number", #"{"type":"list","filter":{"vendorID":403},"id":2}"#,
        .invalidField, "list: filter.vendorID: ", id: .number(2)),
    MalformedLine(
        "filter productID 5 digits", #"{"type":"subscribe","filter":{"productID":"60010"},"id":2}"#,
        .invalidField, "subscribe: filter.productID: ", id: .number(2)),
    MalformedLine(
        "filter productID signed", #"{"type":"subscribe","filter":{"productID":"-1"},"id":2}"#,
        .invalidField, "subscribe: filter.productID: ", id: .number(2)),
    MalformedLine(
        "filter key misspelt", #"{"type":"subscribe","filter":{"vendor":"0403"},"id":2}"#,
        .invalidField, "subscribe: filter.vendor: ", id: .number(2)),
    MalformedLine(
        "filter protocol a number", #"{"type":"subscribe","filter":{"protocol":7},"id":2}"#,
        .invalidField, "subscribe: filter.protocol: ", id: .number(2)),

    // simulate.
    MalformedLine(
        "simulate without action", simulate(#""x":1"#, id: 9),
        .missingField, "simulate: action: ", id: .number(9)),
    MalformedLine(
        "simulate unknown action", simulate(#""action":"explode""#),
        .invalidField, "simulate: action: ", id: .number(1)),
    MalformedLine(
        "simulate action a number", simulate(#""action":1"#),
        .invalidField, "simulate: action: ", id: .number(1)),
    MalformedLine(
        "connect without accessory", simulate(#""action":"connect""#),
        .missingField, "simulate: accessory: ", id: .number(1)),
    MalformedLine(
        "connect accessory a string", connect(#""usb""#),
        .invalidField, "simulate: accessory: ", id: .number(1)),
    MalformedLine(
        "accessory without kind", connect(#"{"name":"x"}"#),
        .missingField, "simulate: accessory.kind: ", id: .number(1)),
    MalformedLine(
        "accessory kind unknown", connect(#"{"kind":"usb3"}"#),
        .invalidField, "simulate: accessory.kind: ", id: .number(1)),
    MalformedLine(
        "accessory name a number", connect(#"{"kind":"usb","name":3}"#),
        .invalidField, "simulate: accessory.name: ", id: .number(1)),
    MalformedLine(
        "accessory protocol not a string", connect(#"{"kind":"usb","protocolStrings":["a",1]}"#),
        .invalidField, "simulate: accessory.protocolStrings.[1]: ", id: .number(1)),
    MalformedLine(
        "accessory deviceNodes a string", connect(#"{"kind":"usb","deviceNodes":"/dev/x"}"#),
        .invalidField, "simulate: accessory.deviceNodes: ", id: .number(1)),
    MalformedLine(
        "accessory connectionID negative", connect(#"{"kind":"usb","connectionID":-3}"#),
        .invalidField, "simulate: accessory.connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect without connectionID", simulate(#""action":"disconnect""#),
        .missingField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID null", simulate(#""action":"disconnect","connectionID":null"#),
        .missingField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID negative", simulate(#""action":"disconnect","connectionID":-1"#),
        .invalidField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID a string", simulate(#""action":"disconnect","connectionID":"3""#),
        .invalidField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID a fraction", simulate(#""action":"disconnect","connectionID":1.5"#),
        .invalidField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID beyond UInt64",
        simulate(#""action":"disconnect","connectionID":18446744073709551616"#),
        .invalidField, "simulate: connectionID: ", id: .number(1)),
    MalformedLine(
        "disconnect connectionID huge exponent", simulate(#""action":"disconnect","connectionID":1e400"#),
        .invalidField, "simulate: connectionID: ", id: .number(1)),
]

private let contexts: Set<Substring> = [
    "message", "hello", "subscribe", "unsubscribe", "suspend", "resume", "ack", "list", "status", "simulate",
]

/// Whether `object` is `line` or a field path such as `filter.kind` or `versions.[1]`.
private func isFieldPath(_ object: Substring) -> Bool {
    if object == "line" { return true }
    let components = object.split(separator: ".", omittingEmptySubsequences: false)
    return components.allSatisfy { component in
        if component.first == "[" {
            return component.count > 2 && component.last == "]"
                && component.dropFirst().dropLast().allSatisfy(\.isNumber)
        }
        return !component.isEmpty && component.allSatisfy { $0.isLetter }
    }
}

@Test func malformedLineCorpusIsLargeAndCoversEveryCode() {
    #expect(malformedLines.count >= 35)
    let codes = Set(malformedLines.map(\.code))
    #expect(codes == [.malformedJSON, .invalidMessage, .unknownType, .missingField, .invalidField])
}

@Test(arguments: malformedLines)
func malformedClientLineIsRefusedWithItsCode(_ line: MalformedLine) {
    let result = ProtocolCodec().decodeClientMessage(line.bytes)
    guard case .failure(let failure) = result else {
        Issue.record("accepted: \(result)")
        return
    }
    #expect(failure.error.code == line.code, "\(failure.error.message)")
    #expect(failure.error.message.hasPrefix(line.prefix), "\(failure.error.message)")
    #expect(failure.id == line.id)

    // context: object: reason
    let parts = failure.error.message.split(separator: ": ", maxSplits: 2, omittingEmptySubsequences: false)
    #expect(parts.count == 3, "\(failure.error.message)")
    if parts.count == 3 {
        #expect(contexts.contains(parts[0]), "context '\(parts[0])'")
        #expect(isFieldPath(parts[1]), "object '\(parts[1])'")
        #expect(!parts[2].isEmpty)
    }
}

@Test func requestIDIsRecoveredFromEveryFailingObjectThatHasOne() {
    let codec = ProtocolCodec()
    // The same bad bodies with each form of id: the failure always carries it back.
    let bodies = [
        #""type":7"#, #""type":"nope""#, #""type":"hello""#, #""type":"subscribe","filter":{"kind":1}"#,
        #""type":"simulate","action":"disconnect","connectionID":-1"#, #""type":"list","filter":{"productID":"g"}"#,
    ]
    for body in bodies {
        for (text, id) in [("12", RequestID.number(12)), ("\"r-12\"", .string("r-12")), ("-7", .number(-7))] {
            let line = "{\(body),\"id\":\(text)}"
            guard case .failure(let failure) = codec.decodeClientMessage(Array(line.utf8)) else {
                Issue.record("accepted: \(line)")
                continue
            }
            #expect(failure.id == id, "\(line)")
        }
    }
}

@Test func errorMessagesQuoteTheOffendingValue() {
    let codec = ProtocolCodec()
    func message(_ line: String) -> String? {
        guard case .failure(let failure) = codec.decodeClientMessage(Array(line.utf8)) else { return nil }
        return failure.error.message
    }
    #expect(message("{\"type\":\"frob\"}")?.contains("'frob'") == true)
    #expect(message("{\"type\":\"simulate\",\"action\":\"explode\"}")?.contains("'explode'") == true)
    #expect(message("{\"type\":\"list\",\"filter\":{\"vendorID\":\"04030\"}}")?.contains("'04030'") == true)
    #expect(message("{\"type\":\"hello\"}") == "hello: versions: field 'versions' is missing")
    #expect(message("{\"type\":7}") == "message: type: expected a string")
    #expect(message("null") == "message: line: expected a JSON object")
    #expect(message(#"{"type":"status","id":7,"x":{"k":1,"k":2}}"#) == "message: x.k: duplicate key 'k'")
}
