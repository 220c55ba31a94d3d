/// Writes history entries directly, byte for byte what JSONEncoder writes for ``HistoryEntry`` (sorted keys, slashes
/// unescaped, absent fields left out), with ``EventLineWriter``'s strings and numbers: a `history` reply of 10,000
/// entries, and the daemon's history file, are written without JSONEncoder's generic machinery.
package enum HistoryLineWriter {
    /// The entry object, its keys in sorted order. `accessoryObject`: the bytes ``EventLineWriter`` wrote for the
    /// entry's accessory already (in its event's line), copied instead of written again.
    package static func entry(
        _ entry: HistoryEntry, accessoryObject: ArraySlice<UInt8>? = nil, into out: inout JSONOutput
    ) {
        EventLineWriter.literal(#"{"accessory":"#, into: &out)
        if let accessoryObject {
            accessoryObject.withUnsafeBufferPointer { out.append($0) }
        } else {
            EventLineWriter.accessory(entry.accessory, into: &out)
        }
        if let actor = entry.actor {
            EventLineWriter.literal(#","actor":"#, into: &out)
            party(actor, into: &out)
        }
        if let eventSeq = entry.eventSeq {
            EventLineWriter.literal(#","eventSeq":"#, into: &out)
            EventLineWriter.number(eventSeq, into: &out)
        }
        if let holder = entry.holder {
            EventLineWriter.literal(#","holder":"#, into: &out)
            party(holder, into: &out)
        }
        EventLineWriter.member(#","kind":"#, entry.kind.rawValue, into: &out)
        if let reason = entry.reason {
            EventLineWriter.member(#","reason":"#, reason, into: &out)
        }
        EventLineWriter.literal(#","seq":"#, into: &out)
        EventLineWriter.number(entry.seq, into: &out)
        EventLineWriter.literal(#","time":"#, into: &out)
        number(entry.time, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// A party object: `client`, `pid`, `remote`, `uid`, `user`, the absent ones left out.
    static func party(_ party: Party, into out: inout JSONOutput) {
        var separator = UInt8(ascii: "{")
        if let client = party.client {
            out.append(separator)
            separator = UInt8(ascii: ",")
            EventLineWriter.member(#""client":"#, client, into: &out)
        }
        if let pid = party.pid {
            out.append(separator)
            separator = UInt8(ascii: ",")
            EventLineWriter.literal(#""pid":"#, into: &out)
            signed(Int64(pid), into: &out)
        }
        out.append(separator)
        EventLineWriter.literal(party.remote ? #""remote":true"# : #""remote":false"#, into: &out)
        if let uid = party.uid {
            EventLineWriter.literal(#","uid":"#, into: &out)
            EventLineWriter.number(UInt64(uid), into: &out)
        }
        EventLineWriter.member(#","user":"#, party.user, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// A signed integer.
    static func signed(_ value: Int64, into out: inout JSONOutput) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        EventLineWriter.number(value.magnitude, into: &out)
    }

    /// A finite double as JSONEncoder writes it: Swift's shortest form (`1796000000.123`, `1e-07`), without the `.0`
    /// of an integral value.
    package static func number(_ value: Double, into out: inout JSONOutput) {
        precondition(value.isFinite, "a history time is finite")
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        out.append(utf8: text)
    }
}
