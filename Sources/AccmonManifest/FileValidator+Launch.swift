import AccmonJSON

extension FileValidator {
    // MARK: Launch and relaunch

    static let launchKeys = ["unit", "keep"]
    static let relaunchKeys = ["unit", "access"]

    /// An entry's `launch`: `{"unit": "accmon-NAME@.service", "keep": false}`.
    mutating func launch(_ node: PositionedJSON, _ context: String) -> LaunchSpec? {
        guard let members = members(of: node, context, Self.launchKeys) else { return nil }
        let before = problems.count
        var keep = false
        if let member = members["keep"] {
            if case .bool(let value) = member.value.value {
                keep = value
            } else {
                report(
                    .wrongType, member.value.position,
                    "\(context).keep: expected true or false, found \(member.value.typeDescription)")
            }
        }
        guard let member = members["unit"] else {
            report(
                .missingKey, node.position,
                "\(context): missing key 'unit' (the template to start, such as \"accmon-flasher@.service\")")
            return nil
        }
        let unit = template(member.value, "\(context).unit")
        guard problems.count == before, let unit else { return nil }
        return LaunchSpec(unit: unit, keep: keep)
    }

    /// The top-level `relaunch`: `[{"unit": "accmon-NAME@.service", "access": {"users": [...]}}, ...]`.
    mutating func relaunch(_ node: PositionedJSON) -> [RelaunchPermission] {
        guard case .array(let elements) = node.value else {
            report(
                .wrongType, node.position,
                "relaunch: expected an array of {\"unit\": ..., \"access\": {...}}, found \(node.typeDescription)")
            return []
        }
        var result: [RelaunchPermission] = []
        for (index, element) in elements.enumerated() {
            let context = "relaunch #\(index + 1)"
            guard let members = members(of: element, context, Self.relaunchKeys) else { continue }
            let before = problems.count
            var unit: LaunchTemplate?
            if let member = members["unit"] {
                unit = template(member.value, "\(context).unit")
            } else {
                report(.missingKey, element.position, "\(context): missing key 'unit' (the template users may register)")
            }
            var access: AccessList?
            if let member = members["access"] {
                access = accessList(
                    member.value, "\(context).access", emptyHint: "name the users or groups who may register the unit")
            } else {
                report(
                    .missingKey, element.position,
                    "\(context): missing key 'access' (the users or groups who may register the unit)")
            }
            if problems.count == before, let unit, let access {
                result.append(
                    RelaunchPermission(
                        unit: unit, access: access, location: ManifestLocation(file: path, position: element.position)))
            }
        }
        return result
    }

    /// A template of the form accmond may start; reported otherwise.
    mutating func template(_ node: PositionedJSON, _ context: String) -> LaunchTemplate? {
        guard let text = string(node, context) else { return nil }
        if let problem = LaunchTemplate.problem(with: text) {
            report(.invalidValue, node.position, "\(context): '\(shown(text))' is refused: \(problem)")
            return nil
        }
        return LaunchTemplate(text)
    }
}
