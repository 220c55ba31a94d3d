import AccmonClient
import AccmonManifest
import AccmonSys
import Glibc

/// Exit codes after sysexits.h.
enum ExitCode: Int32 {
    case success = 0
    case failure = 1
    case usage = 64
    case dataError = 65
    case unavailable = 69
    case timedOut = 75
    case permissionDenied = 77

    /// The exit code for a client library error.
    init(_ error: AccmonError) {
        switch error.code {
        case .daemonUnavailable, .daemonStopped, .connectionClosed: self = .unavailable
        case .permissionDenied: self = .permissionDenied
        case .requestFailed where error.protocolError?.code == .permissionDenied: self = .permissionDenied
        case .requestFailed where error.protocolError?.code == .manifestInvalid: self = .dataError
        default: self = .failure
        }
    }
}

func writeOut(_ text: String) {
    try? FileDescriptor.standardOutput.writeAll(text.utf8)  // try?: a closed stdout (a pipe to head) ends us anyway
}

func writeOut(_ bytes: [UInt8]) {
    try? FileDescriptor.standardOutput.writeAll(bytes)  // try?: as for text
}

func writeError(_ text: String) {
    try? FileDescriptor.standardError.writeAll(text.utf8)  // try?: nowhere left to report it
}

func exit(_ code: ExitCode) -> Never {
    Glibc.exit(code.rawValue)
}
