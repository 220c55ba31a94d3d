extension Accessory: Codable {
    /// Decodes an accessory; only `kind` is required, absent fields are empty and a missing `accessoryID` is derived.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Field.self)
        self.init(kind: try container.decode(AccessoryKind.self, forKey: .kind))
        var hasAccessoryID = false
        for field in Field.allCases where field != .kind && container.contains(field) {
            let value: FieldValue?
            switch field.shape {
            case .text: value = try container.decodeIfPresent(String.self, forKey: field).map(FieldValue.text)
            case .texts: value = try container.decodeIfPresent([String].self, forKey: field).map(FieldValue.texts)
            case .number:
                value = try container.decodeIfPresent(ConnectionID.self, forKey: field).map { .number($0.rawValue) }
            }
            guard let value else { continue }  // null: as absent
            set(field, to: value)
            hasAccessoryID = hasAccessoryID || field == .accessoryID
        }
        if !hasAccessoryID { accessoryID = derivedAccessoryID }
    }

    /// Encodes every field, empty ones included, so that clients see a fixed shape.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Field.self)
        for field in Field.allCases {
            switch self[field] {
            case .text(let text): try container.encode(text, forKey: field)
            case .texts(let texts): try container.encode(texts, forKey: field)
            case .number(let number): try container.encode(ConnectionID(number), forKey: field)
            }
        }
    }
}
