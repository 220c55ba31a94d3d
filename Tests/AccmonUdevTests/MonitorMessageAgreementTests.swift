import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// accmond reads udevd's monitor datagrams itself (``UdevMonitorMessage``) instead of through libudev's
/// `udev_monitor_receive_device`. Thousands of random datagrams, well-formed and broken, go to the real libudev (under
/// umockdev, through `Tests/umockdev/libudev_receive.py`) and to the parser: both must drop the same ones and read the
/// same fields and properties from the others, apart from the differences the parser documents.
@Suite("udev monitor messages: accmond's parser agrees with libudev", .timeLimit(.minutes(2)))
struct MonitorMessageAgreementTests {
    /// The properties the parser reads (``UdevProperty``), by udev name.
    static let read = UdevProperty.allCases.map(\.name)
    /// The keys the generator picks from: those read, and some it does not read (one longer than any read name, and
    /// one that begins like one read).
    static let keys = read + ["DRIVER", "ID_PATH", "ID_VENDOR_FROM_DATABASE", "ID_SERIAL"]

    @Test func randomDatagramsAreReadAsLibudevReadsThem() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var cases: [(datagram: [UInt8], kind: DatagramKind)] = []
        for _ in 0..<3_000 { cases.append(Self.randomDatagram(&random)) }
        let answers = try Self.libudevAnswers(cases.map(\.datagram))
        var accepted = 0
        for ((datagram, kind), answer) in zip(cases, answers) {
            let parsed = datagram.withUnsafeBytes { UdevMonitorMessage.parse($0) }
            let context = "\(kind) datagram \(Self.printable(datagram)) (ACCMON_TEST_SEED=\(seed))"
            switch kind {
            case .kernelFormat, .parentComponent:
                // Documented differences: accmond takes only udevd's messages, and no '..' in a sysfs path.
                #expect(answer != nil, "libudev accepts it: \(context)")
                #expect(throws: UdevMessageRejection.self, "accmond drops it: \(context)") { try parsed.get() }
            case .wellFormed, .broken:
                guard let answer else {
                    #expect(throws: UdevMessageRejection.self, "libudev drops it, so must accmond: \(context)") {
                        try parsed.get()
                    }
                    continue
                }
                guard case .success(let message) = parsed else {
                    Issue.record("libudev reads it, accmond drops it (\(parsed)): \(context)")
                    continue
                }
                accepted += 1
                #expect(Self.fields(of: message) == answer.fields, "\(context)")
                #expect(
                    Self.linksAsSets(Self.byName(message.properties))
                        == Self.linksAsSets(answer.properties(keeping: Self.read)),
                    "\(context)")
            }
        }
        // The generator must exercise both sides: most well-formed datagrams are accepted, many broken ones not.
        #expect(accepted > 1_000, "only \(accepted) of 3,000 datagrams were accepted")
    }

    // MARK: The reference

    /// What libudev made of one datagram: `nil` when it dropped it.
    struct LibudevDevice {
        var fields: [String: String]
        var rawProperties: [String: String]

        /// The properties a parser keeping `names` keeps (the fields are compared apart).
        func properties(keeping names: [String]) -> [String: String] {
            rawProperties.filter { names.contains($0.key) }
        }
    }

    static func byName(_ properties: UdevProperties) -> [String: String] {
        var named: [String: String] = [:]
        for property in UdevProperty.allCases { named[property.name] = properties[property] }
        return named
    }

    static func fields(of message: UdevMonitorMessage) -> [String: String] {
        [
            "action": message.action, "devpath": message.devpath, "subsystem": message.subsystem,
            "devtype": message.devtype, "devnode": message.devnode, "sysname": message.sysname,
            "seqnum": String(message.sequenceNumber),
        ]
    }

    /// Runs the datagrams through the real libudev, one at a time.
    static func libudevAnswers(_ datagrams: [[UInt8]]) throws -> [LibudevDevice?] {
        let lines = try ReferenceScript(name: "libudev_receive.py").answers(
            datagrams.map { $0.map { String(format: "%02x", $0) }.joined() })
        return try lines.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8), options: [.fragmentsAllowed])
            guard let device = object as? [String: Any] else { return nil }
            var fields: [String: String] = [:]
            for key in ["action", "devpath", "subsystem", "devtype", "devnode", "sysname"] {
                fields[key] = (device[key] as? String).map(fromHex) ?? ""
            }
            fields["seqnum"] = String((device["seqnum"] as? NSNumber)?.uint64Value ?? 0)
            var properties: [String: String] = [:]
            for (key, value) in device["properties"] as? [String: String] ?? [:] {
                properties[fromHex(key)] = fromHex(value)
            }
            return LibudevDevice(fields: fields, rawProperties: properties)
        }
    }

    /// DEVLINKS is a set for libudev: it re-joins the links in its own order.
    static func linksAsSets(_ properties: [String: String]) -> [String: String] {
        var properties = properties
        if let links = properties["DEVLINKS"] {
            properties["DEVLINKS"] = Set(links.split(separator: " ")).sorted().joined(separator: " ")
        }
        return properties
    }

    static func fromHex(_ text: String) -> String {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func printable(_ datagram: [UInt8]) -> String {
        String(decoding: datagram.map { $0 == 0 ? UInt8(ascii: "|") : $0 }, as: UTF8.self).debugDescription
    }

    // MARK: The generator

    enum DatagramKind: CustomStringConvertible {
        case wellFormed, broken, kernelFormat, parentComponent
        var description: String {
            switch self {
            case .wellFormed: "a well-formed"
            case .broken: "a broken"
            case .kernelFormat: "a kernel-format"
            case .parentComponent: "a '..' DEVPATH"
            }
        }
    }

    static func randomDatagram(_ random: inout SplitMix64) -> (datagram: [UInt8], kind: DatagramKind) {
        func pick<T>(_ values: [T]) -> T { values[Int(random.next(below: UInt64(values.count)))] }
        func chance(_ percent: UInt64) -> Bool { random.next(below: 100) < percent }
        func word(_ alphabet: String, _ length: ClosedRange<Int>) -> [UInt8] {
            let characters = Array(alphabet.utf8)
            let count = length.lowerBound + Int(random.next(below: UInt64(length.count)))
            return (0..<count).map { _ in characters[Int(random.next(below: UInt64(characters.count)))] }
        }
        func value() -> [UInt8] {
            var bytes = word("abcXYZ019 _-=:/.!\t", 0...24)
            if chance(10) { bytes += Array("é€".utf8) }
            if chance(3) { bytes.insert(0xFF, at: Int(random.next(below: UInt64(bytes.count + 1)))) }
            if chance(5) { bytes.insert(pick([0x0A, 0x0D]), at: Int(random.next(below: UInt64(bytes.count + 1)))) }
            return bytes
        }
        // Any component but '..', where accmond is stricter than libudev (checked apart below).
        let components = (0..<(1 + Int(random.next(below: 4)))).map { _ in word("abc012-:.!", 1...8) }
            .filter { $0 != Array("..".utf8) }
        var devpath = Array("/devices".utf8)
        for component in components {
            devpath += chance(3) ? Array("//".utf8) : [UInt8(ascii: "/")]
            devpath += chance(3) ? Array("./".utf8) + component : component
        }
        if chance(3) { devpath.append(UInt8(ascii: "/")) }
        let sequence: [UInt8] = {
            let number = 1 + random.next(below: 1_000_000)
            switch random.next(below: 6) {
            case 0: return Array("0x\(String(number, radix: 16))".utf8)
            case 1: return Array("0\(String(number, radix: 8))".utf8)
            case 2: return Array(" +\(number)".utf8)
            default: return Array(String(number).utf8)
            }
        }()
        var entries: [[UInt8]] = [
            Array("ACTION=\(pick(Array(UdevMonitorMessage.actions)))".utf8), Array("DEVPATH=".utf8) + devpath,
            Array("SUBSYSTEM=\(pick(["usb", "tty", "input", "hid", "block", ""]))".utf8),
            Array("SEQNUM=".utf8) + sequence,
        ]
        if chance(60) { entries.append(Array("DEVTYPE=".utf8) + pick([Array("usb_device".utf8), [], value()])) }
        if chance(60) {
            entries.append(
                Array("DEVNAME=".utf8) + pick([Array("/dev/bus/usb/001/002".utf8), Array("ttyUSB0".utf8), []]))
        }
        for _ in 0..<Int(random.next(below: 12)) {
            let key =
                chance(70) ? pick(keys) : String(decoding: word("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", 0...12), as: UTF8.self)
            if key == "DEVLINKS" {
                // udevd's form: distinct links, one space between them.
                let links = Set(
                    (0..<(1 + Int(random.next(below: 3)))).map { _ in
                        "/dev/" + String(decoding: word("abc/-", 1...12), as: UTF8.self)
                    })
                entries.append(Array("DEVLINKS=\(links.joined(separator: " "))".utf8))
            } else {
                entries.append(Array(key.utf8) + [UInt8(ascii: "=")] + value())
            }
        }
        entries.shuffle(using: &random)
        var kind = DatagramKind.wellFormed
        if chance(35) {
            kind = .broken
            switch random.next(below: 9) {
            case 0: entries.remove(at: Int(random.next(below: 4)))  // may drop a required field (or a repeat of one)
            case 1: entries.append(Array("ACTION=\(pick(["ADD", "plug", "", "add now"]))".utf8))
            case 2:
                entries.append(
                    Array("SEQNUM=\(pick(["0", "", "5 ", "-1", "0x", "08", "18446744073709551616", "1e3"]))".utf8))
            case 3: entries.append(word("ABC_", 1...8))  // no '='
            case 4: entries.append(Array("KEY\nX=1".utf8))  // cut at the line break: no '='
            case 5: entries.append(Array("DEVPATH=\(pick(["", "/", "devices/x", "//", "/."]))".utf8))
            case 6: entries.append([])  // an empty entry
            default: break  // header damage below
            }
        }
        var block: [UInt8] = entries.flatMap { entry -> [UInt8] in entry + [0] }
        var header = Array("libudev".utf8) + [0]
        header += withUnsafeBytes(of: UdevMonitorMessage.magic.bigEndian) { Array($0) }
        var offset = UInt32(UdevMonitorMessage.headerSize)
        if kind == .broken && chance(30) {
            switch random.next(below: 5) {
            case 0: header[8] ^= 0x01  // the magic
            case 1: header[3] = UInt8(ascii: "U")  // the prefix
            case 2: offset = pick([0, 32, 39, UInt32(40 + block.count), UInt32(40 + max(0, block.count - 20))])
            case 3: block.removeLast()  // the last NUL
            default: block = Array(block.prefix(Int(random.next(below: 8))))  // a datagram cut short
            }
        }
        header += withUnsafeBytes(of: UInt32(40)) { Array($0) }
        header += withUnsafeBytes(of: offset) { Array($0) }
        header += withUnsafeBytes(of: UInt32(block.count)) { Array($0) }
        header += [UInt8](repeating: 0, count: 16)
        if kind == .wellFormed && chance(2) {
            // The kernel's own format: "ACTION@DEVPATH" then the properties, no header.
            return (Array("add@/devices/x".utf8) + [UInt8(0)] + block, .kernelFormat)
        }
        if kind == .wellFormed && chance(2) {
            let parent: [UInt8] = ["ACTION=add", "DEVPATH=/devices/a/../b", "SUBSYSTEM=usb", "SEQNUM=9"]
                .flatMap { entry -> [UInt8] in Array(entry.utf8) + [0] }
            var datagram = header + parent
            datagram.withUnsafeMutableBytes {
                $0.storeBytes(of: UInt32(parent.count), toByteOffset: 20, as: UInt32.self)
            }
            return (datagram, .parentComponent)
        }
        return (header + block, kind)
    }
}
