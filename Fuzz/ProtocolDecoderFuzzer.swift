// libFuzzer target for the client side of the protocol: bytes → LineFramer → ProtocolCodec.decodeClientMessage, the
// decoder accmond runs on every line a client sends. Built and run by scripts/fuzz.sh (`make fuzz`), against the
// AccmonProtocol module (`@testable`: it calls the decoder's two paths apart).
//
// Besides "does not crash", it checks, and traps (preconditionFailure) on a violation:
// - the one-pass reader (RequestLineReader, over unsafe pointers: it gets each line in a buffer of exactly the line's
//   size, so AddressSanitizer sees a read past its end) returns only what JSONDecoder reads from the same line;
// - every decoded message re-encodes to one line that decodes to the same message, and encodes the same again;
// - every refusal has a known code and a message of the form `context: object: reason`, and the error reply carrying
//   it is one line, byte for byte what JSONEncoder writes for it;
// - framing does not depend on how the stream is cut into chunks, and reports a too-long line once.
//
// What a run costs goes to the decoder: each check above costs at most one more JSON coding of the line.

@testable import AccmonProtocol
import Glibc

/// Crashes the run: the input that got here is a finding.
private func violated(_ message: String) -> Never {
    // preconditionFailure drops its message in -O builds: say what broke first.
    fputs("ProtocolDecoderFuzzer: invariant violated: \(message)\n", stderr)
    preconditionFailure(message)
}

/// The codes `decodeClientMessage` may report.
private let decodingCodes: Set<ProtocolError.Code> = [
    .malformedJSON, .invalidMessage, .unknownType, .missingField, .invalidField,
]

/// One codec for every input: its JSON encoder and decoder are costly to make and hold no state between calls.
nonisolated(unsafe) private let codec = ProtocolCodec()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    checkFramingIsChunkIndependent(input)

    // The end of the input ends the last line.
    var framer = LineFramer()
    for item in framer.append(input + [0x0A]) {
        guard case .line(let line) = item else { continue }
        let decoded = codec.decodeClientMessage(line)
        checkOnePassReader(line, decoded: decoded)
        switch decoded {
        case .success(let message):
            checkRoundTrip(message, codec: codec, from: line)
        case .failure(let failure):
            checkFailure(failure, codec: codec, from: line)
        }
    }
    return 0
}

/// The one-pass reader either leaves the line to JSONDecoder or reads what JSONDecoder reads; and what it reads is
/// what `decodeClientMessage` returns.
private func checkOnePassReader(_ line: [UInt8], decoded: Result<ClientMessage, ClientDecodingFailure>) {
    let exact = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: line.count)
    defer { exact.deallocate() }
    _ = exact.initialize(from: line)
    guard let fast = RequestLineReader.message(UnsafeBufferPointer(exact)) else { return }
    guard case .success(let reference) = codec.decodeClientMessageWithJSONDecoder(line), reference == fast else {
        let reference = codec.decodeClientMessageWithJSONDecoder(line)
        violated("the one-pass reader reads \(fast), JSONDecoder \(reference): \(show(line))")
    }
    guard case .success(fast) = decoded else { violated("decodeClientMessage gave \(decoded), not \(fast)") }
}

private func checkRoundTrip(_ message: ClientMessage, codec: ProtocolCodec, from line: [UInt8]) {
    let encoded = codec.encode(message)
    guard encoded.last == 0x0A, !encoded.dropLast().contains(0x0A) else {
        violated("encoding is not one line: \(show(encoded)) from \(show(line))")
    }
    switch codec.decodeClientMessage(encoded.dropLast()) {
    case .success(let again):
        guard again == message else {
            violated("round trip changed \(message) into \(again); input \(show(line))")
        }
        guard codec.encode(again) == encoded else {
            violated("encoding is not stable for \(message): \(show(encoded))")
        }
    case .failure(let failure):
        violated("re-encoded \(message) as \(show(encoded)), which fails: \(failure.error); input \(show(line))")
    }
}

private func checkFailure(_ failure: ClientDecodingFailure, codec: ProtocolCodec, from line: [UInt8]) {
    guard decodingCodes.contains(failure.error.code) else {
        violated("unexpected code \(failure.error.code) for \(show(line))")
    }
    guard isContextObjectReason(failure.error.message) else {
        violated("message not 'context: object: reason': \(failure.error.message) for \(show(line))")
    }
    // The daemon sends the error back, written directly (ReplyLineWriter), as one line: the line JSONEncoder writes.
    let reply = ServerMessage.error(id: failure.id, failure.error)
    let encoded = codec.encode(reply)
    guard encoded.last == 0x0A, !encoded.dropLast().contains(0x0A) else {
        violated("error reply is not one line: \(show(encoded))")
    }
    // JSONEncoder costs twice the decoding of the line: it is asked only when a string needs escaping, the case that
    // takes more than copying bytes. Otherwise the line is the documented shape with the strings as they are.
    let expected = plainErrorReply(failure) ?? codec.encodeWithJSONEncoder(reply)
    guard encoded == expected else { violated("error reply \(show(encoded)) is not \(show(expected))") }
}

/// `{"code":…,"id":…,"message":…,"type":"error"}` and a newline, when its strings are printable ASCII without `"` or
/// `\`, which JSON writes as they are (and JSONEncoder too, slashes unescaped); `nil` otherwise.
private func plainErrorReply(_ failure: ClientDecodingFailure) -> [UInt8]? {
    func plain(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        let isPlain = bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        return isPlain ? [UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")] : nil
    }
    guard let code = plain(failure.error.code.rawValue), let message = plain(failure.error.message) else { return nil }
    var line = Array(#"{"code":"#.utf8) + code
    switch failure.id {
    case nil: break
    case .number(let number)?: line += Array(#","id":\#(number)"#.utf8)
    case .string(let text)?:
        guard let id = plain(text) else { return nil }
        line += Array(#","id":"#.utf8) + id
    }
    return line + Array(#","message":"#.utf8) + message + Array(#","type":"error"}"#.utf8) + [0x0A]
}

/// Whether `message` is `context: object: reason`, none of the three empty. Over its UTF-8 bytes: String's generic
/// `split(separator:)` on a substring cost more than decoding the line.
private func isContextObjectReason(_ message: String) -> Bool {
    var message = message
    return message.withUTF8 { bytes in
        var separators: [Int] = []
        var index = 0
        while separators.count < 2, index + 1 < bytes.count {
            if bytes[index] == UInt8(ascii: ":") && bytes[index + 1] == UInt8(ascii: " ") {
                separators.append(index)
                index += 2
            } else {
                index += 1
            }
        }
        guard separators.count == 2 else { return false }
        return separators[0] > 0 && separators[1] > separators[0] + 2 && separators[1] + 2 < bytes.count
    }
}

/// Frames the input whole and cut into chunks, with a small limit taken from the input, and compares both with
/// what the limit means line by line.
private func checkFramingIsChunkIndependent(_ input: [UInt8]) {
    guard let first = input.first else { return }
    let limit = 1 + Int(first % 64)
    var whole = LineFramer(limit: limit)
    let wholeItems = whole.append(input)

    var chunked = LineFramer(limit: limit)
    var chunkedItems: [LineFramer.Item] = []
    var start = 0
    var cut = 0
    while start < input.count {
        let length = 1 + Int(input[cut % input.count] % 17)
        cut += 1
        let end = min(input.count, start + length)
        chunkedItems += chunked.append(input[start..<end])
        start = end
    }
    guard chunkedItems == wholeItems, chunked.bufferedCount == whole.bufferedCount else {
        violated("framing depends on chunking (limit \(limit)) for \(show(input))")
    }

    let pieces = input.split(separator: 0x0A, omittingEmptySubsequences: false)
    var expected: [LineFramer.Item] = pieces.dropLast().map { $0.count > limit ? .overlong : .line(Array($0)) }
    if pieces.last!.count > limit { expected.append(.overlong) }
    guard wholeItems == expected else {
        violated("framing with limit \(limit) gave \(wholeItems.count) items, expected \(expected.count)")
    }
}

private func show(_ bytes: some Collection<UInt8>) -> String {
    let text = String(decoding: bytes.prefix(300), as: UTF8.self)
    return bytes.count > 300 ? "\(text)… (\(bytes.count) bytes)" : text
}
