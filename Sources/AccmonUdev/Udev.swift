import AccmonCrypto
public import AccmonDevices
import AccmonProtocol
public import AccmonSys
import CUdev
import Glibc

/// A libudev failure: the operation, the device or subsystem it concerned, and errno.
public struct UdevError: Error, Sendable, CustomStringConvertible {
    /// The libudev call, such as `udev_monitor_enable_receiving`.
    public var operation: String
    /// The syspath or subsystem concerned, when there is one.
    public var object: String
    /// The system error.
    public var errno: Errno

    /// Creates an error.
    public init(operation: String, object: String, errno: Errno) {
        self.operation = operation
        self.object = object
        self.errno = errno
    }

    public var description: String { "\(operation): \(object.isEmpty ? "udev" : "'\(object)'"): \(errno)" }
}

/// A libudev context. Like every type here it is not `Sendable`: create, use and free it on one thread.
public final class UdevContext {
    let pointer: OpaquePointer

    /// Creates a context (`udev_new`).
    public init() throws(UdevError) {
        guard let pointer = udev_new() else {
            throw UdevError(operation: "udev_new", object: "", errno: .current)
        }
        self.pointer = pointer
    }

    deinit { udev_unref(pointer) }
}

/// One udev device, owning its reference.
public final class UdevDevice {
    let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    deinit { udev_device_unref(pointer) }

    /// Looks up the device at `syspath`; `nil` when it is gone.
    public convenience init?(context: UdevContext, syspath: String) {
        guard let pointer = udev_device_new_from_syspath(context.pointer, syspath) else { return nil }
        self.init(owning: pointer)
    }

    /// The record of this device for `action` (empty for a coldplug enumeration): what classification needs, its
    /// fields and (unless it is going away) properties, and what
    /// ``DeviceClassifier/needs(action:subsystem:devtype:sysname:)`` asks for of its chosen attributes and of its
    /// `usb_device`, `usb_interface` and `hid` ancestors. Each attribute and ancestor costs sysfs reads, so no more
    /// is read than the decision uses (a `remove` reads nothing from sysfs).
    public func record(action: String) -> DeviceRecord {
        let subsystem = Self.text(udev_device_get_subsystem(pointer))
        let devtype = Self.text(udev_device_get_devtype(pointer))
        let sysname = Self.text(udev_device_get_sysname(pointer))
        let needs = DeviceClassifier.needs(action: action, subsystem: subsystem, devtype: devtype, sysname: sysname)
        return Self.record(
            DeviceRecord(
                action: action, syspath: Self.text(udev_device_get_syspath(pointer)), subsystem: subsystem,
                devtype: devtype, sysname: sysname, devnode: Self.text(udev_device_get_devnode(pointer)),
                properties: needs.properties ? Self.properties(pointer) : [:]),
            completedWith: needs, ancestorsOf: self)
    }

    /// The record of a monitor event: its fields and properties from the message, then sysfs attributes and
    /// ancestors as for ``record(action:)``. libudev looks the ancestors up only when the classifier needs them (a
    /// serial port's USB device, an input node's HID device); a USB device's event costs no libudev call.
    public static func record(of message: UdevMonitorMessage, context: UdevContext) -> DeviceRecord {
        let sysname = message.sysname
        let needs = DeviceClassifier.needs(
            action: message.action, subsystem: message.subsystem, devtype: message.devtype, sysname: sysname)
        let record = DeviceRecord(
            action: message.action, syspath: message.syspath, subsystem: message.subsystem, devtype: message.devtype,
            sysname: sysname, devnode: message.devnode, properties: needs.properties ? message.properties : [:])
        let wantsAncestors = needs.usbDevice || needs.usbInterface || needs.hidDevice
        // A device gone since its event has no object any more: the record then has no ancestors.
        let device = wantsAncestors ? UdevDevice(context: context, syspath: record.syspath) : nil
        return Self.record(record, completedWith: needs, ancestorsOf: device)
    }

    /// `record` with the sysfs attributes and ancestors that `needs` asks for.
    private static func record(
        _ record: consuming DeviceRecord, completedWith needs: DeviceClassifier.RecordNeeds,
        ancestorsOf device: UdevDevice?
    ) -> DeviceRecord {
        if needs.attributes {
            (record.attributes, record.descriptorsSHA256) = SysfsDirectory.usbDevice(
                at: record.syspath, properties: record.properties)
        }
        if let device {
            if needs.usbDevice { record.usbDevice = device.ancestor("usb", "usb_device", SysfsAttribute.usbDevice) }
            if needs.usbInterface { record.usbInterface = device.ancestor("usb", "usb_interface", [.bInterfaceNumber]) }
            if needs.hidDevice { record.hidDevice = device.ancestor("hid", nil, []) }
        }
        return record
    }

    private func ancestor(
        _ subsystem: String, _ devtype: String?, _ attributeNames: [SysfsAttribute]
    ) -> AncestorRecord? {
        // The parent pointer is borrowed from this device: it is read here and never kept.
        guard let parent = udev_device_get_parent_with_subsystem_devtype(pointer, subsystem, devtype) else {
            return nil
        }
        let syspath = Self.text(udev_device_get_syspath(parent))
        let properties = Self.properties(parent)
        if devtype == "usb_device" {
            let (attributes, descriptorsSHA256) = SysfsDirectory.usbDevice(at: syspath, properties: properties)
            return AncestorRecord(
                syspath: syspath, properties: properties, attributes: attributes, descriptorsSHA256: descriptorsSHA256)
        }
        let directory = attributeNames.isEmpty ? nil : SysfsDirectory(syspath)
        return AncestorRecord(
            syspath: syspath, properties: properties, attributes: directory?.attributes(attributeNames) ?? [:])
    }

    /// The device's properties that classification reads (``UdevProperty``): looked up one by one, which is much
    /// cheaper than copying the whole list (a udev event carries some 30 properties).
    private static func properties(_ device: OpaquePointer) -> UdevProperties {
        var properties = UdevProperties()
        for property in UdevProperty.allCases {
            if let value = udev_device_get_property_value(device, property.name) {
                properties[property] = String(cString: value)
            }
        }
        return properties
    }

    /// C text as a Swift string; invalid UTF-8 is repaired with replacement characters.
    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }
}

/// A device's sysfs directory, opened once to read several attributes.
///
/// Each attribute is one `openat` relative to the directory and one `pread` at offset 0, where libudev's
/// `udev_device_get_sysattr_value` resolves the whole path twice (`lstat`, then `open`): attribute reads were
/// about a third of accmond's time per event. Values come out as libudev gives them: the text up to the first NUL,
/// without trailing newlines; `nil` when the attribute is missing or unreadable.
final class SysfsDirectory {
    /// sysfs attributes hold at most a page.
    private static let attributeLimit = pageBytes
    private static let descriptorsLimit = 65_536
    /// The most bytes ``descriptorsHash(file:)`` reads on the stack (as much as `withUnsafeTemporaryAllocation` puts
    /// there).
    private static let descriptorsOnStack = 1024
    /// The directory that names are opened in; `AT_FDCWD` for files named by their absolute paths.
    private let descriptor: Int32

    init?(_ syspath: String) {
        descriptor = open(syspath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
    }

    /// For files named by their absolute paths: nothing is opened but the files.
    private init() { descriptor = AT_FDCWD }

    deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

    /// A `usb_device`'s attributes (those its properties tell exactly, ``AccmonDevices/usbDeviceAttributes(fromProperties:)``,
    /// the others read) and its descriptors' hash (empty when unreadable: the device is gone). When its properties tell every attribute
    /// (udev's `usb_id` and accmon's udev rules give them all), only `descriptors` is read, opened by its path: one
    /// `openat` and one `close` instead of two each.
    static func usbDevice(
        at syspath: String, properties: UdevProperties
    ) -> (attributes: SysfsAttributes, descriptorsSHA256: String) {
        let known = AccmonDevices.usbDeviceAttributes(fromProperties: properties)
        if SysfsAttribute.usbDevice.allSatisfy({ known[$0] != nil }) {
            return (known, SysfsDirectory().descriptorsHash(file: syspath + "/descriptors"))
        }
        guard let directory = SysfsDirectory(syspath) else { return (known, "") }
        return (directory.completingUSBDeviceAttributes(known), directory.descriptorsHash())
    }

    func attributes(_ names: [SysfsAttribute]) -> SysfsAttributes {
        var attributes = SysfsAttributes()
        for name in names {
            if let value = text(name.name) { attributes[name] = value }
        }
        return attributes
    }

    /// `attributes` (a `usb_device`'s, from its properties) with those it lacks read from the directory.
    func completingUSBDeviceAttributes(_ attributes: SysfsAttributes) -> SysfsAttributes {
        var attributes = attributes
        for name in SysfsAttribute.usbDevice where attributes[name] == nil {
            if let value = text(name.name) { attributes[name] = value }
        }
        return attributes
    }

    func text(_ name: String) -> String? {
        // On the stack: a text attribute is read once, and only its text is kept.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.attributeLimit) { buffer -> String? in
            guard let count = read(name, into: buffer, wholeInOneRead: true) else { return nil }
            var end = buffer[..<count].firstIndex(of: 0) ?? count
            while end > 0, buffer[end - 1] == UInt8(ascii: "\n") || buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<end]), as: UTF8.self)
        }
    }

    /// The SHA-256 of a USB device's raw descriptors (binary, so read whole, not as text); empty when unreadable.
    ///
    /// Read first into room on the stack (most devices' descriptors are a few hundred bytes); a file that fills it is
    /// read again into room for ``descriptorsLimit`` bytes, which the heap holds.
    func descriptorsHash(file: String = "descriptors") -> String {
        let onStack = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.descriptorsOnStack) { buffer in
            hash(of: file, in: buffer)
        }
        guard case .needsMoreRoom = onStack else { return onStack.hash }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.descriptorsLimit) { buffer in
            hash(of: file, in: buffer).hash
        }
    }

    /// What reading and hashing a binary attribute into some room gave.
    private enum HashOutcome {
        case hashed(String)
        case unreadable
        /// The file filled the room: it may have more.
        case needsMoreRoom

        /// The hash; empty when unreadable or when the room was too small (the whole file unread).
        var hash: String {
            if case .hashed(let hash) = self { hash } else { "" }
        }
    }

    private func hash(of file: String, in buffer: UnsafeMutableBufferPointer<UInt8>) -> HashOutcome {
        guard let count = read(file, into: buffer, wholeInOneRead: false), count > 0 else { return .unreadable }
        if count == buffer.count && buffer.count < Self.descriptorsLimit { return .needsMoreRoom }
        // try?: without libcrypto's answer the hash is unknown.
        return .hashed((try? SHA256.hexDigest(UnsafeBufferPointer(rebasing: buffer[..<count]))) ?? "")
    }

    /// Reads the file `name` into `buffer`; the number of bytes read, `nil` when it cannot be opened or read.
    /// `pread`, which on a fresh descriptor is `read`, also skips umockdev's wrapper of `read` (two `sigprocmask`
    /// calls per read, which the benchmarks would otherwise charge to accmond). Inlined, so that a literal name
    /// reaches `openat` without a C string made for it.
    @inline(__always)
    private func read(_ name: String, into buffer: UnsafeMutableBufferPointer<UInt8>, wholeInOneRead: Bool) -> Int? {
        let file = openat(descriptor, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        return Self.fill(buffer, wholeInOneRead: wholeInOneRead) { room, offset in
            while true {
                let count = pread(file, room.baseAddress!, room.count, off_t(offset))
                if count >= 0 { return count }
                if errno != EINTR { return nil }
            }
        }
    }

    /// The least page size of Linux: sysfs hands over at most a page per read, so never less than this.
    static let pageBytes = 4096

    /// Fills `buffer` from offset 0 with `readAt` (a `pread`: the bytes it read into the room it was given at an
    /// offset, 0 at the end of the file, `nil` on an error); the number of bytes read, `nil` on an error.
    ///
    /// A sysfs text attribute is produced whole by the first read (as libudev reads it, once: `wholeInOneRead`). A
    /// binary one such as `descriptors` is read until its end, which a read shorter than both its room and a page
    /// shows: sysfs (kernfs) gives at most a page per read and a regular file all it has, so only a full read can
    /// have more behind it. That saves the read that would return 0, one system call per USB device added.
    static func fill(
        _ buffer: UnsafeMutableBufferPointer<UInt8>, wholeInOneRead: Bool,
        readAt: (_ room: UnsafeMutableBufferPointer<UInt8>, _ offset: Int) -> Int?
    ) -> Int? {
        var filled = 0
        while filled < buffer.count {
            let room = buffer.count - filled
            guard let count = readAt(UnsafeMutableBufferPointer(rebasing: buffer[filled...]), filled) else {
                return nil
            }
            filled += count
            if wholeInOneRead || count < min(room, pageBytes) { break }
        }
        return filled
    }
}

/// What one read of a ``UdevMonitor``'s socket gave.
public enum UdevMonitorReceipt {
    /// A device event from udevd.
    case event(UdevMonitorMessage)
    /// A datagram dropped, as libudev drops it: not from udevd (a sender that is not root, a unicast, the kernel's
    /// group), or malformed. `reason` says which.
    case dropped(reason: String)
}

/// A udev monitor on the `udev` netlink group: events after udev's rules ran, so device nodes exist.
///
/// libudev opens the socket (netlink, the subsystem filter in the kernel, `SO_PASSCRED`, the receive buffer); the
/// datagrams are read here and parsed by ``UdevMonitorMessage``, with libudev's checks of the sender.
public final class UdevMonitor {
    let pointer: OpaquePointer
    /// Large enough for any message udevd sends (its properties are a few KiB at most); a longer one is reported.
    private static let bufferBytes = 65_536
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferBytes, alignment: 8)
    /// A handful: a linear search of short strings costs less than hashing one.
    private let subsystems: [String]

    /// Creates a monitor filtered by subsystem (in the kernel-side filter, and again on each message) and starts
    /// receiving.
    ///
    /// Tags are not used for filtering: tag filters do not work under umockdev and accmond must work without its
    /// rules installed.
    public init(context: UdevContext, subsystems: [String], receiveBufferBytes: Int32) throws(UdevError) {
        guard let pointer = udev_monitor_new_from_netlink(context.pointer, "udev") else {
            buffer.deallocate()
            throw UdevError(operation: "udev_monitor_new_from_netlink", object: "udev", errno: .current)
        }
        self.pointer = pointer
        self.subsystems = subsystems
        for subsystem in subsystems {
            let result = udev_monitor_filter_add_match_subsystem_devtype(pointer, subsystem, nil)
            if result < 0 {
                throw UdevError(
                    operation: "udev_monitor_filter_add_match_subsystem_devtype", object: subsystem,
                    errno: Errno(rawValue: -result))
            }
        }
        // A larger buffer absorbs bursts (a hub full of devices); failure only leaves the default.
        _ = udev_monitor_set_receive_buffer_size(pointer, receiveBufferBytes)
        let result = udev_monitor_enable_receiving(pointer)
        if result < 0 {
            throw UdevError(operation: "udev_monitor_enable_receiving", object: "udev", errno: Errno(rawValue: -result))
        }
    }

    deinit {
        udev_monitor_unref(pointer)
        buffer.deallocate()
    }

    /// The monitor's socket, to poll for readability.
    public var descriptor: FileDescriptor { FileDescriptor(rawValue: udev_monitor_get_fd(pointer)) }

    /// Reads the next datagram; `nil` when none is pending.
    /// - Throws: ``UdevError`` when the socket failed (`ENOBUFS`: events were lost) or a message did not fit the
    ///   buffer: either way events are missing, and the caller re-enumerates.
    public func receive() throws(UdevError) -> UdevMonitorReceipt? {
        let received: (length: Int, sender: DatagramSender)?
        do {
            received = try Datagram.receive(from: descriptor, into: buffer)
        } catch {
            throw UdevError(operation: "recvmsg", object: "udev", errno: error)
        }
        guard let (length, sender) = received else { return nil }
        if let problem = UdevMonitorMessage.senderProblem(
            groups: sender.netlinkGroups, portID: sender.netlinkPortID, uid: sender.uid)
        {
            return .dropped(reason: problem)
        }
        switch UdevMonitorMessage.parse(UnsafeRawBufferPointer(rebasing: buffer[..<length])) {
        case .success(let message):
            guard subsystems.contains(message.subsystem) else {
                return .dropped(reason: "subsystem '\(message.subsystem)' is not watched")
            }
            return .event(message)
        case .failure(let rejection):
            return .dropped(reason: rejection.reason)
        }
    }
}
