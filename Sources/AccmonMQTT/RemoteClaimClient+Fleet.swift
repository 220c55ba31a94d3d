public import AccmonProtocol
import FoundationEssentials

/// One host as a claimer sees it on the broker: its status and its accessories.
public struct FleetHostView: Sendable, Hashable {
    public var host: String
    /// `online`, `offline`, or `unknown` (no status).
    public var state: String
    public var accessories: [Accessory]
}

extension RemoteClaimClient {
    /// The hosts `selection` selects, with their status and accessories, from the retained topics, sorted by name.
    public func readFleet(selection: FleetSelection = .all) throws(MQTTError) -> [FleetHostView] {
        let read = try readRetained([topics.statuses, topics.filter(.accessories)])
        var hosts: [String: FleetHostView] = [:]
        for (topic, payload) in read {
            switch topics.parse(topic) {
            case .status(let level)?:
                let name = FleetTopics.decodeLevel(level)
                let state = HostStatus.decode(payload)?.state.rawValue ?? "unknown"
                hosts[name, default: FleetHostView(host: name, state: state, accessories: [])].state = state
            case .accessory(let level, _, _)?:
                let name = FleetTopics.decodeLevel(level)
                guard let accessory = try? JSONDecoder().decode(Accessory.self, from: Data(payload)) else { continue }
                hosts[name, default: FleetHostView(host: name, state: "unknown", accessories: [])].accessories.append(
                    accessory)
            default: continue
            }
        }
        return hosts.values.filter { selection.includes(hostName: $0.host) }.map { host in
            var sorted = host
            sorted.accessories.sort { ($0.accessoryID, $0.connectionID) < ($1.accessoryID, $1.connectionID) }
            return sorted
        }.sorted { $0.host < $1.host }
    }
}
