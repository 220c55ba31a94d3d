public import AccmonJSON
import AccmonMQTT

/// One problem of the bridge's configuration file, as `file:line:column: reason` (the manifest's form).
public struct ConfigurationProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file's path.
    public var file: String
    /// Where in the file; 1:1 for a problem of the whole file (it cannot be read).
    public var position: SourcePosition
    /// What is wrong and, when it helps, what to write instead; never holds a control character.
    public var reason: String

    public init(file: String, position: SourcePosition, reason: String) {
        self.file = file
        self.position = position
        self.reason = escapingControlCharacters(reason)
    }

    /// `file:line:column: reason`.
    public var description: String { "\(file):\(position): \(reason)" }
}

/// Every problem found in a configuration file, in position order; its description is one line per problem.
public struct ConfigurationProblems: Error, Sendable, Hashable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]

    public init(_ problems: [ConfigurationProblem]) {
        self.problems = problems.enumerated().sorted {
            ($0.element.position, $0.offset) < ($1.element.position, $1.offset)
        }
        .map(\.element)
    }

    public var description: String { problems.map { "\($0)\n" }.joined() }
}

/// Reads the members of a JSON object of a configuration file, reporting each problem with its position.
struct ConfigurationReader {
    let file: String
    private(set) var problems: [ConfigurationProblem] = []

    init(file: String) { self.file = file }

    mutating func report(_ position: SourcePosition, _ reason: String) {
        problems.append(ConfigurationProblem(file: file, position: position, reason: reason))
    }

    /// The members of `node` by key, after reporting duplicates and keys not in `known` (with `refusals`' reasons
    /// for keys refused on purpose); `nil`, reported, when `node` is not an object.
    mutating func members(
        of node: PositionedJSON, known: [String], refusals: [String: String] = [:]
    ) -> [String: PositionedJSON.Member]? {
        guard case .object(let pairs) = node.value else {
            report(node.position, "the configuration must be a JSON object, found \(node.typeDescription)")
            return nil
        }
        var result: [String: PositionedJSON.Member] = [:]
        for pair in pairs {
            if let first = result[pair.key] {
                report(pair.keyPosition, "\(pair.key): appears twice (first at \(first.keyPosition)); keep one")
            } else if let refusal = refusals[pair.key] {
                report(pair.keyPosition, "\(pair.key): \(refusal)")
            } else if known.contains(pair.key) {
                result[pair.key] = pair
            } else {
                let close = known.first { $0.lowercased() == pair.key.lowercased() }
                let hint = close.map { " (did you mean '\($0)'?)" } ?? " (known keys: \(known.joined(separator: ", ")))"
                report(pair.keyPosition, "unknown key '\(shown(pair.key))'\(hint)")
            }
        }
        return result
    }

    /// The string in `member`, or `nil`, reported, for another type or an empty string.
    mutating func string(_ member: PositionedJSON.Member?) -> String? {
        guard let member else { return nil }
        guard case .string(let text) = member.value.value else {
            report(member.value.position, "\(member.key): expected a string, found \(member.value.typeDescription)")
            return nil
        }
        guard !text.isEmpty else {
            report(member.value.position, "\(member.key): is empty (remove the key for the default)")
            return nil
        }
        return text
    }

    /// The whole number in `member` within `range`, or `nil`, reported.
    mutating func integer(_ member: PositionedJSON.Member?, in range: ClosedRange<Int>) -> Int? {
        guard let member else { return nil }
        guard case .number(let text) = member.value.value, let number = Int(text), range.contains(number) else {
            report(
                member.value.position,
                "\(member.key): expected a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    /// The broker's addresses in `member` ("broker"): a URL, a comma-separated list of URLs, or an array of URLs, each
    /// problem reported at its element; `nil` when any was reported.
    mutating func brokerAddresses(_ member: PositionedJSON.Member) -> [BrokerAddress]? {
        switch member.value.value {
        case .string(let text):
            switch BrokerAddress.parseList(text) {
            case .success(let addresses): return addresses
            case .failure(let problem):
                report(member.value.position, "broker: \(problem.reason)")
                return nil
            }
        case .array(let elements):
            guard !elements.isEmpty else {
                report(member.value.position, "broker: an empty list: name at least one broker URL")
                return nil
            }
            var urls: [String] = []
            for (number, element) in elements.enumerated() {
                guard case .string(let url) = element.value else {
                    report(
                        element.position,
                        "broker: element \(number + 1): expected a URL string, found \(element.typeDescription)")
                    return nil
                }
                urls.append(url)
                if case .failure(let problem) = BrokerAddress.parseList(urls) {
                    report(element.position, "broker: element \(number + 1): \(problem.reason)")
                    return nil
                }
            }
            return try? BrokerAddress.parseList(urls).get()  // checked element by element above
        default:
            report(
                member.value.position,
                "broker: expected a URL or a list of URLs, found \(member.value.typeDescription)")
            return nil
        }
    }
}
