import AccmonSystemd

/// The checks every bus method's options (`a{sv}`) get before their values are read: an `a{sv}`, each option known,
/// given once and of its declared type. Pure.
enum BusOptionEntries {
    /// The entries of `value`, checked against `known` (each option's name and D-Bus signature); `method` names the
    /// call in errors.
    /// - Throws: ``BusError/Name/invalidArguments`` for a value that is not an `a{sv}`,
    ///   ``BusError/Name/invalidOption`` naming the option and what is wrong with it.
    static func checked(
        _ value: BusValue, method: String, known: [(name: String, signature: String)]
    ) throws(BusError) -> [(key: String, value: BusValue)] {
        guard let entries = value.stringKeyedEntries else {
            throw BusError(.invalidArguments, "\(method): options: expected an a{sv}, not '\(value.signature)'")
        }
        var seen: Set<String> = []
        for (key, option) in entries {
            guard let expected = known.first(where: { $0.name == key })?.signature else {
                throw BusError(
                    .invalidOption,
                    "\(method): options: unknown option '\(key)' (known: \(known.map(\.name).joined(separator: ", ")))")
            }
            guard seen.insert(key).inserted else {
                throw BusError(.invalidOption, "\(method): options: '\(key)' is given twice")
            }
            guard option.signature == expected else {
                throw BusError(
                    .invalidOption, "\(method): options: '\(key)' must be of type '\(expected)', not '\(option.signature)'")
            }
        }
        return entries
    }
}
