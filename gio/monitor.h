/* reachabilityd's GNetworkMonitor: the module's one object, shared by
 * monitor.c (the type, its start, and finding GLib's next monitor),
 * follow.c (reading and following the daemon's properties, handing over
 * to GLib's next monitor while the service is away or hung, and the
 * translation) and can-reach.c (g_network_monitor_can_reach through
 * Manager.Query).
 *
 * The module decides nothing: every answer is the daemon's, read from the
 * internet target the module holds (Apple's zero address, 0.0.0.0, whose
 * answer is each holder's own: the program's user's, where the routing
 * policy's uid rules route it otherwise than the service) and translated
 * into GLib's terms, or, while the service cannot be had, GLib's next
 * monitor's. */
#ifndef REACHABILITYD_GIO_MONITOR_H
#define REACHABILITYD_GIO_MONITOR_H

/* The module's g_debug lines: G_MESSAGES_DEBUG=reachabilityd shows them. */
#define G_LOG_DOMAIN "reachabilityd"

#include <gio/gio.h>

#define REACH_SERVICE "io.github.reachabilityd.Reachability1"
#define REACH_ROOT_PATH "/io/github/reachabilityd/Reachability1"
#define REACH_TARGET_IFACE REACH_SERVICE ".Target"
#define REACH_MANAGER_IFACE REACH_SERVICE ".Manager"
/* The internet as Apple names it, held with Manager.WatchAddress; the
 * service's answer is its object, at the path sd_bus_path_encode makes of
 * it (docs/dbus-api.md), which the module checks the reply against. */
#define REACH_INTERNET_ADDRESS "0.0.0.0"
#define REACH_INTERNET_PATH REACH_ROOT_PATH "/address/_30_2e0_2e0_2e0"

/* The name GIO_USE_NETWORK_MONITOR selects, and the priority: above
 * NetworkManager's backend (30), below the portal's (40, sandboxed
 * processes only). */
#define REACH_EXTENSION_NAME "reachabilityd"
#define REACH_EXTENSION_PRIORITY 35

/* The whole start-up (is the name owned or activatable, and the first
 * GetAll, activating the service when needed) takes at most this long;
 * past it the module fails and GLib takes its next monitor. */
#define REACH_INIT_TIMEOUT_MS 2000

/* The bound of every call made after the start: the service has this long
 * to answer a GetAll, or a can_reach's Query (for a host name, which the
 * daemon may take longer to look up, the GetAll sent with it); past it the
 * service counts as hung and GLib's next monitor answers (follow.c,
 * can-reach.c). */
#define REACH_CALL_TIMEOUT_MS 2000

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
  GMainContext *context;       /* where the signals arrive and the state lives */
  gchar *owner;                /* the service's unique name now; NULL while it is away */
  guint owner_subscription;
  guint properties_subscription;
  gboolean held;               /* the owner answered our WatchAddress: the internet target is ours to read */
  GCancellable *reading;       /* the WatchAddress or GetAll in flight, if any */
  GSource *read_bound;         /* its REACH_CALL_TIMEOUT_MS, until they pass or it is answered */

  /* GLib's next monitor (made at start, kept) and whether its answer is the
   * one published: the service is away (no owner), hung (no answer within
   * the bound) or gave an error instead of its properties. Read with
   * g_atomic_int_get by can_reach, which any thread may call. */
  GNetworkMonitor *fallback;
  gint handed_over;
  GSource *fallback_turn;      /* one idle turn after the fallback's signals */

  /* The daemon's words (the held internet target, Target interface). */
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

/* monitor.c: GLib's next monitor after ours (see there). */
GNetworkMonitor *reach_next_monitor (void);

/* follow.c: reading and following the daemon, handing over, and the translation. */
void reach_publish (ReachabilitydNetworkMonitor *self, gboolean quiet);
void reach_follow_fallback (ReachabilitydNetworkMonitor *self);
void reach_unfollow (ReachabilitydNetworkMonitor *self);
void reach_hung (ReachabilitydNetworkMonitor *self);
void reach_take_properties (ReachabilitydNetworkMonitor *self, GVariant *properties);
void reach_set_owner (ReachabilitydNetworkMonitor *self, const gchar *owner);
GDBusMessage *reach_get_all_message (void);
GVariant *reach_get_all_result (GDBusMessage *reply, const gchar **sender, GError **error);
GDBusMessage *reach_hold_message (void);
gboolean reach_hold_result (GDBusMessage *reply, const gchar **sender, GError **error);
void reach_release (ReachabilitydNetworkMonitor *self);
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
