@_exported public import AccmonProtocol

/// An error from the client library, with a message that says what to do about it.
public struct AccmonError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; stable, for programs.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Nothing listens on the socket: accmond is not running, or the path is wrong.
        public static let daemonUnavailable = Code(rawValue: "daemon-unavailable")
        /// The socket exists but this user may not connect to it.
        public static let permissionDenied = Code(rawValue: "permission-denied")
        /// The daemon refused a request; ``AccmonError/protocolError`` says why.
        public static let requestFailed = Code(rawValue: "request-failed")
        /// The daemon announced it is stopping.
        public static let daemonStopped = Code(rawValue: "daemon-stopped")
        /// The connection ended unexpectedly, or was closed by ``AccmonConnection/close()``.
        public static let connectionClosed = Code(rawValue: "connection-closed")
        /// The daemon sent something this library does not understand.
        public static let invalidResponse = Code(rawValue: "invalid-response")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened and, when the cause is known, what to do.
    public var message: String
    /// The daemon's error, for ``Code/requestFailed``.
    public var protocolError: ProtocolError?
    /// For a claim that waited in line when its connection ended (accmond restarted): the token that takes its place
    /// up again on a new connection, `claim(.resume(token:), wait: true)`, as a holder takes up its claim. accmond
    /// keeps the place for its reclaim window (30 s by default).
    public var claimToken: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, protocolError: ProtocolError? = nil, claimToken: String? = nil) {
        self.code = code
        self.message = message
        self.protocolError = protocolError
        self.claimToken = claimToken
    }

    public var description: String { message }
}
