import AccmonClient
import AccmonCore
import AccmonSys
import Glibc

/// `accmon manifest check` and `accmon manifest generate`.
struct ManifestCommand: Command {
    static let name = "manifest"
    static let abstract = "Check the accessory manifest, or generate one for the accessories connected now."
    static let usage = """
        Usage: accmon manifest check [FILE...] [--manifest PATH] [--manifest-dir DIR]
               accmon manifest generate [--hash] [--kind KIND] [--vendor ID] [--product ID] [--socket PATH]

        \(abstract)

        check      Parses and validates manifest files merged as accmond merges them: FILEs in the order given,
                   or else the main file then the drop-ins (*.json) in name order. Prints every problem to stderr
                   as `file:line:column: reason` and exits 65; prints a summary to stdout and exits 0 when there
                   is none. An unreadable file is a problem too (exit 65).
          --manifest PATH      the main file (default: \(Manifest.defaultPath))
          --manifest-dir DIR   the drop-in directory (default: \(Manifest.defaultDropInDirectory))

        generate   Prints a manifest that allows exactly the accessories connected now (asked of accmond with
                   `list`): each pinned by kind and id, then by serial number (Bluetooth: address) or else by USB
                   port; notes about loose pins go to stderr. The output passes `check`.
          --hash               also pin each USB accessory's descriptor hash (descriptorsSHA256)
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Exit status: 0 ok, 64 usage error, 65 problems in the manifest, 69 accmond unreachable (generate).
        The format is described in docs/MANIFEST.md.

        """

    enum Action {
        case check(files: [String]?, main: String, directory: String)
        case generate(hash: Bool, filter: AccessoryFilter)
    }

    var common: CommonOptions
    var action: Action

    init(_ arguments: inout Arguments, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        switch arguments.next() {
        case "check":
            var files: [String] = []
            var main: String?
            var directory: String?
            while let argument = arguments.next() {
                switch argument {
                case "--manifest": main = try arguments.value(for: argument)
                case "--manifest-dir": directory = try arguments.value(for: argument)
                case "--": while let file = arguments.next() { files.append(file) }
                case _ where argument.hasPrefix("-") && argument != "-":
                    throw UsageError(message: "manifest check: unknown option '\(argument)'")
                default: files.append(argument)
                }
            }
            if !files.isEmpty, main != nil || directory != nil {
                throw UsageError(message: "manifest check: give FILEs or --manifest/--manifest-dir, not both")
            }
            action = .check(
                files: files.isEmpty ? nil : files, main: main ?? Manifest.defaultPath,
                directory: directory ?? Manifest.defaultDropInDirectory)
        case "generate":
            var hash = false
            var filter = AccessoryFilter()
            while let option = arguments.next() {
                if option == "--hash" {
                    hash = true
                } else if try !common.parse(option, &arguments),
                    try !parseFilterOption(option, &arguments, into: &filter)
                {
                    throw UsageError(message: "manifest generate: unknown option '\(option)'")
                }
            }
            action = .generate(hash: hash, filter: filter)
        case let other?:
            throw UsageError(message: "manifest: unknown action '\(other)' (expected check or generate)")
        case nil:
            throw UsageError(message: "manifest: an action is required (check or generate)")
        }
    }

    func run() async throws(AccmonError) {
        switch action {
        case .check(let files, let main, let directory):
            check(files: files, main: main, directory: directory)
        case .generate(let hash, let filter):
            let connection = try await common.connect()
            let snapshot = try await connection.list(filter)
            connection.close()
            let output = ManifestGenerator.generate(from: snapshot.accessories, pinDescriptorHashes: hash)
            for note in output.notes { writeError("accmon manifest generate: note: \(note)\n") }
            writeOut(output.text)
        }
    }

    /// Reads, parses and reports; exits 65 on any problem.
    func check(files paths: [String]?, main: String, directory: String) {
        var files: [ManifestFile] = []
        var unreadable: [ManifestProblem] = []
        var order: [String] = []
        let chosen: [String]
        if let paths {
            chosen = paths
        } else {
            switch listDirectory(directory) {
            case .success(let names): chosen = [main] + Manifest.orderedDropIns(names).map { "\(directory)/\($0)" }
            case .failure(let problem):
                chosen = [main]
                unreadable.append(problem)
            }
        }
        for path in chosen {
            order.append(path)
            switch readManifestFile(path) {
            case .success(let bytes): files.append(ManifestFile(path: path, contents: bytes))
            case .failure(let problem): unreadable.append(problem)
            }
        }
        var problems = unreadable
        switch Manifest.parse(files: files) {
        case .success(let manifest) where problems.isEmpty:
            let count = manifest.entries.count
            writeOut(
                "ok: \(files.count) \(files.count == 1 ? "file" : "files"), \(count) "
                    + "\(count == 1 ? "entry" : "entries")"
                    + "\(manifest.admins.isEmpty ? "" : ", admins: \(describe(manifest.admins))")\n")
            return
        case .success:
            break
        case .failure(let found):
            problems += found.problems
        }
        // In the order the files were given, then by position; a problem about the drop-in directory first.
        let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let sorted = problems.enumerated().sorted {
            (rank[$0.element.file] ?? -1, $0.element.position, $0.offset)
                < (rank[$1.element.file] ?? -1, $1.element.position, $1.offset)
        }
        writeError(sorted.map { "\($0.element)\n" }.joined())
        exit(.dataError)
    }

    func describe(_ list: AccessList) -> String {
        (list.users.map { "user \($0)" } + list.groups.map { "group \($0)" }).joined(separator: ", ")
    }
}


/// The largest manifest file read; a bigger one is a problem, not a reason to use all memory.
let maximumManifestFileSize = 4 << 20

/// Reads a whole file; a failure becomes a problem at 1:1 with the `strerror` text.
func readManifestFile(_ path: String) -> Result<[UInt8], ManifestProblem> {
    func failure(_ reason: String) -> Result<[UInt8], ManifestProblem> {
        .failure(.unreadable(file: path, reason: reason))
    }
    var descriptor: Int32
    repeat { descriptor = open(path, O_RDONLY | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
    guard descriptor >= 0 else { return failure(Errno.current.description) }
    let file = FileDescriptor(rawValue: descriptor)
    defer { file.close() }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else { return failure(Errno.current.description) }
    if status.st_mode & S_IFMT == S_IFDIR { return failure(Errno(rawValue: EISDIR).description) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { buffer in read(descriptor, buffer.baseAddress, buffer.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return failure(Errno.current.description)
        }
        if count == 0 { return .success(bytes) }
        bytes += chunk[..<count]
        if bytes.count > maximumManifestFileSize { return failure("larger than \(maximumManifestFileSize >> 20) MiB") }
    }
}

/// The names in a directory (not `.` and `..`); no directory is no drop-ins, other failures are a problem.
func listDirectory(_ path: String) -> Result<[String], ManifestProblem> {
    guard let directory = opendir(path) else {
        if errno == ENOENT { return .success([]) }
        return .failure(
            ManifestProblem(
                .unreadable, file: path, position: .start, reason: "cannot read the drop-in directory: \(Errno.current)"
            ))
    }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
            pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return .success(names)
}
