import FoundationEssentials

extension ProtocolCodec {
    // MARK: Server messages

    /// Encodes a server message as one line, newline included.
    public func encode(_ message: ServerMessage) -> [UInt8] {
        // Events, `ok` and `history` replies are written directly; the rest with JSONEncoder.
        switch message {
        case .event(let event): EventLineWriter.line(event)
        case .ok(let id, let connectionID): ReplyLineWriter.ok(id: id, connectionID: connectionID)
        case .history(let id, let entries, let truncated):
            ReplyLineWriter.history(id: id, entries: entries, truncated: truncated)
        default: line(ServerMessageCoding(message: message))
        }
    }

    /// Encodes an event as ``encode(_:)`` does, and gives the bytes of its accessory object within the line too (for
    /// the history file, which writes the same object).
    package func encodeEvent(_ event: AccessoryEvent) -> (line: [UInt8], accessory: ArraySlice<UInt8>) {
        let (line, accessory) = EventLineWriter.lineAndAccessory(event)
        return (line, line[accessory])
    }

    /// Encodes a server message with JSONEncoder, whatever its kind: what ``EventLineWriter`` and
    /// ``ReplyLineWriter`` must match.
    func encodeWithJSONEncoder(_ message: ServerMessage) -> [UInt8] {
        line(ServerMessageCoding(message: message))
    }

    /// Decodes one line (without its newline) sent by the daemon.
    public func decodeServerMessage(_ line: some Collection<UInt8>) throws(ProtocolError) -> ServerMessage {
        do {
            return try decoder.decode(ServerMessageCoding.self, from: Data(line)).message
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.protocolError(error, context: "daemon message")
        }
    }

    func line(_ value: some Encodable) -> [UInt8] {
        do {
            var bytes = [UInt8](try encoder.encode(value))
            bytes.append(0x0A)
            return bytes
        } catch {
            // Our message types hold only strings, numbers and arrays of them: encoding cannot fail.
            preconditionFailure("protocol encoding failed: \(error)")
        }
    }
}
