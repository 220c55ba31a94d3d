/// Writes the lines of `ok` and `error` replies directly, byte for byte what ``ProtocolCodec`` writes with JSONEncoder
/// (sorted keys, slashes unescaped), with ``EventLineWriter``'s strings and numbers: an `ok` answers every `simulate`,
/// so it is on the request path.
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

    /// `{"code":…,"id":…,"message":…,"type":"error"}`, without the id when there is none.
    static func error(id: RequestID?, _ error: ProtocolError) -> [UInt8] {
        var out = JSONOutput(capacity: 96 + error.message.utf8.count)
        EventLineWriter.member(#"{"code":"#, error.code.rawValue, into: &out)
        if let id {
            EventLineWriter.literal(#","id":"#, into: &out)
            requestID(id, into: &out)
        }
        EventLineWriter.member(#","message":"#, error.message, into: &out)
        EventLineWriter.literal(#","type":"error"}\#n"#, into: &out)
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
