import AccmonClient
import AccmonMQTT

/// The table of `accmon list --broker`: a row per accessory (and a row of dashes for a host without any), with its
/// host's state and its claim's holder. A fleet's table has tens of thousands of rows, made once the whole fleet is
/// read: it is made in two halves at once, on two threads.
enum FleetTable {
    static let header = ["HOST", "STATE", "CONN", "KIND", "ID", "NAME", "SERIAL", "NODES", "HOLDER"]

    /// The table's bytes, in three pieces to write one after the other: the header, then the two halves' rows.
    static func pieces(_ hosts: [FleetHostOutput]) async -> [[UInt8]] {
        let rows = hosts.reduce(0) { $0 + max($1.accessories.count, 1) }
        var split = 0
        var firstRows = 0
        while split < hosts.count, firstRows < rows / 2 {
            firstRows += max(hosts[split].accessories.count, 1)
            split += 1
        }
        let firstHosts = Array(hosts[..<split])
        let secondHosts = Array(hosts[split...])
        async let measuringFirst = MeasuredCells(cells(firstHosts), columns: header.count)
        async let measuringSecond = MeasuredCells(cells(secondHosts), columns: header.count)
        let (first, second) = await (measuringFirst, measuringSecond)
        let head = MeasuredCells(header, columns: header.count)
        let widths = head.widest(with: first.widest(with: second.widths))
        async let firstRowsBytes = first.rows(widths)
        async let secondRowsBytes = second.rows(widths)
        return await [head.rows(widths), firstRowsBytes, secondRowsBytes]
    }

    /// The cells of `hosts`' rows, row after row.
    static func cells(_ hosts: [FleetHostOutput]) -> [String] {
        var cells: [String] = []
        cells.reserveCapacity(header.count * hosts.reduce(0) { $0 + max($1.accessories.count, 1) })
        for host in hosts {
            if host.accessories.isEmpty { cells += [host.host, host.state, "-", "-", "-", "-", "-", "-", "-"] }
            for accessory in host.accessories {
                cells.append(host.host)
                cells.append(host.state)
                cells.append(accessory.connectionID.description)
                cells.append(accessory.kind.rawValue)
                cells.append(accessory.usbID)
                cells.append(quotedIfNeeded(accessory.name))
                cells.append(quotedIfNeeded(accessory.serialNumber))
                cells.append(
                    accessory.deviceNodes.count == 1
                        ? accessory.deviceNodes[0] : accessory.deviceNodes.joined(separator: ","))
                cells.append(host.claim(of: accessory).map { ClaimsCommand.userLabel($0.holder) } ?? "-")
            }
        }
        return cells
    }
}
