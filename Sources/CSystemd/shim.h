// libsystemd's daemon, journal, bus and login APIs, for AccmonSystemd only.
// Without this define sd-journal.h turns sd_journal_sendv into a macro that adds the C caller's location;
// Swift calls the plain function and AccmonSystemd sends CODE_FILE/CODE_LINE/CODE_FUNC itself.
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
