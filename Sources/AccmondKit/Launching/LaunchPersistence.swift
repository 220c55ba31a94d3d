import AccmonProtocol

/// A unit accmond started or stops for an accessory, as the state file keeps it: after a restart accmond still
/// knows which unit to stop when the accessory's connection ends, and which unit a kept accessory has running.
struct PersistedLaunch: Codable, Sendable, Equatable {
    /// The ``LaunchPlanner`` slot: the unit's name, or `keep` with the entry and accessory for a kept unit.
    var slot: String
    /// The unit the slot's next start would start.
    var unit: String
    /// The flap group: the entry and the accessory.
    var group: String?
    var want: LaunchPlanner.State
    /// What systemd last did at accmond's request; absent before anything was.
    var told: LaunchPlanner.State?
    /// The connection the unit serves, while it lasts.
    var connectionID: ConnectionID?
    var keep: Bool
    /// A kept slot's running unit (started for an earlier connection of its accessory).
    var keptUnit: String?
}

extension Launcher {
    /// The launches to save: every slot that wants its unit started or has it started (relaunches excepted: their
    /// registrations are saved with their sessions).
    func persisted() -> [PersistedLaunch] {
        var connections: [String: ConnectionID] = [:]
        for (connection, launched) in byConnection { connections[launched.slot] = connection }
        return planner.slots.compactMap { key, slot -> PersistedLaunch? in
            guard !slot.oneShot, slot.want == .started || slot.told == .started else { return nil }
            return PersistedLaunch(
                slot: key, unit: slot.unit, group: slot.group, want: slot.want, told: slot.told,
                connectionID: connections[key], keep: key.hasPrefix(Self.keptPrefix), keptUnit: keptUnits[key])
        }.sorted { $0.slot < $1.slot }
    }

    /// Puts back the launches saved before a restart.
    func restore(_ saved: [PersistedLaunch]) {
        for entry in saved {
            planner.restore(
                entry.slot, unit: entry.unit, group: entry.group, want: entry.want, told: entry.told,
                unlessActive: entry.keptUnit)
            if let connection = entry.connectionID { byConnection[connection] = Launched(slot: entry.slot, keep: entry.keep) }
            if let kept = entry.keptUnit { keptUnits[entry.slot] = kept }
        }
    }
}
