import AccmonLogging
import AccmonMQTT

/// The host's index entry, and the watch over its status topic.
extension BrokerLink {
    /// The online status as last published, with its count: what the bridge answers a census with.
    var status: HostStatus { current }

    /// The host's entry in the host index, by which readers list a fleet too big for one read of every status.
    func publishIndexEntry() {
        do {
            indexMessageID = try client?.publish(
                topic: topics.indexEntry(host: host), payload: HostIndex.payload(host: host), retained: true)
        } catch {
            logger.warning(.bridgeBroker, "mqtt: cannot publish the host index entry of host '\(host)': \(error)")
        }
    }

    /// Someone else wrote this host's status: a late will of an earlier run, or another machine under this name.
    func checkStatus(_ payload: [UInt8], now: UInt64) {
        let status = HostStatus.decode(payload)
        if let status, status.state == .online, status.machineID != online.machineID {
            logger.error(
                .bridgeReconciliation,
                "mqtt: another machine (machine id \(status.machineID)) publishes as host '\(host)': give each "
                    + "machine its own host name (\"host\" in the configuration)")
            return
        }
        guard status != current else { return }
        let found = status.map { "\($0.state.rawValue), run \($0.runID)" } ?? "not a status"
        logger.notice(
            .bridgeReconciliation,
            "mqtt: the status of host '\(host)' was overwritten (\(found)); publishing online again")
        publishStatus(now: now)
    }
}
