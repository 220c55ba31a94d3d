import AccmonClient
import AccmonManifest
import AccmonOptions
import AccmonSys
import Glibc

/// `accmon manifest check`, `accmon manifest generate` and `accmon manifest reload`.
struct ManifestCommand: Command {
    static let name = "manifest"
    static let abstract = "Check, generate or reload the accessory manifest."
    static let usage = """
        Usage: accmon manifest check [FILE...] [--manifest PATH] [--manifest-dir DIR]
               accmon manifest generate [--hash] [--kind KIND] [--vendor ID] [--product ID] [--socket PATH]
               accmon manifest reload [--socket PATH]

        \(abstract)

        check      Parses and validates manifest files merged as accmond merges them: FILEs in the order given,
                   or else the main file then the drop-ins (*.json) in name order. Prints every problem to stderr
                   as `file:line:column: reason` and exits 65; prints a summary to stdout and exits 0 when there
                   is none. An unreadable file is a problem too (exit 65).
          --manifest PATH      the main file (default: \(Manifest.defaultPath))
          --manifest-dir DIR   the drop-in directory (default: \(Manifest.defaultDropInDirectory))

        generate   Prints a manifest that allows exactly the accessories connected now, rejected ones included
                   (asked of accmond with `list` and `all`: root and the manifest's admins only): each pinned by kind and id, then by serial number (Bluetooth: address) or else by USB
                   port; notes about loose pins go to stderr. The output passes `check`.
          --hash               also pin each USB accessory's descriptor hash (descriptorsSHA256)
        \(filterOptionsHelp)

        reload     Asks accmond to read its manifest again (as SIGHUP does). A manifest with problems is refused
                   with every problem listed, and the previous one stays in force (exit 65). Root and the
                   manifest's admins only (else exit 77).
        \(CommonOptions.help)

        Exit status: 0 ok, 64 usage error, 65 problems in the manifest, 69 accmond unreachable (generate, reload),
        77 not allowed (generate, reload).
        The format is described in docs/MANIFEST.md.

        """

    enum Action {
        case check(files: [String]?, main: String, directory: String)
        case generate(hash: Bool, filter: AccessoryFilter)
        case reload
    }

    var common: CommonOptions
    var action: Action

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        switch try arguments.next() {
        case "check":
            var files: [String] = []
            var main: String?
            var directory: String?
            while let argument = try arguments.next() {
                switch argument {
                case "--manifest": main = try arguments.value(for: argument)
                case "--manifest-dir": directory = try arguments.value(for: argument)
                case _ where arguments.isOption(argument):
                    throw UsageError("manifest check: unknown option '\(argument)'")
                default: files.append(argument)
                }
            }
            if !files.isEmpty, main != nil || directory != nil {
                throw UsageError("manifest check: give FILEs or --manifest/--manifest-dir, not both")
            }
            action = .check(
                files: files.isEmpty ? nil : files, main: main ?? Manifest.defaultPath,
                directory: directory ?? Manifest.defaultDropInDirectory)
        case "generate":
            var hash = false
            var filter = AccessoryFilter()
            while let option = try arguments.next() {
                if option == "--hash" {
                    hash = true
                } else if try !common.parse(option, &arguments),
                    try !parseFilterOption(option, &arguments, into: &filter)
                {
                    throw UsageError("manifest generate: unknown option '\(option)'")
                }
            }
            action = .generate(hash: hash, filter: filter)
        case "reload":
            while let option = try arguments.next() {
                if try !common.parse(option, &arguments) {
                    throw UsageError("manifest reload: unknown option '\(option)'")
                }
            }
            action = .reload
        case let other?:
            throw UsageError("manifest: unknown action '\(other)' (expected check, generate or reload)")
        case nil:
            throw UsageError("manifest: an action is required (check, generate or reload)")
        }
    }

    func run() async throws(AccmonError) {
        switch action {
        case .reload:
            let connection = try await common.connect()
            defer { connection.close() }
            try await connection.reloadManifest()
            writeOut("manifest reloaded\n")
        case .check(let files, let main, let directory):
            check(files: files, main: main, directory: directory)
        case .generate(let hash, let filter):
            let connection = try await common.connect()
            let snapshot = try await connection.list(filter, includeRejected: true)
            connection.close()
            let output = ManifestGenerator.generate(from: snapshot.accessories, pinDescriptorHashes: hash)
            for note in output.notes { writeError("accmon manifest generate: note: \(note)\n") }
            writeOut(output.text)
        }
    }

    /// Reads, parses and reports; exits 65 on any problem.
    func check(files paths: [String]?, main: String, directory: String) {
        let (order, listing) = ManifestFiles.paths(explicit: paths, main: main, directory: directory)
        let (files, unreadable) = ManifestFiles.read(order)
        var problems = listing + unreadable
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
