/// Writes the line of an `ok` reply directly, byte for byte what ``ProtocolCodec`` writes with JSONEncoder (sorted
/// keys, slashes unescaped), with ``EventLineWriter``'s strings and numbers: an `ok` answers every `simulate`, so it is
/// on the request path; and of a `history` reply, which may hold 10,000 entries. (Errors are rare: JSONEncoder writes
/// them.)
enum ReplyLineWriter {
    /// `{"connectionID":…,"id":…,"type":"ok"}`, without the absent fields.
    static func ok(id: RequestID?, connectionID: ConnectionID?) -> [UInt8] {
        JSONOutput.bytes(startingOnTheStack: 128) { out in
            out.append(UInt8(ascii: "{"))
            if let connectionID {
                EventLineWriter.literal(#""connectionID":"#, into: &out)
                EventLineWriter.number(connectionID.rawValue, into: &out)
                out.append(UInt8(ascii: ","))
            }
            if let id {
                EventLineWriter.literal(#""id":"#, into: &out)
                requestID(id, into: &out)
                out.append(UInt8(ascii: ","))
            }
            EventLineWriter.literal(#""type":"ok"}\#n"#, into: &out)
        }
    }

    /// `{"entries":[…],"id":…,"truncated":true,"type":"history"}`, without an absent `id` or a false `truncated`.
    static func history(id: RequestID?, entries: [HistoryEntry], truncated: Bool) -> [UInt8] {
        var out = JSONOutput(capacity: 256 + 700 * entries.count)
        EventLineWriter.literal(#"{"entries":["#, into: &out)
        EventLineWriter.list(entries, into: &out) { entry, out in HistoryLineWriter.entry(entry, into: &out) }
        out.append(UInt8(ascii: "]"))
        if let id {
            EventLineWriter.literal(#","id":"#, into: &out)
            requestID(id, into: &out)
        }
        if truncated { EventLineWriter.literal(#","truncated":true"#, into: &out) }
        EventLineWriter.literal(#","type":"history"}\#n"#, into: &out)
        return out.bytes()
    }

    /// A request id: a JSON number or string.
    private static func requestID(_ id: RequestID, into out: inout JSONOutput) {
        switch id {
        case .number(let number):
            if number < 0 { out.append(UInt8(ascii: "-")) }
            EventLineWriter.number(number.magnitude, into: &out)
        case .string(let string):
            EventLineWriter.string(string, into: &out)
        }
    }
}
