#ifndef REACH_CDBUS_SHIM_H
#define REACH_CDBUS_SHIM_H
#include <dbus/dbus.h>

/* D-Bus type codes are macros of the form ((int) 's'): Swift cannot import them. */
static inline int reach_dbus_type_invalid(void) { return DBUS_TYPE_INVALID; }

/* Handler results, likewise macros in some libdbus versions. */
static inline DBusHandlerResult reach_dbus_handled(void) { return DBUS_HANDLER_RESULT_HANDLED; }
static inline DBusHandlerResult reach_dbus_not_yet_handled(void) { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED; }
static inline DBusHandlerResult reach_dbus_need_memory(void) { return DBUS_HANDLER_RESULT_NEED_MEMORY; }

#endif
