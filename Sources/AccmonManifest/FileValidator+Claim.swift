import AccmonJSON

extension FileValidator {
    // MARK: Claims

    static let claimKeys = ["users", "groups", "remote", "grant", "returnSeconds", "maxSeconds"]
    /// The longest `returnSeconds` and `maxSeconds` (a year): beyond that a typo is likelier than a wish.
    static let longestClaimSeconds = 31_536_000.0

    /// An entry's `claim`: `{"users": [...], "groups": [...], "remote": [...], "grant": false, "returnSeconds": 10,
    /// "maxSeconds": 3600}`, every key optional.
    mutating func claim(_ node: PositionedJSON, _ context: String) -> ClaimPolicy? {
        guard let members = members(of: node, context, Self.claimKeys) else { return nil }
        let before = problems.count
        var policy = ClaimPolicy()
        if members["users"] != nil || members["groups"] != nil {
            // The access-list parser reads only these two keys: hand it an object of them alone.
            guard case .object(let pairs) = node.value else { return nil }
            let list = PositionedJSON(
                .object(pairs.filter { $0.key == "users" || $0.key == "groups" }), at: node.position)
            policy.access = accessList(list, context, emptyHint: "remove the key to let whoever sees it claim")
        }
        if let member = members["remote"] {
            (policy.remote, policy.remoteAs) = remoteUsers(member.value, "\(context).remote")
        }
        if let member = members["grant"] {
            if case .bool(let value) = member.value.value {
                policy.grant = value
            } else {
                report(
                    .wrongType, member.value.position,
                    "\(context).grant: expected true or false, found \(member.value.typeDescription)")
            }
        }
        if let member = members["returnSeconds"] {
            policy.returnSeconds = seconds(member.value, "\(context).returnSeconds", allowZero: true) ?? 0
        }
        if let member = members["maxSeconds"] {
            policy.maxSeconds = seconds(member.value, "\(context).maxSeconds", allowZero: false)
        }
        return problems.count == before ? policy : nil
    }

    static let remoteUserKeys = ["user", "as"]

    /// MQTT user names: 1 to 255 bytes of UTF-8, no control character, no `+`, `#` or `/` (they could not be a topic
    /// level of their own); each a string, or `{"user": "ci", "as": "ci-runner"}` to map it to a local user.
    private mutating func remoteUsers(_ node: PositionedJSON, _ context: String) -> ([String], [String: Principal]) {
        guard case .array(let elements) = node.value else {
            report(
                .wrongType, node.position,
                "\(context): expected an array of MQTT user names, such as [\"ci\"], found \(node.typeDescription)")
            return ([], [:])
        }
        guard !elements.isEmpty else {
            report(.empty, node.position, "\(context): the list is empty: name at least one MQTT user, or remove the key")
            return ([], [:])
        }
        var users: [String] = []
        var mapped: [String: Principal] = [:]
        for element in elements {
            var item = element
            var local: Principal?
            if case .object = element.value {
                guard let members = members(of: element, context, Self.remoteUserKeys) else { continue }
                guard let user = members["user"] else {
                    report(.missingKey, element.position, "\(context): missing key 'user' (the MQTT user name)")
                    continue
                }
                item = user.value
                if let target = members["as"] {
                    guard let principal = principal(target.value, "\(context).as", "user") else { continue }
                    local = principal
                }
            }
            guard let name = string(item, context) else { continue }
            let bytes = Array(name.utf8)
            if bytes.isEmpty || bytes.count > 255
                || bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0x2B || $0 == 0x23 || $0 == 0x2F })
            {
                report(
                    .invalidValue, element.position,
                    "\(context): '\(shown(name))' is not an MQTT user name accmon takes: 1 to 255 bytes without "
                        + "control characters, '+', '#' or '/'")
                continue
            }
            if users.contains(name) {
                report(.invalidValue, element.position, "\(context): '\(shown(name))' is listed twice")
                continue
            }
            users.append(name)
            if let local { mapped[name] = local }
        }
        return (users, mapped)
    }

    /// A number of seconds: from 0 (when allowed) or above 0, to a year.
    private mutating func seconds(_ node: PositionedJSON, _ context: String, allowZero: Bool) -> Double? {
        guard case .number(let text) = node.value, let value = Double(text) else {
            report(.wrongType, node.position, "\(context): expected a number of seconds, found \(node.typeDescription)")
            return nil
        }
        guard allowZero ? value >= 0 : value > 0, value <= Self.longestClaimSeconds else {
            report(
                .invalidValue, node.position,
                "\(context): \(text) is out of range (\(allowZero ? "0" : "more than 0") to "
                    + "\(Int(Self.longestClaimSeconds)) seconds)")
            return nil
        }
        return value
    }
}
