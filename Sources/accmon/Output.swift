import AccmonClient
import AccmonManifest
import AccmonSys
import FoundationEssentials
import Glibc

/// How human output is styled: colour only on a terminal and never with `NO_COLOR` set.
struct Style {
    let colour: Bool

    static let standardOutput = Style(
        colour: isTerminal(.standardOutput) && (environmentValue("NO_COLOR") ?? "").isEmpty)

    func paint(_ text: String, _ code: String) -> String {
        colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }
}

/// The local wall-clock time as `YYYY-MM-DD HH:MM:SS.mmm`.
func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return timestamp(seconds: now.tv_sec, nanoseconds: Int(now.tv_nsec))
}

/// A time in seconds since the epoch, as local time `YYYY-MM-DD HH:MM:SS.mmm`.
func timestamp(_ time: Double) -> String {
    let seconds = time.rounded(.down)
    return timestamp(seconds: Int(seconds), nanoseconds: Int((time - seconds) * 1e9))
}

private func timestamp(seconds: Int, nanoseconds: Int) -> String {
    var seconds = time_t(seconds)
    var parts = tm()
    localtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2)) "
        + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
        + pad(Int32(nanoseconds / 1_000_000), 3)
}

/// One human line for a watch event: time, change, kind, vendor:product, name, serial, device node, connection id;
/// in the fleet view, the host after the time.
func humanLine(
    _ label: String, _ accessory: Accessory, rejection: String? = nil, claim: ClaimSummary? = nil,
    host: String? = nil, time: Double? = nil, details: [String] = [], style: Style
) -> String {
    let painted: String
    switch label {
    case "connect": painted = style.paint(label.padding(10), "32")
    case "disconnect": painted = style.paint(label.padding(10), "31")
    case "rejected", "break": painted = style.paint(label.padding(10), "33")
    case "claim", "release", "contention": painted = style.paint(label.padding(10), "36")
    default: painted = style.paint(label.padding(10), "2")
    }
    var fields = [
        time.map(timestamp) ?? timestamp(), painted, accessory.kind.rawValue.padding(13), accessory.usbID,
        accessory.name.isEmpty ? "\"\"" : quotedIfNeeded(accessory.name),
    ]
    if let host { fields.insert(quotedIfNeeded(host), at: 1) }
    if !accessory.serialNumber.isEmpty { fields.append("serial=\(quotedIfNeeded(accessory.serialNumber))") }
    if let node = accessory.deviceNodes.first { fields.append(node) }
    fields.append("conn=\(accessory.connectionID)")
    if let rejection { fields.append(style.paint("rejected: \(rejection)", "33")) }
    if let claim { fields.append(style.paint("claimed by \(holderLabel(claim))", "35")) }
    fields += details
    return fields.joined(separator: "  ") + "\n"
}

/// One human line for a history entry: its local time, its kind, the accessory (as ``humanLine``, without a host),
/// then who acted, who holds, and the reason, when present.
func historyLine(_ entry: HistoryEntry, style: Style) -> String {
    var details: [String] = []
    if let actor = entry.actor { details.append("actor=\(quotedIfNeeded(actor.description))") }
    if let holder = entry.holder { details.append("holder=\(quotedIfNeeded(holder.description))") }
    if let reason = entry.reason { details.append("reason=\(quotedIfNeeded(reason))") }
    return humanLine(entry.kind.rawValue, entry.accessory, time: entry.time, details: details, style: style)
}

/// Quotes text with spaces or control characters, so that each field stays one token.
func quotedIfNeeded(_ text: String) -> String {
    // By bytes: every byte of a multibyte UTF-8 sequence is 0x80 or more, so this is the same test on scalars.
    let plain = text.utf8.allSatisfy { $0 > 0x20 && $0 != UInt8(ascii: "\"") && $0 != 0x7F }
    if plain { return text }
    var quoted = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": quoted += "\\\""
        case "\\": quoted += "\\\\"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F: quoted += "\\u{\(String(scalar.value, radix: 16))}"
        default: quoted.unicodeScalars.append(scalar)
        }
    }
    return quoted + "\""
}

/// A table with left-aligned columns.
func table(_ header: [String], _ rows: [[String]]) -> String {
    var widths = header.map(displayWidth)
    for row in rows {
        for (index, cell) in row.enumerated() { widths[index] = max(widths[index], displayWidth(cell)) }
    }
    var out: [UInt8] = []
    for row in [header] + rows {
        for (index, cell) in row.enumerated() {
            out.append(contentsOf: cell.utf8)
            guard index < row.count - 1 else { break }
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: widths[index] - displayWidth(cell) + 2))
        }
        out.append(UInt8(ascii: "\n"))
    }
    return String(decoding: out, as: UTF8.self)
}

/// Keeps `value` until the process exits, which frees it at once: a command's large result (a fleet's state of tens
/// of thousands of accessories) is not freed object by object just before the exit.
func keepUntilExit<Value>(_ value: Value) {
    _ = Unmanaged.passRetained(KeptUntilExit(value))
}

private final class KeptUntilExit<Value> {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The columns a cell takes: its characters (grapheme clusters), counted by its bytes when it is ASCII.
private func displayWidth(_ cell: String) -> Int {
    cell.utf8.allSatisfy { $0 < 0x80 } ? cell.utf8.count : cell.count
}

/// Stable, sorted-key JSON for `--json` output, one line.
func jsonLine(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    do {
        return String(decoding: try encoder.encode(value), as: UTF8.self) + "\n"
    } catch {
        preconditionFailure("--json encoding failed: \(error)")  // only strings, numbers and arrays: cannot fail
    }
}

/// The JSON output format's version, in every `--json` document.
let jsonOutputVersion = 1

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
