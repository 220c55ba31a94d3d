"""The harness's picture of the fake hardware: a Dev is one sysfs device to create, an Instance one physical accessory
made of several of them ("roles"), possibly with child instances on a hub's ports. Plain data: the world
(testbed_world.py) creates them in sysfs and sends their uevents; the builders (testbed_builders.py) fill them in."""

from testbed_common import HarnessError


class Dev:
    """One sysfs device of an instance. `parent` is a Dev of the same instance, or a syspath."""

    def __init__(self, role, subsystem, name, parent, attrs=None, props=None, binattrs=None, driver=None):
        self.role = role
        self.subsystem = subsystem
        self.name = name
        self.parent = parent
        self.attrs = dict(attrs or {})
        self.props = dict(props or {})
        self.binattrs = dict(binattrs or {})
        self.driver = driver
        self.syspath = None

    def parent_path(self):
        return self.parent.syspath if isinstance(self.parent, Dev) else self.parent


class Instance:
    """One physical accessory: its sysfs devices (roles), parent-first, and the instances on its ports."""

    def __init__(self, name, template, params):
        self.name = name
        self.template = template
        self.params = params
        self.devs = []  # parent-first
        self.children = []  # child instances (on a hub's ports)
        self.parent_instance = None
        self.present = False  # in sysfs
        self.plugged = False  # add uevents sent (or coldplugged), remove not yet
        self.allocations = {}  # numbers taken from the pools (tty index, event number, ...)

    @property
    def top(self):
        return self.devs[0]

    def role(self, role):
        for dev in self.devs:
            if dev.role == role:
                return dev
        raise HarnessError(f"instance '{self.name}' has no role '{role}' (roles: {[d.role for d in self.devs]})")

    def tree(self):
        """This instance and its descendants, parent-first."""
        result = [self]
        for child in self.children:
            result += child.tree()
        return result
