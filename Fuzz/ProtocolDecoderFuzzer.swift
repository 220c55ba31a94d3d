// libFuzzer target for the client side of the protocol: bytes → LineFramer → ProtocolCodec.decodeClientMessage.
//
// Built by scripts/fuzz.sh together with the AccmonCore sources (one module, so no package build is needed):
//   swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name FuzzProtocol \
//       Sources/AccmonCore/*.swift Fuzz/ProtocolDecoderFuzzer.swift -o Fuzz/bin/protocol-decoder-fuzzer
//
// Besides "does not crash", it checks, and traps (preconditionFailure) on a violation:
// - every decoded message re-encodes to one line that decodes to the same message, and encodes the same again;
// - every refusal has a known code and a message of the form `context: object: reason`, and the error reply
//   carrying it round-trips as a server message;
// - framing does not depend on how the stream is cut into chunks, and reports a too-long line once.

#if canImport(Glibc)
import Glibc
#endif

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
        switch codec.decodeClientMessage(line) {
        case .success(let message):
            checkRoundTrip(message, codec: codec, from: line)
        case .failure(let failure):
            checkFailure(failure, codec: codec, from: line)
        }
    }
    return 0
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
    let parts = failure.error.message.split(separator: ": ", maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
        violated("message not 'context: object: reason': \(failure.error.message) for \(show(line))")
    }
    // The daemon sends the error back: that line must itself be one line that decodes to the same reply.
    let reply = ServerMessage.error(id: failure.id, failure.error)
    let encoded = codec.encode(reply)
    guard encoded.last == 0x0A, !encoded.dropLast().contains(0x0A),
        (try? codec.decodeServerMessage(encoded.dropLast())) == reply
    else {
        violated("error reply does not round-trip: \(show(encoded))")
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
