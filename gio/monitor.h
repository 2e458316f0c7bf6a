/* reachabilityd's GNetworkMonitor: the module's one object, shared by
 * monitor.c (the type, its start and the daemon's signals) and can-reach.c
 * (g_network_monitor_can_reach through Manager.Query), with follow.c
 * (reading and following the daemon's properties).
 *
 * The module decides nothing: every answer is the daemon's, read from its
 * root object (the internet target) and translated into GLib's terms. */
#ifndef REACHABILITYD_GIO_MONITOR_H
#define REACHABILITYD_GIO_MONITOR_H

#include <gio/gio.h>

#define REACH_SERVICE "io.github.reachabilityd.Reachability1"
#define REACH_ROOT_PATH "/io/github/reachabilityd/Reachability1"
#define REACH_TARGET_IFACE REACH_SERVICE ".Target"
#define REACH_MANAGER_IFACE REACH_SERVICE ".Manager"

/* The name GIO_USE_NETWORK_MONITOR selects, and the priority: above
 * NetworkManager's backend (30), below the portal's (40, sandboxed
 * processes only). */
#define REACH_EXTENSION_NAME "reachabilityd"
#define REACH_EXTENSION_PRIORITY 35

/* The whole start-up (is the name owned or activatable, and the first
 * GetAll, activating the service when needed) takes at most this long;
 * past it the module fails and GLib takes its next monitor. */
#define REACH_INIT_TIMEOUT_MS 2000

/* The Reachable bit of the daemon's Flags (Apple's value). */
#define REACH_FLAG_REACHABLE 0x2u

typedef struct _ReachabilitydNetworkMonitor ReachabilitydNetworkMonitor;
typedef struct
{
  GObjectClass parent_class;
} ReachabilitydNetworkMonitorClass;

struct _ReachabilitydNetworkMonitor
{
  GObject parent_instance;

  GDBusConnection *bus;
  gchar *owner;                /* the service's unique name now; NULL while it is away */
  guint owner_subscription;
  guint properties_subscription;
  GCancellable *reading;       /* the GetAll in flight, if any */

  /* The daemon's words (root object, Target interface). */
  gint32 status;               /* -1 while unknown */
  guint32 flags;
  gboolean metered;
  gchar *connectivity;         /* "unknown", "none", "portal", "limited", "full" */

  /* What GLib's callers see: computed from the words above only. */
  gboolean network_available;
  gboolean network_metered;
  GNetworkConnectivity network_connectivity;
};

GType reachabilityd_network_monitor_get_type (void);
#define REACHABILITYD_TYPE_NETWORK_MONITOR (reachabilityd_network_monitor_get_type ())
#define REACHABILITYD_NETWORK_MONITOR(o) \
  (G_TYPE_CHECK_INSTANCE_CAST ((o), REACHABILITYD_TYPE_NETWORK_MONITOR, ReachabilitydNetworkMonitor))

void reachabilityd_network_monitor_register (GTypeModule *module);

/* follow.c: reading and following the daemon, and the translation. */
void reach_publish (ReachabilitydNetworkMonitor *self, gboolean quiet);
void reach_take_properties (ReachabilitydNetworkMonitor *self, GVariant *properties);
void reach_set_owner (ReachabilitydNetworkMonitor *self, const gchar *owner);
GDBusMessage *reach_get_all_message (void);
GVariant *reach_get_all_result (GDBusMessage *reply, const gchar **sender, GError **error);
void reach_on_owner_changed (GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                             const gchar *member, GVariant *parameters, gpointer user_data);
void reach_on_properties_changed (GDBusConnection *bus, const gchar *sender, const gchar *path,
                                  const gchar *interface, const gchar *member, GVariant *parameters,
                                  gpointer user_data);

/* can-reach.c: the GNetworkMonitor interface's can_reach functions. */
gboolean reach_can_reach (GNetworkMonitor *monitor, GSocketConnectable *connectable,
                          GCancellable *cancellable, GError **error);
void reach_can_reach_async (GNetworkMonitor *monitor, GSocketConnectable *connectable,
                            GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
gboolean reach_can_reach_finish (GNetworkMonitor *monitor, GAsyncResult *result, GError **error);

#endif
