import AccmonSys

/// A read's census (docs/MQTT.md §5): the request sent once connected, the answers collected during the read.
struct CensusRead {
    /// Where this reader takes its answers.
    let answerTopic: String
    let correlation: [UInt8]
    /// When the request went out, and when the last answer came.
    var sentAt: UInt64 = 0
    var lastAnswer: UInt64 = 0
    /// The round trip of the census's SUBSCRIBE to its SUBACK: how long an answer may take to come, at least.
    var roundTrip: UInt64 = 0
    /// The answers by host level.
    var answers: [String: Census.Answer] = [:]
    /// Whether the answers were taken into the read (hosts added to it).
    var taken = false

    /// After an answer, the census settles once no other came for this long (or four round trips, when longer).
    static let quiet: UInt64 = 50_000_000

    /// How long without an answer settles the census: ``quiet``, or four round trips to the broker when longer.
    var quietTime: UInt64 { max(Self.quiet, 4 * roundTrip) }
}

extension FleetSession {
    /// Subscribes to this reader's census answers and publishes the request (not retained, with a message expiry).
    func sendCensus() throws(MQTTError) {
        guard options.censusWait > 0, let client else { return }
        let answerTopic = topics.censusAnswers(clientID: clientID)
        var census = CensusRead(answerTopic: answerTopic, correlation: Array(nonce.utf8))
        let subscribed = monotonicNanoseconds()
        censusSubscription = try client.subscribe([answerTopic], options: [.noRetained])
        awaitedSubscription = censusSubscription
        stepDeadline = monotonicNanoseconds() + Self.answerTimeout
        defer { stepDeadline = nil }
        try run { awaitedSubscription == nil }
        if censusSubscription == nil {
            // Refused by the broker's ACL: the read goes on from the retained store alone.
            warnings.append(
                "accmon: mqtt: \(settings.address): the broker refused this reader's census topic '\(answerTopic)': "
                    + "hosts it does not give from its retained store are not found; let readers read "
                    + "'\(topics.prefix)/$readers/%c/#' and write '\(topics.prefix)/$census/%c' (docs/MQTT.md §6)")
            return
        }
        _ = try client.publish(
            topic: topics.censusRequest(clientID: clientID), payload: Array("{}".utf8), retained: false, qos: 0,
            properties: MQTTMessageProperties(
                responseTopic: answerTopic, correlationData: census.correlation,
                expirySeconds: Census.requestExpirySeconds))
        census.sentAt = monotonicNanoseconds()
        census.roundTrip = census.sentAt - subscribed
        self.census = census
    }

    /// Takes an answer on this reader's census topic; returns whether `topic` was that topic.
    func censusMessage(topic: String, payload: [UInt8], properties: MQTTMessageProperties) -> Bool {
        guard let census, topic == census.answerTopic else { return false }
        guard properties.correlationData == census.correlation, let answer = Census.Answer.decode(payload) else {
            return true
        }
        self.census!.answers[FleetTopics.encodeLevel(answer.host)] = answer
        self.census!.lastAnswer = packetTime
        return true
    }

    /// Whether the census is over: every host known online with a lease (a bridge that speaks for itself) answered and
    /// none came for ``CensusRead/quiet``, or ``FleetReadOptions/censusWait`` passed since the request.
    func censusSettled(now: UInt64) -> Bool {
        guard let census else { return true }
        if now >= census.sentAt + UInt64(options.censusWait * 1e9) { return true }
        if options.censusWaitsWhole { return false }
        if case .named(let name) = options.selection {
            // One host: its answer, or none within the quiet time (no bridge of it is online here).
            return census.answers[FleetTopics.encodeLevel(name)] != nil || now >= census.sentAt + census.quietTime
        }
        let expected = state.hosts.values.filter { !$0.stale && $0.status?.leaseSeconds != nil }.map(\.level)
        guard expected.allSatisfy({ census.answers[$0] != nil }) else { return false }
        return now >= max(census.sentAt, census.lastAnswer) + census.quietTime
    }

    /// When the census settles at the latest, for the loop's wake-up.
    var censusDeadline: UInt64? {
        guard let census, !census.taken else { return nil }
        let whole = census.sentAt + UInt64(options.censusWait * 1e9)
        return options.censusWaitsWhole ? whole : min(whole, max(census.sentAt, census.lastAnswer) + census.quietTime)
    }

    /// Once the census settled, adds the hosts that answered and were not known to the read (with the status of their
    /// answer, and its count as what to expect); returns whether it added any.
    func takeCensus() throws(MQTTError) -> Bool {
        guard census != nil, !census!.taken else { return false }
        try run { censusSettled(now: monotonicNanoseconds()) }
        census!.taken = true
        var added = false
        for (level, answer) in census!.answers.sorted(by: { $0.key < $1.key })
        where options.selection.includes(hostLevel: level) {
            if state.hosts[level]?.status == nil {
                _ = state.apply(
                    .status(hostLevel: level), payload: answer.status.payload, reporting: false,
                    at: follows ? monotonicNanoseconds() : nil)
            }
            guard !listed.contains(level) else { continue }
            listed.insert(level)
            plan.add(level: level, expected: answer.accessories)
            added = true
        }
        return added
    }

    /// The count of a host's accessory topics its census answer gave, if it answered.
    func censusCount(level: String) -> Int? { census?.answers[level]?.accessories }

    /// The status of a host's census answer, if it answered.
    func censusStatus(level: String) -> HostStatus? { census?.answers[level]?.status }
}
