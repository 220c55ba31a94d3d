import AccmonNodes

/// What accmond's claims want one node control (the helper, or accmond's own keeper of simulated nodes) to hold:
/// the nodes and their holders, the marked ports. Kept on the node guard's thread, in step with the operations it
/// sends, so that it can tell what the control holds that no claim covers: a release that failed (the helper
/// killed mid-request, a time-out, unreachable), a claim that ended while accmond was down. ``reconcile(_:)`` asks
/// the control what it holds (`held`) and releases the rest; it is due at start, after every new connection to the
/// helper (a helper restarted knows its records, not what ended meanwhile), and after a failed release or unmark,
/// until it succeeds.
final class NodeLedger {
    private(set) var wanted: [String: AccmonNodes.NodeHolder] = [:]
    private(set) var wantedPorts: Set<String> = []
    /// Whether the control may hold what no claim covers.
    private(set) var needsReconcile = true
    /// Whether a release or unmark failed since the last reconciliation: the control holds something no claim wants.
    private(set) var owes = false
    /// Failed reconciliations in a row: the next one waits longer (``retryDelayMilliseconds``).
    private(set) var failures = 0

    /// How long to wait before the next attempt: 2 s doubling to a minute.
    var retryDelayMilliseconds: Int32 { Int32(min(60_000, 2_000 << min(failures, 5))) }

    func held(_ path: String, for holder: AccmonNodes.NodeHolder) { wanted[path] = holder }

    /// A release done (`succeeded`), or failed: then the node may still be held, and a reconciliation is due.
    func released(_ path: String, succeeded: Bool) {
        wanted[path] = nil
        if !succeeded { owe() }
    }

    func marked(_ port: String, claimed: Bool, succeeded: Bool) {
        if claimed {
            if succeeded { wantedPorts.insert(port) }
        } else {
            wantedPorts.remove(port)
            if !succeeded { owe() }
        }
    }

    private func owe() {
        owes = true
        needsReconcile = true
    }

    /// A new connection to the control: whatever it holds must be looked at again.
    func reconnected() { needsReconcile = true }

    /// There is no such control (no helper configured, no simulated nodes): it holds nothing.
    func giveUp() {
        needsReconcile = false
        failures = 0
    }

    /// What one reconciliation did: the nodes released and ports unmarked, and what failed.
    struct Outcome: Equatable {
        var released: [String] = []
        var unmarked: [String] = []
        var failures: [String] = []
    }

    /// Releases what `control` holds that no claim wants, and unmarks the ports no claim wants; due again when any
    /// of it fails.
    func reconcile(_ control: any NodeControl) -> Outcome {
        var outcome = Outcome()
        let state: HeldState
        do throws(NodeError) {
            state = try control.held()
        } catch {
            failures += 1
            outcome.failures.append("\(error)")
            return outcome
        }
        for node in state.nodes where wanted[node.path] == nil {
            do throws(NodeError) {
                _ = try control.release(node.path)
                outcome.released.append(node.path)
            } catch where error.code == .notHeld {
                // Released meanwhile.
            } catch {
                outcome.failures.append("\(error)")
            }
        }
        for port in state.ports where !wantedPorts.contains(port) {
            do throws(NodeError) {
                _ = try control.unmarkPort(port)
                outcome.unmarked.append(port)
            } catch {
                outcome.failures.append("\(error)")
            }
        }
        needsReconcile = !outcome.failures.isEmpty
        owes = needsReconcile
        failures = needsReconcile ? failures + 1 : 0
        return outcome
    }
}
