/// An error the daemon reports to a client: `{"type":"error","code":...,"message":...}`.
///
/// ``code`` is stable and meant for programs; ``message`` says, for people, what was wrong and where, as
/// `context: object: reason`.
public struct ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable error code. New codes may be added; clients treat unknown ones as generic failures.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
        public var description: String { rawValue }

        /// The line is not valid JSON (or not UTF-8).
        public static let malformedJSON = Code(rawValue: "malformed-json")
        /// The line is JSON but not a message object (not an object, or no string `type`).
        public static let invalidMessage = Code(rawValue: "invalid-message")
        /// The `type` is not one this protocol version knows.
        public static let unknownType = Code(rawValue: "unknown-type")
        /// A required field is missing.
        public static let missingField = Code(rawValue: "missing-field")
        /// A field has the wrong type or an invalid value.
        public static let invalidField = Code(rawValue: "invalid-field")
        /// The line is longer than ``WireFormat/maximumLineLength``; it was discarded up to the next newline.
        public static let lineTooLong = Code(rawValue: "line-too-long")
        /// No protocol version is shared by client and daemon.
        public static let unsupportedVersion = Code(rawValue: "unsupported-version")
        /// `hello` was sent twice on one connection.
        public static let alreadyGreeted = Code(rawValue: "already-greeted")
        /// `subscribe` on a connection that is already subscribed.
        public static let alreadySubscribed = Code(rawValue: "already-subscribed")
        /// `unsubscribe`, `suspend` or `resume` on a connection that is not subscribed.
        public static let notSubscribed = Code(rawValue: "not-subscribed")
        /// `hello` with a restore id that another live connection of the same user holds.
        public static let restoreIDInUse = Code(rawValue: "restore-id-in-use")
        /// The client's user may not do this: admin operations are for root and the manifest's admins.
        public static let permissionDenied = Code(rawValue: "permission-denied")
        /// `reload` found problems in the manifest; the previous one stays in force.
        public static let manifestInvalid = Code(rawValue: "manifest-invalid")
        /// `simulate` on a daemon not started with `--simulate`.
        public static let simulationDisabled = Code(rawValue: "simulation-disabled")
        /// A connection id that is not connected.
        public static let noSuchConnection = Code(rawValue: "no-such-connection")
        /// The connection is over one of the daemon's connection limits (in total, per user, or out of file
        /// descriptors): the daemon sends this error and closes the connection.
        public static let tooManyConnections = Code(rawValue: "too-many-connections")
        /// `claim` of what another claim holds, without `wait`: `holders` names them.
        public static let claimConflict = Code(rawValue: "claim-conflict")
        /// `claim` by filter, when fewer accessories than asked for match among those the client may claim.
        public static let noMatch = Code(rawValue: "no-match")
        /// `release` of a claim that does not exist or is not the client's, or `claim` with an unknown token.
        public static let noSuchClaim = Code(rawValue: "no-such-claim")
        /// A claim could not be enforced on the accessory's device nodes: it was not taken.
        public static let enforcementFailed = Code(rawValue: "enforcement-failed")
    }

    /// The stable code.
    public var code: Code
    /// What was wrong, for people.
    public var message: String
    /// For `claim-conflict`: the claims that hold what was asked for.
    public var holders: [ClaimSummary]?

    /// Creates an error.
    public init(_ code: Code, _ message: String, holders: [ClaimSummary]? = nil) {
        self.code = code
        self.message = message
        self.holders = holders
    }

    public var description: String { "\(code): \(message)" }
}
