import AccmonSys

extension FleetSession {
    /// Subscribes to this reader's census answers and publishes its first request (docs/MQTT.md §5): for one named
    /// host, a request only its bridge answers, at once; for the fleet, one whose window is sized for the hosts the
    /// host list gave (or `--census-wait`). Nothing without a census (`--census-wait 0`) or when the broker refuses
    /// the topic.
    func sendCensus() throws(MQTTError) {
        guard options.censusWindow != 0, client != nil else { return }
        let answerTopic = topics.censusAnswers(clientID: clientID)
        // The room: what two windows of a read may hold, as no window is read meanwhile.
        var census = CensusRead(
            answerTopic: answerTopic, session: nonce, room: 2 * budget, automatic: options.censusWindow == nil)
        let subscribed = monotonicNanoseconds()
        censusSubscription = try client!.subscribe([answerTopic], options: [.noRetained])
        awaitedSubscription = censusSubscription
        stepDeadline = monotonicNanoseconds() + Self.answerTimeout
        defer { stepDeadline = nil }
        try run { awaitedSubscription == nil }
        if censusSubscription == nil {
            // Refused by the broker's ACL: the read goes on from the retained store alone.
            warnings.append(
                "accmon: mqtt: \(settings.address): the broker refused this reader's census topic '\(answerTopic)': "
                    + "hosts it does not give from its retained store are not found; let readers read "
                    + "'\(topics.prefix)/$readers/%c/#' and write '\(topics.prefix)/$census/%c' (docs/MQTT.md §5)")
            return
        }
        census.roundTrip = monotonicNanoseconds() - subscribed
        self.census = census
        if case .named(let name) = options.selection {
            try sendCensusRound(Census.Request(host: name), windowSeconds: 0)
        } else {
            let seconds = options.censusWindow ?? CensusWindow.seconds(hosts: listed.count, room: census.room)
            try sendCensusRound(Census.Request(window: seconds), windowSeconds: seconds)
        }
    }

    /// Publishes a round's request: not retained, with the response topic, the round's correlation data and a message
    /// expiry.
    private func sendCensusRound(_ request: Census.Request, windowSeconds: Double) throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        let correlation = census!.beginRound(
            windowSeconds: windowSeconds, awaiting: awaitedAnswers, at: monotonicNanoseconds())
        _ = try client.publish(
            topic: topics.censusRequest(clientID: clientID), payload: request.payload, retained: false, qos: 0,
            properties: MQTTMessageProperties(
                responseTopic: census!.answerTopic, correlationData: correlation,
                expirySeconds: Census.requestExpirySeconds))
    }

    /// Takes an answer on this reader's census topic; returns whether `topic` was that topic.
    func censusMessage(topic: String, payload: [UInt8], properties: MQTTMessageProperties) -> Bool {
        guard census != nil, topic == census!.answerTopic else { return false }
        if let answer = Census.Answer.decode(payload) {
            _ = census!.take(answer, correlation: properties.correlationData, at: packetTime)
        }
        return true
    }

    /// The hosts whose answer a fleet's round awaits besides its window: every host known online with a lease (a
    /// bridge that speaks for itself), taken once as the round begins.
    private var awaitedAnswers: Set<String> {
        if case .named = options.selection { return [] }
        return Set(state.hosts.values.filter { !$0.stale && $0.status?.leaseSeconds != nil }.map(\.level))
    }

    /// Whether the census's round is over: for one named host, its answer or none within the quiet time (no bridge of
    /// it is online here); for the fleet, ``CensusRead/roundOver(now:)``.
    func censusRoundOver(now: UInt64) -> Bool {
        guard let census, !census.settled else { return true }
        if case .named(let name) = options.selection {
            return census.answers[FleetTopics.encodeLevel(name)] != nil || now >= census.sentAt + census.quietTime
        }
        return census.roundOver(now: now)
    }

    /// When the census's round may be over next, for the loop's wake-up.
    func censusDeadline(after now: UInt64) -> UInt64? {
        guard let census, !census.settled else { return nil }
        if case .named = options.selection { return census.sentAt + census.quietTime }
        return census.nextCheck(after: now)
    }

    /// Waits for the census's rounds to end, with another request while more bridges answered than a window carries;
    /// a warning, and the read incomplete, when it may have missed hosts.
    func settleCensus() throws(MQTTError) {
        guard let census, !census.settled else { return }
        while !self.census!.settled {
            try run { censusRoundOver(now: monotonicNanoseconds()) }
            if let seconds = self.census!.endRound(now: monotonicNanoseconds()) {
                try sendCensusRound(Census.Request(window: seconds), windowSeconds: seconds)
            }
        }
        guard let shortfall = self.census!.shortfall else { return }
        incomplete = true
        switch shortfall {
        case .stillAnswering(let seconds):
            warnings.append(
                "accmon: mqtt: \(settings.address): bridges still answered the census when it ended \(format(seconds)) s "
                    + "after its request: hosts the broker's retained store does not give this reader may be "
                    + "missing; pass a longer --census-wait (docs/MQTT.md §5)")
        case .moreThanCarried(let answers, let seconds):
            let needed = CensusWindow.seconds(hosts: answers, room: census.room) * 2
            warnings.append(
                "accmon: mqtt: \(settings.address): \(answers) bridges answered the census, more than its window of "
                    + "\(format(seconds)) s carries through a broker queue of \(brokerQueue) messages: answers may "
                    + "have been dropped, and hosts the broker's retained store does not give this reader with them; "
                    + "pass --census-wait \(format(needed)) or more, or raise the broker's max_queued_messages "
                    + "(docs/MQTT.md §5)")
        }
    }

    private func format(_ seconds: Double) -> String {
        let tenths = (seconds * 10).rounded(.up) / 10
        return tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)
    }

    /// Once the census settled, adds the hosts that answered and were not known to the read (with the status of their
    /// answer, and its count as what to expect); returns whether it added any.
    func takeCensus() throws(MQTTError) -> Bool {
        guard census != nil, !census!.taken else { return false }
        try settleCensus()
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
