import AccmonSys
import Glibc
import Testing

/// `FileDescriptor.peerHasClosed` on real socket pairs: accmond asks it of a restore id's holder when a `hello`
/// for that id comes in the turn the holder hangs up (docs/PROTOCOL.md §4), so a wrong answer refuses a client
/// its own session.
@Suite("A peer's hang-up seen before it is read")
struct PeerHasClosedTests {
    /// A connected stream pair: `ours` is accmond's end, `theirs` the client's.
    private struct Pair: ~Copyable {
        let ours: FileDescriptor
        let theirs: FileDescriptor

        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
            ours = FileDescriptor(rawValue: ends[0])
            theirs = FileDescriptor(rawValue: ends[1])
        }

        func send(_ text: String, from end: FileDescriptor) throws {
            try end.sendAll(Array(text.utf8))
        }

        deinit { ours.close() }
    }

    @Test func anOpenPeerHasNotClosed() throws {
        let pair = try Pair()
        defer { pair.theirs.close() }
        #expect(!pair.ours.peerHasClosed)
    }

    @Test func aPeerThatClosedHasClosed() throws {
        let pair = try Pair()
        pair.theirs.close()
        #expect(pair.ours.peerHasClosed)
    }

    /// A client that is killed while events it never read sat in its socket: the kernel records the hang-up as a
    /// reset (`ECONNRESET`), and it is a hang-up all the same.
    @Test func aPeerThatClosedWithOurLinesUnreadHasClosed() throws {
        let pair = try Pair()
        try pair.send(#"{"type":"connect"}"# + "\n", from: pair.ours)
        pair.theirs.close()
        #expect(pair.ours.peerHasClosed)
    }

    /// What the peer sent before it closed is still to be read and served: not yet a hang-up the caller may act on.
    @Test func aPeerThatClosedWithItsLinesStillUnreadHereHasNotClosedYet() throws {
        let pair = try Pair()
        try pair.send(#"{"type":"ack","id":3}"# + "\n", from: pair.theirs)
        pair.theirs.close()
        #expect(!pair.ours.peerHasClosed)
    }

    /// A half-close (the client stops writing and waits for its replies) is not a hang-up.
    @Test func aPeerThatOnlyStoppedWritingHasNotClosed() throws {
        let pair = try Pair()
        defer { pair.theirs.close() }
        try #require(shutdown(pair.theirs.rawValue, Int32(SHUT_WR)) == 0)
        #expect(!pair.ours.peerHasClosed)
    }

    /// A peer whose descriptor another process still holds (a child between fork and exec) hangs up by shutting
    /// the connection down; closing its own copy alone does not hang up.
    @Test func aPeerThatShutDownWhileACopyOfItsDescriptorLivesHasClosed() throws {
        let pair = try Pair()
        let copy = dup(pair.theirs.rawValue)
        try #require(copy >= 0)
        defer { Glibc.close(copy) }
        pair.theirs.close()
        #expect(!pair.ours.peerHasClosed, "the copy keeps the connection open")
        try #require(shutdown(copy, Int32(SHUT_RDWR)) == 0)
        #expect(pair.ours.peerHasClosed)
    }
}
