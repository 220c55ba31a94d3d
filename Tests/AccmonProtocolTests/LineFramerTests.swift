import AccmonProtocol
import AccmonTestSupport
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
private func line(_ text: String) -> LineFramer.Item { .line(bytes(text)) }

/// Feeds the chunks in order and collects every item.
private func frame(_ chunks: [[UInt8]], limit: Int) -> [LineFramer.Item] {
    var framer = LineFramer(limit: limit)
    return chunks.flatMap { framer.append($0) }
}

@Test func yieldsNothingUntilTheNewlineArrives() {
    var framer = LineFramer()
    #expect(framer.append(bytes("{\"type\":")).isEmpty)
    #expect(framer.bufferedCount == 8)
    #expect(framer.append(bytes("\"status\"}")).isEmpty)
    #expect(framer.append(bytes("\n")) == [line("{\"type\":\"status\"}")])
    #expect(framer.bufferedCount == 0)
}

/// A reader that queues its lines gives its queue: what waits there stays first, the new lines follow in order.
@Test func linesAppendedToAQueueFollowWhatWaitsThere() {
    var framer = LineFramer(limit: 10)
    var queue = [line("waiting")]
    framer.append(bytes("a\nbb\nccc"), to: &queue)
    #expect(queue == [line("waiting"), line("a"), line("bb")])
    framer.append(bytes("\nthis one is too long\nd\n"), to: &queue)
    #expect(queue == [line("waiting"), line("a"), line("bb"), line("ccc"), .overlong, line("d")])
}

@Test func lineSplitAtEveryPossibleBoundaryComesOutWhole() {
    let stream = bytes("{\"type\":\"hello\",\"versions\":[1]}\n{\"type\":\"status\"}\n")
    let expected = [line("{\"type\":\"hello\",\"versions\":[1]}"), line("{\"type\":\"status\"}")]
    for split in 0...stream.count {
        #expect(frame([Array(stream[..<split]), Array(stream[split...])], limit: 100) == expected, "split at \(split)")
    }
    #expect(frame(stream.map { [$0] }, limit: 100) == expected, "one byte at a time")
}

@Test func yieldsEveryLineOfAChunkInOrderIncludingEmptyOnes() {
    var framer = LineFramer()
    #expect(framer.append(bytes("a\nbb\n\nccc\ndd")) == [line("a"), line("bb"), line(""), line("ccc")])
    #expect(framer.bufferedCount == 2)
    #expect(framer.append(bytes("d\n\n")) == [line("ddd"), line("")])
}

@Test func keepsCarriageReturnsAndOtherBytesAsTheyAre() {
    var framer = LineFramer()
    #expect(framer.append([0x00, 0xFF, 0x0D, 0x0A]) == [.line([0x00, 0xFF, 0x0D])])
}

@Test func acceptsALineOfExactlyTheLimit() {
    #expect(frame([bytes("12345678\n")], limit: 8) == [line("12345678")])
    #expect(frame([bytes("1234"), bytes("5678"), bytes("\n")], limit: 8) == [line("12345678")])
    #expect(frame([bytes("12345678"), bytes("\nok\n")], limit: 8) == [line("12345678"), line("ok")])
}

@Test func defaultLimitIsTheProtocolMaximum() {
    let atLimit = [UInt8](repeating: 0x61, count: WireFormat.maximumLineLength)
    #expect(frame([atLimit + [0x0A]], limit: WireFormat.maximumLineLength) == [.line(atLimit)])
    var framer = LineFramer()
    #expect(framer.append(atLimit + [0x0A]) == [.line(atLimit)])
    #expect(framer.append(atLimit + [0x61, 0x0A]) == [.overlong])
}

@Test func overlongLineInOneChunkIsReportedOnceAndTheNextLineSurvives() {
    #expect(frame([bytes("123456789\nok\n")], limit: 8) == [.overlong, line("ok")])
    #expect(frame([bytes("a\n123456789\nb\n")], limit: 8) == [line("a"), .overlong, line("b")])
}

@Test func overlongLineSpanningChunksIsReportedOnceAndResynchronisesAtALaterNewline() {
    var framer = LineFramer(limit: 8)
    #expect(framer.append(bytes("12345")) == [])
    #expect(framer.append(bytes("6789")) == [.overlong])
    #expect(framer.bufferedCount == 0)
    #expect(framer.append(bytes("more junk")) == [])
    #expect(framer.append(bytes("and more")) == [])
    #expect(framer.bufferedCount == 0)
    #expect(framer.append(bytes("tail\nok")) == [])
    #expect(framer.append(bytes("\n")) == [line("ok")])
}

@Test func overlongLineWhoseNewlineOpensTheNextChunkResynchronises() {
    var framer = LineFramer(limit: 8)
    #expect(framer.append(bytes("123456789")) == [.overlong])
    #expect(framer.append(bytes("\nok\n")) == [line("ok")])
}

@Test func consecutiveOverlongLinesAreEachReported() {
    #expect(frame([bytes("123456789\n987654321\nok\n")], limit: 8) == [.overlong, .overlong, line("ok")])
    #expect(frame([bytes("123456789"), bytes("\n987654321"), bytes("\n")], limit: 8) == [.overlong, .overlong])
}

/// Up to 11 lines of random letters, each up to twice `limit` long, then an unfinished tail of up to 3 bytes.
private func randomStream(limit: Int, using random: inout SplitMix64) -> [UInt8] {
    var stream: [UInt8] = []
    for _ in 0..<random.next(below: 12) {
        stream += (0..<random.next(below: UInt64(limit * 2))).map { _ in UInt8(0x61 + random.next(below: 26)) }
        stream.append(0x0A)
    }
    return stream + [UInt8](repeating: 0x79, count: Int(random.next(below: 4)))
}

@Test func chunkingNeverChangesTheItems() {
    var random = SplitMix64(seed: 0xF4A3_E1)
    for round in 0..<300 {
        let limit = 1 + Int(random.next(below: 12))
        let stream = randomStream(limit: limit, using: &random)
        let whole = frame([stream], limit: limit)
        var chunks: [[UInt8]] = []
        var start = 0
        while start < stream.count {
            let end = min(stream.count, start + 1 + Int(random.next(below: 7)))
            chunks.append(Array(stream[start..<end]))
            start = end
        }
        #expect(frame(chunks, limit: limit) == whole, "round \(round)")
        // Each complete line, and an unfinished tail as soon as it is over the limit.
        let pieces = stream.split(separator: 0x0A, omittingEmptySubsequences: false)
        var expected: [LineFramer.Item] = pieces.dropLast().map { $0.count > limit ? .overlong : .line(Array($0)) }
        if pieces.last!.count > limit { expected.append(.overlong) }
        #expect(whole == expected, "round \(round)")
    }
}

/// The daemon's queue of unhandled lines holds what the array would, in order, taken a few at a time.
@Test func aLineQueueYieldsWhatAnArrayOfItemsWould() {
    var generator = SplitMix64(seed: 21)
    for _ in 0..<200 {
        var framer = LineFramer(limit: 12)
        var twin = LineFramer(limit: 12)
        var queue = LineQueue()
        var items: [LineFramer.Item] = []
        for _ in 0..<Int.random(in: 1...8, using: &generator) {
            let chunk = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                UInt8.random(in: 0...3, using: &generator) == 0 ? 0x0A : UInt8(ascii: "a")
            }
            framer.append(chunk, to: &queue)
            twin.append(chunk, to: &items)
            #expect(Array(queue) == items)
            let taken = Int.random(in: 0...items.count, using: &generator)
            queue.removeFirst(taken)
            items.removeFirst(taken)
            #expect(Array(queue) == items && queue.count == items.count && queue.isEmpty == items.isEmpty)
        }
        queue.removeFirst(queue.count)
        #expect(queue.isEmpty && queue.byteCount == 0)
    }
}

/// 3,000 pipelined `status` lines of 18 bytes are held in one buffer of their bytes.
@Test func aLineQueueHoldsPipelinedLinesInTheirBytes() {
    var framer = LineFramer()
    var queue = LineQueue()
    framer.append(Array(repeating: Array(#"{"type":"status"}"#.utf8) + [0x0A], count: 3000).joined(), to: &queue)
    #expect(queue.count == 3000)
    #expect(queue.byteCount == 3000 * 17)
    #expect(queue.first { _ in true } == line(#"{"type":"status"}"#))
}
