#ifndef REACH_CGLIB_SHIM_H
#define REACH_CGLIB_SHIM_H
/* GLib, GObject and GIO: the main loop, its sources, and GIO's resolver.
 * libnm (CNetworkManager) builds on this module; libdbus (CDBus) is apart. */
#include <glib.h>
#include <glib-unix.h>
#include <gio/gio.h>
/* glibc's malloc_trim, for giving memory back after a peak (Memory.trimSoon). */
#include <malloc.h>


#endif
