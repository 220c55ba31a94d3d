public import AccmonSys

/// What holds device nodes for accmond's claims: ``NodeKeeper`` in-process (simulated accessories, whose nodes are
/// the test's files), or ``NodeHelperLink`` to the privileged helper `accmon-nodes` (real devices). Both are blocking
/// and belong to one thread: call them from a thread of their own, never from the broker's loop.
public protocol NodeControl: AnyObject {
    /// Applies the claim of `holder` to the node at `path` (``NodeState/enforced(holder:)``), or applies it again
    /// when held already; a state found rewritten since (udev, logind) becomes the state to restore.
    func hold(_ path: String, holder: NodeHolder) throws(NodeError) -> HoldOutcome
    /// Restores the node at `path` to its state before the claim (or what udev and logind rewrote it to since), and
    /// forgets it. A node that is gone, or is another inode now (re-enumerated), has nothing to restore.
    func release(_ path: String) throws(NodeError) -> ReleaseOutcome
    /// Releases every held node; one result per node, failures included.
    func releaseAll() throws(NodeError) -> [ReleaseResult]
    /// The processes that have the node at `path` open: pid, uid, command.
    func openers(of path: String) throws(NodeError) -> [NodeOpener]
    /// The openers of each of `paths`, in order; a node that cannot be looked at (gone, refused) has none.
    func openers(ofEach paths: [String]) -> [[NodeOpener]]
    /// Cuts every open descriptor of the held node at `path` where Linux can, and says how, or why not.
    func cut(_ path: String) throws(NodeError) -> CutOutcome
    /// Marks the USB port `port` (`1-1.2`) as claimed: the shipped udev rule makes nodes that appear on it root-only
    /// until a claim applies to them.
    func markPort(_ port: String) throws(NodeError)
    /// Removes the mark of `port`; returns the devices whose nodes udev was then asked to set up again (a `change`
    /// event), those that appeared while the port was marked and were released since.
    @discardableResult
    func unmarkPort(_ port: String) throws(NodeError) -> [String]
    /// The held nodes and the marked ports.
    func held() throws(NodeError) -> HeldState
    /// The node's permissions without any claim: the state a release would restore while it is held, else the state
    /// found (the device checked as ``hold(_:holder:)`` checks it). Changes nothing. What a user could open by its
    /// own permissions, before a claim gives it any.
    func unclaimedState(of path: String) throws(NodeError) -> NodeState
    /// Opens the held node at `path` for I/O and returns the descriptor (the caller closes it): `O_RDWR`, or
    /// `O_RDONLY` with `readOnly`, with `O_NOCTTY | O_NONBLOCK | O_CLOEXEC` (a tty without `CLOCAL` would block an
    /// open that waits for carrier, and must not become the opener's controlling terminal). Only a held node is
    /// opened: what a claim hands its holder.
    func openForIO(_ path: String, readOnly: Bool) throws(NodeError) -> FileDescriptor
}

extension NodeControl {
    /// One ``openers(of:)`` per path.
    public func openers(ofEach paths: [String]) -> [[NodeOpener]] {
        paths.map { (try? openers(of: $0)) ?? [] }  // try?: a node that cannot be looked at has no opener to name
    }
}

/// Why a node operation failed: `context: object: reason` (`hold: /dev/ttyUSB0: not a character device (a
/// regular file)`), and a code a program can act on.
public struct NodeError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// What kind of failure, on the wire as its `rawValue`.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The node is outside what this keeper may touch: outside its directory, a symbolic link on the way, a
        /// type it does not handle. Nothing was changed.
        public static let refused = Code(rawValue: "refused")
        /// The node's device is not one udev marked for accmon (`ACCMON_KIND`). Nothing was changed.
        public static let notMarked = Code(rawValue: "not-marked")
        /// No node at that path.
        public static let missing = Code(rawValue: "missing")
        /// The node is not held (release, cut).
        public static let notHeld = Code(rawValue: "not-held")
        /// The system refused a change (no privilege to change an owner, say).
        public static let notPermitted = Code(rawValue: "not-permitted")
        /// A system call failed, or a change did not take.
        public static let failed = Code(rawValue: "failed")
        /// The node's file system has no POSIX ACLs (devpts): a claim cannot keep the holder's access on it.
        public static let noACLs = Code(rawValue: "no-acls")
        /// A limit was reached (held nodes).
        public static let tooMany = Code(rawValue: "too-many")
        /// A request the helper cannot read, or not of its protocol version.
        public static let badRequest = Code(rawValue: "bad-request")
        /// The helper could not be reached, or closed the connection, or did not answer in time.
        public static let unavailable = Code(rawValue: "unavailable")
    }

    public var code: Code
    /// The operation: `hold`, `release`, `cut`...
    public var context: String
    /// The node's path, the port, the helper's socket.
    public var object: String
    public var reason: String

    public init(_ code: Code, _ context: String, _ object: String, _ reason: String) {
        self.code = code
        self.context = context
        self.object = object
        self.reason = reason
    }

    public var description: String { "\(context): \(object): \(reason)" }
}

/// What ``NodeControl/hold(_:holder:)`` did.
public struct HoldOutcome: Sendable, Hashable, Codable {
    public enum Change: String, Sendable, Hashable, Codable {
        /// The node was not held: its state was recorded and the claim applied.
        case applied
        /// Held already, for the same holder, and found as the claim left it: nothing was changed.
        case unchanged
        /// Held already, for another holder: applied again for this one.
        case reapplied
        /// Held already, and found rewritten since (udev, logind): the rewrite is what release restores now, and
        /// the claim was applied again.
        case rewriteAdopted = "rewrite-adopted"
    }

    public var path: String
    public var change: Change
    /// The state release restores.
    public var original: NodeState
    /// The state while held.
    public var applied: NodeState
    /// An earlier record of this path was for another inode, a node since re-created (re-enumerated): it was
    /// dropped, and this node's state as found is its original.
    public var replacedNode: Bool
    /// The node appeared on a claimed port (the udev rule made it root-only): release asks udev to set it up again
    /// once the port is unmarked, rather than restoring the root-only state it was found in.
    public var restoresThroughUdev: Bool
}

/// What ``NodeControl/release(_:)`` did.
public struct ReleaseOutcome: Sendable, Hashable, Codable {
    public enum Result: String, Sendable, Hashable, Codable {
        /// The node's state was restored.
        case restored
        /// The node is gone, or is another inode now: nothing to restore (udev set the new one up).
        case gone
    }

    /// Whether udev was asked to set the node up again (`change`), now or when its port is unmarked.
    public enum UdevChange: String, Sendable, Hashable, Codable {
        case none, triggered
        case afterUnmark = "after-unmark"
    }

    public var path: String
    public var result: Result
    /// The state restored; `nil` when gone.
    public var restored: NodeState?
    /// The node was found rewritten since the claim applied, and restored to the rewrite.
    public var rewriteAdopted: Bool
    public var udevChange: UdevChange
}

/// One node's result of ``NodeControl/releaseAll()``: an outcome or an error.
public struct ReleaseResult: Sendable, Hashable, Codable {
    public var path: String
    public var outcome: ReleaseOutcome?
    public var error: NodeError?
}

/// A process that has a node open.
public struct NodeOpener: Sendable, Hashable, Codable, CustomStringConvertible {
    public var pid: Int32
    /// Its real uid.
    public var uid: UInt32
    /// Its command name (`/proc/PID/comm`, at most 15 bytes).
    public var command: String

    public init(pid: Int32, uid: UInt32, command: String) {
        self.pid = pid
        self.uid = uid
        self.command = command
    }

    public var description: String { "pid \(pid) (uid \(uid), \(command))" }
}

/// What ``NodeControl/cut(_:)`` did.
public struct CutOutcome: Sendable, Hashable, Codable {
    public enum Method: String, Sendable, Hashable, Codable {
        /// A terminal hung up (`TIOCVHANGUP`): every descriptor of it reads end of file, writes fail with `EIO`.
        case hungUp = "hung-up"
        /// The USB device was de-authorized and authorized again (sysfs `authorized`): its interfaces' drivers were
        /// unbound, which removed their nodes (a tty is hung up for every descriptor), and bound again as new nodes.
        case reauthorized
        /// The USB device's hub port was disabled and enabled again (its `disable` attribute): the device was
        /// disconnected (every descriptor of its nodes, usbfs included, fails with `ENODEV`) and comes back as a new
        /// device.
        case portDisabled = "port-disabled"
        /// Nothing was cut; ``reason`` says why.
        case notCut = "not-cut"
    }

    public var path: String
    public var method: Method
    /// The USB device re-authorized or disconnected (its sysfs path).
    public var usbDevice: String?
    /// The hub port disabled and enabled again (its sysfs path).
    public var hubPort: String?
    /// Why nothing was cut; for a cut, what did not go as expected (nodes not back in time).
    public var reason: String?

    public init(
        path: String, method: Method, usbDevice: String? = nil, hubPort: String? = nil, reason: String? = nil
    ) {
        self.path = path
        self.method = method
        self.usbDevice = usbDevice
        self.hubPort = hubPort
        self.reason = reason
    }

    static func notCut(_ path: String, _ reason: String) -> CutOutcome {
        CutOutcome(path: path, method: .notCut, reason: reason)
    }
}

/// A held node, as ``NodeControl/held()`` lists it.
public struct HeldNode: Sendable, Hashable, Codable {
    public var path: String
    public var holder: NodeHolder
    public var original: NodeState
    public var applied: NodeState
    public var restoresThroughUdev: Bool
    /// The device's sysfs path and USB port, for a device node checked through udev.
    public var device: String?
    public var port: String?
}

/// The held nodes and the marked ports.
public struct HeldState: Sendable, Hashable, Codable {
    public var nodes: [HeldNode]
    public var ports: [String]
}
