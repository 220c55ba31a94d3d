import AccmonLogging
import AccmonSys
import AccmonSystemd
import AccmondKit
import Glibc

/// Adapts `configuration` to the service manager that started accmond, if any: logs to the journal when standard
/// error is the journal, and serves the socket that socket activation passed instead of binding one.
///
/// - Important: call it first thing, before any thread starts: taking the passed sockets unsets `LISTEN_FDS`.
func adoptServiceManager(_ configuration: inout DaemonConfiguration) {
    if Journal.standardErrorIsJournal { configuration.logger.destination = .journal }
    let passed: [FileDescriptor]
    do {
        passed = try ServiceManager.takePassedDescriptors()
    } catch {
        startFailure(configuration, "accmond: socket activation: LISTEN_FDS: \(error)")
    }
    guard let descriptor = passed.first else { return }
    guard passed.count == 1 else {
        startFailure(
            configuration,
            "accmond: socket activation: expected 1 socket, got \(passed.count) (accmond.socket must have one"
                + " ListenStream=)")
    }
    let isListener: Bool
    do {
        isListener = try ServiceManager.isListeningUnixStreamSocket(descriptor)
    } catch {
        startFailure(configuration, "accmond: socket activation: fd \(descriptor.rawValue): \(error)")
    }
    guard isListener else {
        startFailure(
            configuration,
            "accmond: socket activation: fd \(descriptor.rawValue): not a listening AF_UNIX stream socket"
                + " (accmond.socket needs ListenStream=/run/accmon/accmon.sock)")
    }
    let path = ServiceManager.boundPath(of: descriptor) ?? "fd \(descriptor.rawValue)"
    if path != configuration.socketPath {
        configuration.logger.info(
            .started,
            "socket activation: serving \(path) from the service manager instead of \(configuration.socketPath)")
    }
    configuration.inheritedListener = InheritedListener(descriptor: descriptor, path: path)
}

private func startFailure(_ configuration: DaemonConfiguration, _ message: String) -> Never {
    configuration.logger.critical(.startFailed, message)
    exit(1)
}
