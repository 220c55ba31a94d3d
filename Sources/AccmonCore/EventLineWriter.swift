/// Writes the line of a `connect` or `disconnect` event directly, byte for byte what ``ProtocolCodec`` writes with
/// JSONEncoder (sorted keys, slashes unescaped), without JSONEncoder's generic machinery: this line is on the hot
/// path, encoded once per event, and JSONEncoder took most of the broker thread's time.
enum EventLineWriter {
    static func line(_ event: AccessoryEvent) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        out += Array(#"{"accessory":"#.utf8)
        accessory(event.accessory, into: &out)
        if let rejection = event.rejection {
            out += Array(#","rejected":"#.utf8)
            string(rejection, into: &out)
        }
        out += Array(#","seq":"#.utf8)
        out += Array(String(event.sequence).utf8)
        out += Array(#","type":"#.utf8)
        string(event.change.rawValue, into: &out)
        out += Array("}\n".utf8)
        return out
    }

    /// The accessory object, its keys in sorted order.
    static func accessory(_ accessory: Accessory, into out: inout [UInt8]) {
        func field(_ name: String, first: Bool = false) {
            out += Array((first ? "{\"" : ",\"").utf8)
            out += Array(name.utf8)
            out += Array("\":".utf8)
        }
        field("accessoryID", first: true)
        string(accessory.accessoryID, into: &out)
        field("connectionID")
        out += Array(String(accessory.connectionID.rawValue).utf8)
        field("descriptorsSHA256")
        string(accessory.descriptorsSHA256, into: &out)
        field("deviceNodes")
        strings(accessory.deviceNodes, into: &out)
        field("firmwareRevision")
        string(accessory.firmwareRevision, into: &out)
        field("hardwareRevision")
        string(accessory.hardwareRevision, into: &out)
        field("interfaceNumber")
        string(accessory.interfaceNumber, into: &out)
        field("kind")
        string(accessory.kind.rawValue, into: &out)
        field("manufacturer")
        string(accessory.manufacturer, into: &out)
        field("modelNumber")
        string(accessory.modelNumber, into: &out)
        field("name")
        string(accessory.name, into: &out)
        field("portPath")
        string(accessory.portPath, into: &out)
        field("productID")
        string(accessory.productID, into: &out)
        field("protocolStrings")
        strings(accessory.protocolStrings, into: &out)
        field("serialNumber")
        string(accessory.serialNumber, into: &out)
        field("sysfsPath")
        string(accessory.sysfsPath, into: &out)
        field("vendorID")
        string(accessory.vendorID, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    static func strings(_ values: [String], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            string(value, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// A JSON string as JSONEncoder writes it: `"` and `\` escaped, control characters as `\b \t \n \f \r` or
    /// `\u00xx`, everything else (slashes, DEL, non-ASCII) as UTF-8.
    static func string(_ value: String, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0..<0x20:
                out += Array("\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
