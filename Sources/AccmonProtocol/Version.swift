/// accmon's release version, shared by the daemon, the CLI and the client library.
public enum AccmonVersion {
    /// The version string, such as `0.1.0`.
    public static let current = "0.1.0"
}
