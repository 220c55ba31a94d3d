/* bus_glib_client: the bus bench's GLib receiver (GIO's GDBus, the library of GNOME's apps and Shell extensions).
 *
 *   bus_glib_client NAME   subscribes to InterfacesAdded and InterfacesRemoved of the object manager at
 *                          /org/accmon/Accmon1 of the bus name NAME (g_dbus_connection_signal_subscribe), calls
 *                          GetManagedObjects (from which accmond sends this peer those signals), prints "subscribed",
 *                          then one line per signal in tools/relay.c's client format,
 *                          "connect|disconnect <SerialNumber> <SysfsPath>" (InterfacesRemoved has only the path: the
 *                          serial is remembered from the InterfacesAdded of that path).
 *
 * GDBus reads the socket on its worker thread and calls the handlers on the main loop's thread, as it does for every
 * GLib app; each line is written when its handler runs. The bus is the system bus (DBUS_SYSTEM_BUS_ADDRESS). Works the
 * same against accmond and tools/bus_relay.c (the bus floor). */
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MANAGER_PATH "/org/accmon/Accmon1"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define ACCESSORY "org.accmon.Accmon1.Accessory"

static GHashTable *live; /* object path -> "serial sysfs" */

static void write_line(const char *line) {
    size_t length = strlen(line), done = 0;
    while (done < length) {
        ssize_t n = write(1, line + done, length - done);
        if (n <= 0) exit(1);
        done += (size_t)n;
    }
}

/* "serial sysfs" from an object's interfaces (a{sa{sv}}). */
static char *describe(GVariant *interfaces) {
    GVariant *properties = g_variant_lookup_value(interfaces, ACCESSORY, G_VARIANT_TYPE("a{sv}"));
    const char *serial = "-", *sysfs = "-";
    if (properties) {
        g_variant_lookup(properties, "SerialNumber", "&s", &serial);
        g_variant_lookup(properties, "SysfsPath", "&s", &sysfs);
    }
    char *text = g_strdup_printf("%s %s", *serial ? serial : "-", *sysfs ? sysfs : "-");
    if (properties) g_variant_unref(properties);
    return text;
}

static void on_added(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                     const char *member, GVariant *parameters, gpointer data) {
    const char *object;
    GVariant *interfaces;
    g_variant_get(parameters, "(&o@a{sa{sv}})", &object, &interfaces);
    char *text = describe(interfaces);
    char *line = g_strdup_printf("connect %s\n", text);
    write_line(line);
    g_free(line);
    g_hash_table_replace(live, g_strdup(object), text);
    g_variant_unref(interfaces);
}

static void on_removed(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                       const char *member, GVariant *parameters, gpointer data) {
    const char *object;
    g_variant_get(parameters, "(&o@as)", &object, NULL);
    const char *text = g_hash_table_lookup(live, object);
    char *line = g_strdup_printf("disconnect %s\n", text ? text : "- -");
    write_line(line);
    g_free(line);
    g_hash_table_remove(live, object);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bus_glib_client NAME\n");
        return 2;
    }
    const char *name = argv[1];
    GError *error = NULL;
    GDBusConnection *connection = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, &error);
    if (!connection) {
        fprintf(stderr, "bus_glib_client: %s\n", error->message);
        return 1;
    }
    live = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_dbus_connection_signal_subscribe(connection, name, OBJECT_MANAGER, "InterfacesAdded", MANAGER_PATH, NULL,
                                       G_DBUS_SIGNAL_FLAGS_NONE, on_added, NULL, NULL);
    g_dbus_connection_signal_subscribe(connection, name, OBJECT_MANAGER, "InterfacesRemoved", MANAGER_PATH, NULL,
                                       G_DBUS_SIGNAL_FLAGS_NONE, on_removed, NULL, NULL);
    GVariant *objects = g_dbus_connection_call_sync(connection, name, MANAGER_PATH, OBJECT_MANAGER, "GetManagedObjects",
                                                    NULL, G_VARIANT_TYPE("(a{oa{sa{sv}}})"), G_DBUS_CALL_FLAGS_NONE,
                                                    -1, NULL, &error);
    if (!objects) {
        fprintf(stderr, "bus_glib_client: GetManagedObjects: %s\n", error->message);
        return 1;
    }
    /* The objects there already: remembered, no line (the bench starts with none). */
    GVariantIter *iter;
    const char *object;
    GVariant *interfaces;
    g_variant_get(objects, "(a{oa{sa{sv}}})", &iter);
    while (g_variant_iter_next(iter, "{&o@a{sa{sv}}}", &object, &interfaces)) {
        g_hash_table_replace(live, g_strdup(object), describe(interfaces));
        g_variant_unref(interfaces);
    }
    g_variant_iter_free(iter);
    g_variant_unref(objects);
    write_line("subscribed\n");
    g_main_loop_run(g_main_loop_new(NULL, FALSE));
    return 0;
}
