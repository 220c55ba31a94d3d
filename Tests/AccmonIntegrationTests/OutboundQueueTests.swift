import AccmonSys
import AccmonTestSupport
import Glibc
import Testing

@testable import AccmondKit

/// A client's outbound queue over a real socket whose buffers are small: the kernel takes part of a line, then none,
/// and the queue must go on from the exact byte where it stopped, sixty-four lines or fewer per `sendmsg`.
@Suite("The outbound queue on a real socket")
struct OutboundQueueTests {
    @Test func partialWritesResumeWhereTheSocketStopped() throws {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        let writer = FileDescriptor(rawValue: ends[0])
        let reader = FileDescriptor(rawValue: ends[1])
        defer {
            writer.close()
            reader.close()
        }
        UnixSocket.setSendBufferSize(writer, 4096)

        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        // Lines of 1 to 3,000 bytes whose bytes change from one position to the next and from one line to the next, so
        // that a stretch repeated, skipped or taken from the wrong place shows.
        var queue = OutboundQueue(limit: 1 << 30)
        var expected: [UInt8] = []
        for index in 0..<500 {
            let line = (0...Int(random.next(below: 3_000))).map { UInt8(truncatingIfNeeded: index &* 7 &+ $0) }
            queue.append(line)
            expected += line
        }
        #expect(queue.byteCount == expected.count)

        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8_192)
        var shortFlushes = 0
        while true {
            let done = try queue.flush(to: writer)
            if done { break }
            shortFlushes += 1
            // Read a little of what is waiting: the next flush then finds room for part of a line.
            let wanted = 1 + Int(random.next(below: 5_000))
            let count = try buffer.withUnsafeMutableBytes { raw in
                try reader.receive(into: UnsafeMutableRawBufferPointer(rebasing: raw[..<wanted]))
            }
            received += buffer[..<count]
        }
        #expect(queue.isEmpty)
        #expect(shortFlushes > 10, "seed \(seed): the socket never filled, so no write was partial")
        while received.count < expected.count {
            let count = try buffer.withUnsafeMutableBytes { raw in try reader.receive(into: raw) }
            try #require(count > 0, "seed \(seed): the socket closed early")
            received += buffer[..<count]
        }
        #expect(received.count == expected.count, "seed \(seed) (ACCMON_TEST_SEED)")
        let firstDifference = zip(received, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(
            firstDifference == nil,
            "seed \(seed) (ACCMON_TEST_SEED): the bytes differ from byte \(firstDifference ?? 0)")
    }
}
