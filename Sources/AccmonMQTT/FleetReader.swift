import AccmonSys

/// What a fleet watcher is told.
public enum FleetUpdate: Sendable {
    /// The whole state, read at start.
    case state(FleetState)
    /// Changes since the last update (after a reconnection: the difference from what was shown).
    case changes([FleetChange])
    /// The connection to the broker was lost or came back (for standard error).
    case connection(String)
    /// Something of the fleet could not be read whole (for standard error): which host, and what to do.
    case warning(String)
}

/// What a fleet read reads, and how much the broker delivers at once.
public struct FleetReadOptions: Sendable, Hashable {
    /// The hosts to read.
    public var selection: FleetSelection
    /// The messages the broker queues for one client beyond what the connection holds (mosquitto's
    /// `max_queued_messages`, 1000 by default): the reader's windows stay under it.
    public var brokerQueue: Int

    /// mosquitto's default `max_queued_messages`.
    public static let defaultBrokerQueue = 1000
    /// The smallest queue the reader works with.
    public static let minimumBrokerQueue = 16

    /// The census's window in seconds (docs/MQTT.md §5): bridges spread their answers over it and the read waits it,
    /// then until the answers stop; `nil`: sized for the hosts the retained store gave, in rounds while more answer
    /// than a window carries (``CensusWindow``); 0: no census.
    public var censusWindow: Double?

    public init(
        selection: FleetSelection = .all, brokerQueue: Int = defaultBrokerQueue, censusWindow: Double? = nil
    ) {
        self.selection = selection
        self.brokerQueue = max(brokerQueue, Self.minimumBrokerQueue)
        self.censusWindow = censusWindow.map { max(0, $0) }
    }
}

/// A fleet's state as read, with what could not be read whole.
public struct FleetReadResult: Sendable {
    public var state: FleetState
    /// One line per problem (`context: object: reason`), for standard error.
    public var warnings: [String]
    /// Whether every selected host was read whole (false: some host, or some of its accessories, may be missing).
    public var complete: Bool
}

/// Reads a fleet's retained state from the broker for `accmon list --broker` and `accmon watch --broker`, on a thread
/// of its own (the loop blocks in `poll`).
///
/// MQTT has no end-of-retained marker: the reader publishes a token to its own topic, `<prefix>/$readers/<client id>`,
/// and takes what arrives before the token comes back as the retained state. mosquitto drops a client's messages
/// beyond its queue limit (`max_queued_messages`), so the reader reads in windows the broker can deliver whole: first
/// every status (or, for one named host, just that host), then the hosts in windows of whole hosts sized by the counts
/// their statuses carry (docs/MQTT.md §5). A window that received fewer packets than the broker queues, and whose
/// first end marker came back, cannot have lost a message; in any other window a host whose topics match its count
/// is whole, and the others are read again. When the statuses themselves are more than one read delivers, the hosts
/// are listed from the host index (``HostIndex``) in windows of buckets.
public enum FleetReader {
    /// The fleet's state now.
    ///
    /// - Parameter eachHost: Given each host as soon as it is read whole, on a thread of the reader's, while the rest
    ///   is read; given a host again at the end when a later message changed it: what it was given last for a host
    ///   is the host in the result. For a command that makes its output meanwhile.
    /// - Throws: ``MQTTError`` when the broker cannot be reached, refuses the credentials or the reads, or does not
    ///   echo the end marker.
    public static func state(
        settings: BrokerSettings, topics: FleetTopics, options: FleetReadOptions = FleetReadOptions(),
        eachHost: (@Sendable (FleetHost) -> Void)? = nil
    ) async throws(MQTTError) -> FleetReadResult {
        let result = await onThread {
            FleetSession(settings: settings, topics: topics, options: options, follows: false, eachHost: eachHost)
                .readOnce()
        }
        return try result.get()
    }

    /// ``state(settings:topics:options:)`` on the calling thread, which it blocks until the read is done: for a
    /// command whose work is synchronous.
    public static func stateNow(
        settings: BrokerSettings, topics: FleetTopics, options: FleetReadOptions = FleetReadOptions()
    ) throws(MQTTError) -> FleetReadResult {
        try FleetSession(settings: settings, topics: topics, options: options, follows: false).readOnce().get()
    }

    /// Hands `update` the state, then every change, until the process ends; reconnects by itself after the first
    /// read.
    ///
    /// - Throws: ``MQTTError`` when the first read fails; never returns otherwise.
    public static func watch(
        settings: BrokerSettings, topics: FleetTopics, options: FleetReadOptions = FleetReadOptions(),
        update: @escaping @Sendable (FleetUpdate) -> Void
    ) async throws(MQTTError) {
        let failure: MQTTError = await onThread {
            FleetSession(settings: settings, topics: topics, options: options, follows: true).follow(update)
        }
        throw failure
    }

    private static func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            do {
                try startThread(name: "accmon-fleet") { continuation.resume(returning: body()) }
            } catch {
                // Only when the process is out of threads.
                preconditionFailure("accmon: cannot start a thread: \(error)")
            }
        }
    }
}
