import FoundationEssentials

/// The census (docs/MQTT.md §5): a live request every online bridge answers, so that a reader finds the hosts whose
/// bridge is online even where the broker's retained store does not give it their status (a cluster node that keeps
/// its own index of retained topics, docs/MQTT.md §11).
///
/// A reader publishes the request, not retained, with an MQTT 5 message expiry and the response topic
/// `<prefix>/$readers/<its client id>/census`, on `<prefix>/$census/<its client id>`; each bridge subscribes to
/// `<prefix>/$census/+` and answers on the response topic (only one of that form) with the request's correlation
/// data: its host, the number of its retained accessory topics, a digest of them, and its status.
public enum Census {
    /// The request's message expiry: a bridge that gets it later does not answer.
    public static let requestExpirySeconds: UInt32 = 5

    /// The longest window a bridge spreads its answer over, whatever a request asks.
    public static let longestWindow = 10.0

    /// A reader's request. Like SSDP's `MX`, its window asks each bridge to answer at a moment taken at random within
    /// it, so that a fleet's answers come spread at a rate the reader takes and the broker's queue for it holds, not
    /// all at once; the reader waits the window. A request naming a host is answered by that host's bridge alone.
    /// `{}` (a reader older than the window) is answered at once by every bridge.
    public struct Request: Codable, Sendable, Hashable {
        /// Seconds over which to spread the answers; 0 or absent: at once.
        public var window: Double?
        /// The one host to answer, if any.
        public var host: String?

        public init(window: Double? = nil, host: String? = nil) {
            self.window = window
            self.host = host
        }

        public var payload: [UInt8] {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return Array((try? encoder.encode(self)) ?? Data())  // try?: a string and a number encode
        }

        /// The request in `payload`; what is not one (a malformed payload) is answered as `{}` is.
        public static func decode(_ payload: [UInt8]) -> Request {
            (try? JSONDecoder().decode(Request.self, from: Data(payload))) ?? Request()  // try?: see above
        }

        /// Whether the bridge of `host` answers it.
        public func isAnswered(by host: String) -> Bool { self.host == nil || self.host == host }

        /// How long the bridge waits before answering: a moment at random within the window (at most
        /// ``Census/longestWindow``), in nanoseconds.
        public func answerDelay<Random: RandomNumberGenerator>(using random: inout Random) -> UInt64 {
            guard let window, window.isFinite, window > 0 else { return 0 }
            let span = UInt64(min(window, Census.longestWindow) * 1e9)
            return span == 0 ? 0 : UInt64.random(in: 0..<span, using: &random)
        }
    }

    /// One bridge's answer.
    public struct Answer: Codable, Sendable, Hashable {
        /// The host name the bridge publishes under.
        public var host: String
        /// The host's retained accessory topics, as its status counts them.
        public var accessories: Int
        /// The digest of those topics and their payloads (``Digest``).
        public var digest: String
        /// The bridge's online status, with its count.
        public var status: HostStatus

        public init(host: String, accessories: Int, digest: String, status: HostStatus) {
            self.host = host
            self.accessories = accessories
            self.digest = digest
            self.status = status
        }

        public var payload: [UInt8] {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return Array((try? encoder.encode(self)) ?? Data())  // try?: a struct of strings and numbers encodes
        }

        public static func decode(_ payload: [UInt8]) -> Answer? {
            try? JSONDecoder().decode(Answer.self, from: Data(payload))  // try?: not an answer is nil
        }
    }

    /// A digest of a host's retained accessory topics that follows each publication: the XOR, over the topics held,
    /// of FNV-1a 64 over the topic, a zero byte and the payload; as 16 hex digits. Order-free, so the bridge keeps it
    /// up to date at the cost of one hash per publication.
    public struct Digest: Sendable, Hashable {
        private var hashes: [String: UInt64] = [:]
        private var value: UInt64 = 0

        public init() {}

        /// Sets what `topic` holds; an empty payload: nothing.
        public mutating func set(_ topic: String, _ payload: [UInt8]) {
            if let old = hashes.removeValue(forKey: topic) { value ^= old }
            guard !payload.isEmpty else { return }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in topic.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            hash = (hash ^ 0) &* 0x0000_0100_0000_01b3
            for byte in payload { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            hashes[topic] = hash
            value ^= hash
        }

        public var text: String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
    }
}

extension FleetTopics {
    /// Where a reader publishes its census request: `<prefix>/$census/<client id>`.
    public func censusRequest(clientID: String) -> String { "\(prefix)/$census/\(Self.encodeLevel(clientID))" }

    /// What bridges subscribe to for census requests: `<prefix>/$census/+`.
    public var censusRequests: String { "\(prefix)/$census/+" }

    /// Where a reader takes its census answers: `<prefix>/$readers/<client id>/census`.
    public func censusAnswers(clientID: String) -> String { "\(readerSync(clientID: clientID))/census" }

    /// Whether `topic` is a census request (`<prefix>/$census/<one level>`).
    public func isCensusRequest(_ topic: String) -> Bool {
        let head = "\(prefix)/$census/"
        return topic.hasPrefix(head) && !topic.dropFirst(head.count).contains("/")
    }

    /// Whether `topic` may take a census answer: a response topic of the form `<prefix>/$readers/<one level>/census`;
    /// a bridge answers nowhere else.
    public func isCensusAnswerTopic(_ topic: String) -> Bool {
        let head = "\(prefix)/$readers/"
        guard topic.hasPrefix(head), topic.hasSuffix("/census") else { return false }
        let middle = topic.dropFirst(head.count).dropLast("/census".count)
        return !middle.isEmpty && !middle.contains("/") && !middle.contains("+") && !middle.contains("#")
    }
}
