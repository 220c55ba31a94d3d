import AccmonSys
import Glibc
import Testing

/// `Datagram.receive`, which accmond's udev monitor reads with: the sender's credentials as the kernel attaches them,
/// nothing pending, and a datagram too long for the buffer. On a Unix datagram socket pair, where the kernel puts real
/// `SCM_CREDENTIALS` on every datagram once the receiver asks (`SO_PASSCRED`), as it does on udev's netlink socket.
@Suite("receiving datagrams with their sender's credentials")
struct DatagramReceiveTests {
    /// A connected pair of Unix datagram sockets, the receiver non-blocking.
    static func pair(passCredentials: Bool) throws -> (sender: FileDescriptor, receiver: FileDescriptor) {
        var descriptors: [Int32] = [-1, -1]
        try #require(
            socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &descriptors) == 0)
        if passCredentials {
            var on: Int32 = 1
            try #require(
                setsockopt(descriptors[1], SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size)) == 0)
        }
        return (FileDescriptor(rawValue: descriptors[0]), FileDescriptor(rawValue: descriptors[1]))
    }

    @Test func theSendersUIDComesWithEachDatagram() throws {
        let (sender, receiver) = try Self.pair(passCredentials: true)
        defer { sender.close(); receiver.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        #expect(try Datagram.receive(from: receiver, into: buffer) == nil, "nothing pending")
        let message = Array("libudev".utf8)
        #expect(send(sender.rawValue, message, message.count, 0) == message.count)
        let received = try #require(try Datagram.receive(from: receiver, into: buffer))
        #expect(received.length == message.count)
        #expect(Array(buffer[..<received.length]) == message)
        #expect(received.sender == DatagramSender(netlinkGroups: 0, netlinkPortID: 0, uid: geteuid()))
    }

    @Test func withoutPassCredentialsNoUIDComes() throws {
        let (sender, receiver) = try Self.pair(passCredentials: false)
        defer { sender.close(); receiver.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        #expect(send(sender.rawValue, "x", 1, 0) == 1)
        #expect(try Datagram.receive(from: receiver, into: buffer)?.sender.uid == nil)
    }

    @Test func aDatagramLongerThanTheBufferIsAnError() throws {
        let (sender, receiver) = try Self.pair(passCredentials: true)
        defer { sender.close(); receiver.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 8)
        defer { buffer.deallocate() }
        let message = [UInt8](repeating: 0x41, count: 9)
        #expect(send(sender.rawValue, message, message.count, 0) == message.count)
        #expect(throws: Errno(rawValue: EMSGSIZE)) { try Datagram.receive(from: receiver, into: buffer) }
        #expect(try Datagram.receive(from: receiver, into: buffer) == nil, "the datagram is consumed")
    }
}
