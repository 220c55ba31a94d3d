import AccmonOptions
import Testing

/// A command line that ends with a command to run (`accmon claim`, `accmon open`): its options, then the command.
@Suite struct OptionCursorTests {
    private func split(_ arguments: [String]) throws -> (options: [String], command: [String]) {
        var cursor = OptionCursor(arguments)
        var options: [String] = []
        var command: [String] = []
        while let option = try cursor.nextOption(commandInto: &command) {
            options.append(option == "--reason" ? "\(option)=\(try cursor.value(for: option))" : option)
        }
        return (options, command)
    }

    @Test func theFirstOperandBeginsTheCommandWithEverythingAfterIt() throws {
        let plain = try split(["--wait", "--reason", "flash", "picocom", "--baud", "115200", "-q"])
        #expect(plain.options == ["--wait", "--reason=flash"])
        #expect(plain.command == ["picocom", "--baud", "115200", "-q"])
        let ended = try split(["--wait", "--", "--odd-command", "x"])
        #expect(ended.options == ["--wait"] && ended.command == ["--odd-command", "x"])
        let none = try split(["--wait", "--reason=r"])
        #expect(none.options == ["--wait", "--reason=r"] && none.command.isEmpty)
    }
}
