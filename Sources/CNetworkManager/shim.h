#ifndef REACH_CNM_SHIM_H
#define REACH_CNM_SHIM_H
/* GLib first: libdbus (imported elsewhere) defines TRUE/FALSE too. */
#include <glib.h>
#include <glib-unix.h>
#include <gio/gio.h>
/* libnm's headers are found as <libnm/...> (see Package.swift: no -I for
 * libnm). All of them include each other by quoted names, found beside them,
 * except nm-autoptr.h, which includes <NetworkManager.h> again only to add
 * g_autoptr cleanup macros that Swift cannot use: it is skipped. */
#define __NM_AUTOPTR_H__
#include <libnm/NetworkManager.h>

/* g_signal_connect is a macro. The callback is connected "swapped", so it
 * receives the user data as its first argument whatever the signal's own
 * arguments are: every caller only needs to learn "something changed". */
static inline gulong reach_signal_connect_swapped(gpointer instance, const char *signal,
                                                  void (*callback)(gpointer data), gpointer data) {
    return g_signal_connect_data(instance, signal, G_CALLBACK(callback), data, NULL, G_CONNECT_SWAPPED);
}


#endif
