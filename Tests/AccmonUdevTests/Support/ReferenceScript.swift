import AccmonDevices
import AccmonProtocol
import Foundation

/// A script in `Tests/umockdev/` that gives the real udev's answers (libudev's, `usb_id`'s) for the suite to compare
/// with: run under `umockdev-wrapper`, it reads one question per line and writes one answer per line.
struct ReferenceScript {
    /// The file name, such as `usb_id.py`.
    var name: String

    /// The answers to `questions` (each one line, without its newline), one line each, in order.
    func answers(_ questions: [String]) throws -> [Substring] {
        try UdevEnvironment.check()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/umockdev-wrapper")
        process.arguments = [
            "/usr/bin/python3", Locations.repository.appendingPathComponent("Tests/umockdev/\(name)").path,
        ]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = Data(questions.map { $0 + "\n" }.joined().utf8)
        // Written from another thread: the answers fill the output pipe while the questions are still being written.
        let writer = Thread {
            input.fileHandleForWriting.write(text)
            try? input.fileHandleForWriting.close()  // try?: the reader sees end of input either way
        }
        writer.start()
        let answerData = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw UdevTestError(description: "\(name) failed: \(errorText)") }
        let lines = String(decoding: answerData, as: UTF8.self).split(separator: "\n")
        guard lines.count == questions.count else {
            throw UdevTestError(description: "\(name) answered \(lines.count) of \(questions.count): \(errorText)")
        }
        return lines
    }
}

extension ReferenceScript {
    /// The answers of a script that runs udev (`udevadm`) on one device per question and answers
    /// `{"properties": {NAME: VALUE in hex}}`: the properties accmond reads (``UdevProperty``), per device.
    func udevProperties<Device: Encodable>(_ devices: [Device]) throws -> [UdevProperties] {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/udevadm") else {
            throw UdevTestError(description: "udevadm is missing (Debian: apt-get install udev)")
        }
        let encoder = JSONEncoder()
        let lines = try answers(devices.map { String(decoding: try encoder.encode($0), as: UTF8.self) })
        return try lines.map { line in
            let answer = try JSONDecoder().decode([String: [String: String]].self, from: Data(line.utf8))
            var properties = UdevProperties()
            for property in UdevProperty.allCases {
                if let hex = answer["properties"]?[property.name] {
                    properties[property] = MonitorMessageAgreementTests.fromHex(hex)
                }
            }
            return properties
        }
    }
}
