/// How a one-time read (`accmon list --broker`) decodes: the reader's thread keeps each host's accessory payloads as
/// they arrive, counted, and hands the host to an ``AccessoryDecoder`` once its window is done, so that the socket is
/// read while the hosts before are decoded (and, with ``FleetSession/eachHost``, made into output).
///
/// A payload that is not an accessory object is counted as read (the broker did not drop it), said in a warning, and
/// not shown.
///
/// A message that changes a host after it was handed over (a change published meanwhile, its claims read again) is
/// applied once the decoder is done, and the host is handed over again: what `eachHost` was given last for a host is
/// the host in the result.
extension FleetSession {
    struct Decoding {
        /// What a window reserves per accessory payload it expects (the bridge's objects are about 480 bytes).
        static let bytesPerPayload = 512

        let decoder: AccessoryDecoder
        /// The hosts handed to the decoder.
        var handedOver: Set<String> = []
        /// The hosts changed after they were handed over, to hand over again at the end.
        var changed: Set<String> = []
        /// Accessory messages on hosts handed over, applied once their accessories are decoded.
        var later: [(topic: FleetTopics.Topic, payload: [UInt8])] = []

        /// The host level of the last accessory message taken: the broker delivers a host's topics one after the
        /// other.
        var lastHost = LastHost()

        mutating func changedAfterHandOver(_ level: String) {
            if handedOver.contains(level) { changed.insert(level) }
        }
    }

    /// An accessory message of a window that holds payloads, taken straight from libmosquitto's buffer
    /// (``MQTTClient/takeMessage``): counted, and its payload kept. Anything else comes the usual way, as an event.
    func take(topic: UnsafeBufferPointer<UInt8>, payload: UnsafeRawBufferPointer) -> Bool {
        guard let (hostRange, connection) = topics.accessoryTopic(topic), decoding != nil else { return false }
        let level = decoding!.lastHost.level(UnsafeBufferPointer(rebasing: topic[hostRange]))
        if ahead?.holdsPayloads == true, ahead!.levels.contains(level) {
            ahead!.hold(level: level, connection: connection, payload: payload)
        } else if window?.holdsPayloads == true, window!.levels.contains(level) {
            window!.hold(level: level, connection: connection, payload: payload)
        } else {
            return false
        }
        countPacket()
        return true
    }

    /// Hands the host at `level`, as `window` read it, to the decoder.
    func handOver(_ level: String, of window: FleetWindow) {
        guard decoding != nil else { return }
        decoding!.handedOver.insert(level)
        decoding!.decoder.decode(
            level: level, host: window.fresh.hosts[level], payloads: window.payloads[level] ?? [:],
            in: window.payloadBytes)
    }

    /// Keeps an accessory message on a host handed over for the end; notes any other message on such a host as a
    /// change. Returns whether it kept the message.
    func laterMessage(_ topic: FleetTopics.Topic, payload: [UInt8]) -> Bool {
        guard decoding != nil, decoding!.handedOver.contains(topic.hostLevel) else { return false }
        guard case .accessory = topic else {
            decoding!.changed.insert(topic.hostLevel)
            return false
        }
        decoding!.later.append((topic, payload))
        return true
    }

    /// Waits for the decoder; sets the hosts' accessories, applies the messages kept, and hands over again the
    /// hosts changed meanwhile.
    func finishDecoding() {
        guard let decoding else { return }
        self.decoding = nil
        for (level, host) in decoding.decoder.finish().sorted(by: { $0.key < $1.key }) {
            state.setAccessories(level: level, to: host.accessories, unreadable: host.unreadable.count)
            guard !host.unreadable.isEmpty else { continue }
            incomplete = true
            let connections = host.unreadable.sorted().map(String.init).joined(separator: ", ")
            warnings.append(
                "accmon: host '\(FleetTopics.decodeLevel(level))': the accessory topics of connections \(connections) "
                    + "hold no accessory object: not shown")
        }
        var changed = decoding.changed
        for (topic, payload) in decoding.later {
            _ = state.apply(topic, payload: payload, reporting: false)
            changed.insert(topic.hostLevel)
        }
        guard let eachHost else { return }
        for level in changed.sorted() {
            if let host = state.hosts[level] { eachHost(host) }
        }
    }
}

/// The last host level made from a topic's bytes, made again only when the bytes differ.
struct LastHost {
    private var bytes: [UInt8] = []
    private var text = ""

    mutating func level(_ level: UnsafeBufferPointer<UInt8>) -> String {
        if !level.elementsEqual(bytes) {
            bytes = Array(level)
            text = String(decoding: level, as: UTF8.self)
        }
        return text
    }
}

extension FleetWindow {
    /// Applies a message of one of its hosts: an accessory's payload kept as it is when the window holds payloads,
    /// anything else folded into ``fresh`` (a status with its lease: `expiry` left of it, arrived `now`).
    mutating func apply(_ topic: FleetTopics.Topic, payload: [UInt8], expiry: UInt32?, at now: UInt64) {
        guard holdsPayloads, case .accessory(let level, _, let connection) = topic else {
            _ = fresh.apply(topic, payload: payload, reporting: false, expiry: expiry, at: now)
            return
        }
        payload.withUnsafeBytes { hold(level: level, connection: connection, payload: $0) }
    }

    /// Keeps the payload of an accessory topic (an empty one deletes it).
    mutating func hold(level: String, connection: UInt64, payload: UnsafeRawBufferPointer) {
        guard !payload.isEmpty else {
            payloads[level]?[connection] = nil
            return
        }
        let start = payloadBytes.count
        payloadBytes.append(contentsOf: payload)
        payloads[level, default: [:]][connection] = start..<payloadBytes.count
    }

    /// How many accessory topics of the host at `level` were read.
    func accessoriesRead(level: String) -> Int {
        holdsPayloads ? payloads[level]?.count ?? 0 : fresh.hosts[level]?.accessories.count ?? 0
    }
}
