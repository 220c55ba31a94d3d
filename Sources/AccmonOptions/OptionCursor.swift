/// A usage error: what was wrong with the command line, shown as `Error: <message>` above the usage text.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }

    /// What a program prints on standard error for it: the error, the usage, and where to read more.
    public func report(usage: String, helpCommand: String) -> String {
        "Error: \(message)\n\(usage)See '\(helpCommand) --help'.\n"
    }
}

/// A cursor over command-line arguments, with the rules every accmon program follows.
///
/// - An option's value is the next argument, or what follows `=` in `--name=value`.
/// - A separate value may not start with `--`: `--socket --simulate` is a forgotten value, not a socket named
///   `--simulate`. A value that really starts with `--` is written `--socket=--odd`.
/// - An option that takes no value refuses one given with `=` (``flag(_:)``).
/// - `--` ends the options: everything after it is an operand.
public struct OptionCursor: Sendable {
    private var remaining: ArraySlice<String>
    /// The value given with `=` to the option ``next()`` returned last.
    private var attached: String?
    /// The option ``next()`` returned last.
    private var current: String?
    private var optionsEnded = false

    public init(_ arguments: [String]) { remaining = arguments[...] }

    /// Whether every argument was taken.
    public var isEmpty: Bool { remaining.isEmpty }

    /// The next argument, with a `--name=value` option returned as `--name` (its value waits for ``value(for:)``).
    /// After `--`, every argument is returned as it is and ``isOption(_:)`` is false for it.
    public mutating func next() throws(UsageError) -> String? {
        if let current, let attached {
            throw UsageError("\(current) takes no value (given '\(attached)')")
        }
        attached = nil
        current = nil
        guard let argument = remaining.popFirst() else { return nil }
        if optionsEnded { return argument }
        if argument == "--" {
            optionsEnded = true
            return try next()
        }
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            attached = String(argument[argument.index(after: equals)...])
            current = String(argument[..<equals])
            return current
        }
        current = argument.hasPrefix("-") && argument.count > 1 ? argument : nil
        return argument
    }

    /// Whether `argument` (as ``next()`` returned it) is an option rather than an operand.
    public func isOption(_ argument: String) -> Bool {
        !optionsEnded && argument.count > 1 && argument.hasPrefix("-")
    }

    /// The value of `option`: its `=` part, or the next argument.
    public mutating func value(for option: String) throws(UsageError) -> String {
        if let value = attached {
            attached = nil
            current = nil
            return value
        }
        current = nil
        guard let value = remaining.first, !value.hasPrefix("--") || optionsEnded else {
            throw UsageError("\(option) needs a value")
        }
        remaining.removeFirst()
        return value
    }

    /// The value of `option` as an integer within `range`.
    public mutating func integer(for option: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        let text = try value(for: option)
        guard let number = Int(text), range.contains(number) else {
            throw UsageError("\(option): '\(text)' is not a whole number \(Self.describe(range))")
        }
        return number
    }

    /// The value of `option` as a number of seconds within `range`.
    public mutating func seconds(for option: String, in range: ClosedRange<Double>) throws(UsageError) -> Double {
        let text = try value(for: option)
        guard let seconds = Double(text), seconds.isFinite, range.contains(seconds) else {
            let bounds =
                range.upperBound == .greatestFiniteMagnitude
                ? "≥ \(Self.shown(range.lowerBound))"
                : "from \(Self.shown(range.lowerBound)) to \(Self.shown(range.upperBound))"
            throw UsageError("\(option): '\(text)' is not a number of seconds \(bounds)")
        }
        return seconds
    }

    /// The value of `option` as one of `choices`' raw values.
    public mutating func choice<Choice: RawRepresentable & CaseIterable>(
        for option: String, of: Choice.Type
    ) throws(UsageError) -> Choice where Choice.RawValue == String {
        let text = try value(for: option)
        guard let chosen = Choice(rawValue: text) else {
            let names = Choice.allCases.map(\.rawValue).joined(separator: ", ")
            throw UsageError("\(option): '\(text)' is not one of \(names)")
        }
        return chosen
    }

    /// The next option of a command line that ends with a command to run (`accmon claim [OPTIONS] [--] COMMAND`):
    /// `nil` at the end, or once the first operand came, which with every argument after it (as ``next()`` returns
    /// them) is then `command`.
    public mutating func nextOption(commandInto command: inout [String]) throws(UsageError) -> String? {
        guard let argument = try next() else { return nil }
        guard isOption(argument) else {
            command = [argument]
            while let operand = try next() { command.append(operand) }
            return nil
        }
        return argument
    }

    /// Everything not taken yet, as given.
    public mutating func rest() -> [String] {
        defer { remaining = [] }
        return Array(remaining)
    }

    private static func describe(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == .max { return "≥ \(range.lowerBound)" }
        return "from \(range.lowerBound) to \(range.upperBound)"
    }

    private static func shown(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
