import AccmonClient
import AccmonMQTT
import Synchronization

/// The table of `accmon list --broker`: a row per accessory (and a row of dashes for a host without any), with its
/// host's state and its claim's holder. A fleet's table has tens of thousands of rows: each host's rows are made and
/// measured as soon as the host is read (``Rows``, given to the reader), while the rest of the fleet is read; once
/// it is read, the rows are written with the widest cell of each column.
enum FleetTable {
    static let header = ["HOST", "STATE", "CONN", "KIND", "ID", "NAME", "SERIAL", "NODES", "HOLDER"]

    /// Each host's rows as made while the fleet is read, by host level.
    final class Rows: Sendable {
        private let made = Mutex<[String: MeasuredCells]>([:])
        private let output: @Sendable (FleetHost) -> FleetHostOutput

        /// `output`: what is shown of a host (its accessories that pass the filter).
        init(output: @escaping @Sendable (FleetHost) -> FleetHostOutput) { self.output = output }

        /// Makes `host`'s rows, replacing those made before for it (the reader's `eachHost`).
        func make(_ host: FleetHost) {
            let rows = FleetTable.rows(of: output(host))
            made.withLock { $0[host.level] = rows }
        }

        /// The table of `hosts` (the hosts shown, in order): each host's rows as made, or made now.
        func table(_ hosts: [FleetHost]) -> [UInt8] {
            let made = self.made.withLock { $0 }
            let parts = hosts.map { made[$0.level] ?? FleetTable.rows(of: output($0)) }
            let head = MeasuredCells(FleetTable.header, columns: FleetTable.header.count)
            let widths = parts.reduce(head.widths) { $1.widest(with: $0) }
            let size = parts.reduce(head.rowsSize(widths)) { $0 + $1.rowsSize(widths) }
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                var at = buffer.baseAddress!
                at += head.writeRows(widths, to: at)
                for part in parts { at += part.writeRows(widths, to: at) }
                count = at - buffer.baseAddress!
                precondition(count == size, "the table's size was miscounted")
            }
        }
    }

    /// The rows of one host, measured.
    static func rows(of host: FleetHostOutput) -> MeasuredCells {
        var cells = MeasuredCells(columns: header.count, cells: header.count * max(host.accessories.count, 1))
        if host.accessories.isEmpty {
            for cell in [host.host, host.state, "-", "-", "-", "-", "-", "-", "-"] { cells.append(cell) }
        }
        // Measured once: the host's cells are on each of its rows; the state, connection id and kind are ASCII.
        let hostWidth = MeasuredCells.width(of: host.host)
        let stateWidth = MeasuredCells.width(of: host.state)
        for accessory in host.accessories {
            cells.append(host.host, width: hostWidth)
            cells.append(host.state, width: stateWidth)
            let connection = accessory.connectionID.description
            cells.append(connection, width: connection.utf8.count)
            cells.append(accessory.kind.rawValue, width: accessory.kind.rawValue.utf8.count)
            cells.append(accessory.usbID)
            cells.appendQuotedIfNeeded(accessory.name)
            cells.appendQuotedIfNeeded(accessory.serialNumber)
            cells.append(
                accessory.deviceNodes.count == 1
                    ? accessory.deviceNodes[0] : accessory.deviceNodes.joined(separator: ","))
            cells.append(host.claim(of: accessory).map { ClaimsCommand.userLabel($0.holder) } ?? "-")
        }
        return cells
    }
}
