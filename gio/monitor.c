/* reachabilityd's GNetworkMonitor (the "gio-network-monitor" extension point).
 *
 * Start (GInitable): the service must be on the system bus or activatable
 * (GetNameOwner, then ListActivatableNames), say it answers for this
 * process's network namespace (a Get, which starts it when it is only
 * activatable), let the module hold the internet target (WatchAddress
 * 0.0.0.0) and answer one GetAll of that object's Target interface, all
 * within REACH_INIT_TIMEOUT_MS; otherwise init fails and
 * GLib takes its next monitor (NetworkManager's, then its own). Once the
 * service has answered, the module makes that next monitor itself
 * (reach_next_monitor: the extension point's monitors below our priority,
 * in order, the first that starts; never ours, never the portal's) and
 * keeps it for the process's life. A daemon in another network namespace
 * than the program's (a container given the host's bus socket) answers for
 * another network: init fails there too (same_network_namespace), and GLib's
 * next monitor answers for the program's own namespace.
 *
 * The held target, not the root object, because its answer is the
 * program's user's own: where the routing policy's uid rules route that
 * user otherwise than the service, the root object (the service's own
 * answer) would say online while every packet of the program is refused.
 *
 * Then it follows the held target's PropertiesChanged, accepted only from
 * the name's current owner (tracked with NameOwnerChanged), and holds it
 * and reads the properties again whenever a new owner appears (a restarted
 * or upgraded daemon). Nobody keeps the service's last word: while it cannot be had
 * the module hands over, and GLib's next monitor's answer is published
 * instead (its three values mirrored, told only when what the program sees
 * changes), and can_reach asks that monitor. It cannot be had when the name
 * has no owner, when a read (GetAll) gets an error, and when the service
 * is hung: no answer within REACH_CALL_TIMEOUT_MS, to a GetAll or to a
 * can_reach (can-reach.c). The module takes over again on the owner's
 * next word: a new owner, or from the same owner a PropertiesChanged or
 * the late answer to a read (one is left in flight while it hangs), each
 * followed by a GetAll whose answer is published.
 *
 * A hang is found without polling. Idle, the module has no timer and asks
 * nothing; GLib's next monitor wakes it when the network changes, and then
 * the service is asked (GetAll, within the bound) even while it is
 * followed: a service that should have something to say and does not
 * answer is hung. A can_reach without a sign of life within the bound is
 * the same hang.
 *
 * Translation (reach_publish in follow.c), GLib's rules in every state:
 * network-available exactly when there is a default route for the program,
 * which is Flags' Reachable bit (the kernel has a route to the internet)
 * with Status known; network-metered is Metered, only while available;
 * connectivity is LOCAL exactly when not available, and with a route maps
 * "limited" and "portal" to LIMITED and PORTAL and everything else to
 * FULL: "full"; "unknown" (nothing checked, the kernel backend); and
 * "none", which is NetworkManager saying it has no connection with a
 * default route: the route the kernel uses is then one NetworkManager does
 * not manage, and nothing checked it, so FULL, as GLib's own netlink
 * monitor says of a default route it did not check (a failed check is
 * "limited"). GLib's next monitor's values go through the same rules (its
 * NetworkManager monitor can say LOCAL with a route).
 * network-changed is emitted once when any of the three changed, after
 * their notify signals, and never otherwise. */
#include "monitor.h"

#include <string.h>
#include <sys/stat.h>

enum
{
  PROP_0,
  PROP_NETWORK_AVAILABLE,
  PROP_NETWORK_METERED,
  PROP_CONNECTIVITY,
};

static void reach_initable_iface_init (GInitableIface *iface);
static void reach_monitor_iface_init (GNetworkMonitorInterface *iface);

G_DEFINE_DYNAMIC_TYPE_EXTENDED (ReachabilitydNetworkMonitor, reachabilityd_network_monitor, G_TYPE_OBJECT, 0,
                                G_IMPLEMENT_INTERFACE_DYNAMIC (G_TYPE_INITABLE, reach_initable_iface_init)
                                G_IMPLEMENT_INTERFACE_DYNAMIC (G_TYPE_NETWORK_MONITOR, reach_monitor_iface_init))

/* --- start ------------------------------------------------------------------- */

static gint
remaining_ms (gint64 deadline)
{
  gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
  return (gint) CLAMP (left, 1, REACH_INIT_TIMEOUT_MS);
}

static GVariant *
bus_call (GDBusConnection *bus, const gchar *method, GVariant *arguments, const gchar *reply_type,
          gint64 deadline, GCancellable *cancellable, GError **error)
{
  return g_dbus_connection_call_sync (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                      method, arguments, G_VARIANT_TYPE (reply_type), G_DBUS_CALL_FLAGS_NONE,
                                      remaining_ms (deadline), cancellable, error);
}

/* The service is on the bus (its owner in *owner) or the bus can start it. */
static gboolean
service_present (GDBusConnection *bus, gint64 deadline, gchar **owner, GCancellable *cancellable,
                 GError **error)
{
  GVariant *reply;
  GError *local = NULL;
  const gchar **names;
  gboolean activatable;

  reply = bus_call (bus, "GetNameOwner", g_variant_new ("(s)", REACH_SERVICE), "(s)", deadline, cancellable,
                    &local);
  if (reply != NULL)
    {
      g_variant_get (reply, "(s)", owner);
      g_variant_unref (reply);
      return TRUE;
    }
  if (!g_dbus_error_is_remote_error (local))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  g_clear_error (&local);
  reply = bus_call (bus, "ListActivatableNames", NULL, "(as)", deadline, cancellable, error);
  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(^a&s)", &names);
  activatable = g_strv_contains (names, REACH_SERVICE);
  g_free (names);
  g_variant_unref (reply);
  if (!activatable)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "%s is neither on the system bus nor activatable",
                 REACH_SERVICE);
  return activatable;
}

/* The inode of this process's network namespace (what the daemon's
 * Manager.NetworkNamespace says of its own); 0 when it cannot be read. */
static guint64
own_network_namespace (void)
{
  struct stat info;

  return stat ("/proc/self/ns/net", &info) == 0 ? (guint64) info.st_ino : 0;
}

/* The daemon answers for this process's network namespace; its unique
 * name in *owner (new string). Every answer of the daemon is its own
 * namespace's: a program in another one (a container given the host's bus
 * socket) would be told the host's routes, so the module does not start
 * there and GLib's next monitor, which reads the program's own namespace,
 * answers (what reachctl and the Swift and C libraries do by evaluating
 * in-process). A daemon that does not say (an older one; 0) is taken as
 * this namespace's. This is the module's first call to the service, and
 * starts it when it is only activatable: nothing is held before the
 * namespace is known to be this one. */
static gboolean
same_network_namespace (GDBusConnection *bus, gint64 deadline, gchar **owner, GCancellable *cancellable,
                        GError **error)
{
  GError *local = NULL;
  guint64 ours = own_network_namespace (), theirs = 0;
  GDBusMessage *message, *reply;
  GVariant *body, *value;

  message = g_dbus_message_new_method_call (REACH_SERVICE, REACH_ROOT_PATH, "org.freedesktop.DBus.Properties", "Get");
  g_dbus_message_set_body (message, g_variant_new ("(ss)", REACH_MANAGER_IFACE, "NetworkNamespace"));
  reply = g_dbus_connection_send_message_with_reply_sync (bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          remaining_ms (deadline), NULL, cancellable, error);
  g_object_unref (message);
  if (reply == NULL)
    return FALSE;
  if (g_strcmp0 (g_dbus_message_get_sender (reply), "org.freedesktop.DBus") == 0
      || g_dbus_message_get_sender (reply) == NULL)
    {
      /* The bus answered instead (the start failed): no daemon to follow. */
      if (!g_dbus_message_to_gerror (reply, error))
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "the bus answered for %s", REACH_SERVICE);
      g_object_unref (reply);
      return FALSE;
    }
  *owner = g_strdup (g_dbus_message_get_sender (reply));
  if (g_dbus_message_to_gerror (reply, &local))
    {
      g_debug ("%s does not say its network namespace (%s): taken as this process's", REACH_SERVICE, local->message);
      g_error_free (local);
    }
  else if ((body = g_dbus_message_get_body (reply)) != NULL && g_variant_is_of_type (body, G_VARIANT_TYPE ("(v)")))
    {
      g_variant_get (body, "(v)", &value);
      if (g_variant_is_of_type (value, G_VARIANT_TYPE_UINT64))
        theirs = g_variant_get_uint64 (value);
      g_variant_unref (value);
    }
  g_object_unref (reply);
  if (theirs == 0 || ours == 0 || theirs == ours)
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
               "%s answers for network namespace %" G_GUINT64_FORMAT ", this process is in %" G_GUINT64_FORMAT
               ": its answers would be another network's, so GLib's own monitor answers here",
               REACH_SERVICE, theirs, ours);
  return FALSE;
}

/* Holds the internet target at the owner within the deadline. */
static gboolean
hold_sync (ReachabilitydNetworkMonitor *self, gint64 deadline, GCancellable *cancellable, GError **error)
{
  GDBusMessage *message = reach_hold_message (), *reply;
  const gchar *sender = NULL;

  g_dbus_message_set_destination (message, self->owner);
  g_dbus_message_set_flags (message, G_DBUS_MESSAGE_FLAGS_NO_AUTO_START);
  reply = g_dbus_connection_send_message_with_reply_sync (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          remaining_ms (deadline), NULL, cancellable, error);
  g_object_unref (message);
  self->held = reach_hold_result (reply, &sender, error);
  g_clear_object (&reply);
  return self->held;
}

/* The held target's properties, read from the owner within the deadline. */
static GVariant *
read_sync (ReachabilitydNetworkMonitor *self, gint64 deadline, GCancellable *cancellable, GError **error)
{
  GDBusMessage *message = reach_get_all_message (), *reply;
  const gchar *sender = NULL;
  GVariant *properties;

  g_dbus_message_set_destination (message, self->owner);
  g_dbus_message_set_flags (message, G_DBUS_MESSAGE_FLAGS_NO_AUTO_START);
  reply = g_dbus_connection_send_message_with_reply_sync (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          remaining_ms (deadline), NULL, cancellable, error);
  g_object_unref (message);
  properties = reach_get_all_result (reply, &sender, error);
  g_clear_object (&reply);
  return properties;
}

static void
unsubscribe (ReachabilitydNetworkMonitor *self)
{
  if (self->owner_subscription != 0)
    g_dbus_connection_signal_unsubscribe (self->bus, self->owner_subscription);
  if (self->properties_subscription != 0)
    g_dbus_connection_signal_unsubscribe (self->bus, self->properties_subscription);
  self->owner_subscription = self->properties_subscription = 0;
}

/* GLib's next monitor: what GLib would have chosen had ours not started
 * (never ours, never the portal's, which only sandboxed processes use);
 * NULL if none starts. */
GNetworkMonitor *
reach_next_monitor (void)
{
  GIOExtensionPoint *point = g_io_extension_point_lookup (G_NETWORK_MONITOR_EXTENSION_POINT_NAME);
  GList *extensions = point != NULL ? g_io_extension_point_get_extensions (point) : NULL;

  for (GList *l = extensions; l != NULL; l = l->next)
    {
      GIOExtension *extension = l->data;
      const gchar *name = g_io_extension_get_name (extension);
      GType type = g_io_extension_get_type (extension);
      GError *error = NULL;
      GObject *monitor;

      if (g_io_extension_get_priority (extension) >= REACH_EXTENSION_PRIORITY
          || type == REACHABILITYD_TYPE_NETWORK_MONITOR || strcmp (name, "portal") == 0
          || !g_type_is_a (type, G_TYPE_NETWORK_MONITOR))
        continue;
      if (g_type_is_a (type, G_TYPE_INITABLE))
        monitor = g_initable_new (type, NULL, &error, NULL);
      else
        monitor = g_object_new (type, NULL);
      if (monitor != NULL)
        {
          g_debug ("GLib's next monitor is %s (%s)", name, G_OBJECT_TYPE_NAME (monitor));
          return G_NETWORK_MONITOR (monitor);
        }
      g_debug ("GLib's %s monitor does not start: %s", name, error->message);
      g_clear_error (&error);
    }
  return NULL;
}

static gboolean
reach_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (initable);
  gint64 deadline = g_get_monotonic_time () + (gint64) REACH_INIT_TIMEOUT_MS * 1000;
  gchar *owner = NULL;
  GVariant *properties = NULL;

  self->context = g_main_context_ref_thread_default ();
  self->bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, cancellable, error);
  if (self->bus == NULL || !service_present (self->bus, deadline, &owner, cancellable, error))
    return FALSE;
  g_clear_pointer (&owner, g_free);

  /* Subscribed before the first read, so that no change falls between. */
  self->owner_subscription = g_dbus_connection_signal_subscribe (
      self->bus, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
      REACH_SERVICE, G_DBUS_SIGNAL_FLAGS_NONE, reach_on_owner_changed, self, NULL);
  self->properties_subscription = g_dbus_connection_signal_subscribe (
      self->bus, REACH_SERVICE, "org.freedesktop.DBus.Properties", "PropertiesChanged", REACH_INTERNET_PATH,
      REACH_TARGET_IFACE, G_DBUS_SIGNAL_FLAGS_NONE, reach_on_properties_changed, self, NULL);

  /* The namespace asked first (which starts the service if it is only
   * activatable; the reply's sender is the owner whose signals count from
   * now on), then the internet target held and read. */
  if (same_network_namespace (self->bus, deadline, &owner, cancellable, error))
    {
      reach_set_owner (self, owner);
      if (hold_sync (self, deadline, cancellable, error))
        properties = read_sync (self, deadline, cancellable, error);
    }
  g_free (owner);
  if (properties == NULL)
    {
      reach_release (self);
      unsubscribe (self);
      return FALSE;
    }
  reach_take_properties (self, properties);
  reach_publish (self, TRUE);
  g_variant_unref (properties);

  /* Made now, so that its signals exist from the start: it is the answer
   * while the service is away, and its changes are when a hang shows. */
  self->fallback = reach_next_monitor ();
  reach_follow_fallback (self);
  return TRUE;
}

/* --- the type ---------------------------------------------------------------- */

static void
reachabilityd_network_monitor_init (ReachabilitydNetworkMonitor *self)
{
  self->status = -1;
  self->connectivity = g_strdup ("unknown");
  self->network_connectivity = G_NETWORK_CONNECTIVITY_LOCAL;
}

static void
reach_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (object);

  switch (prop_id)
    {
    case PROP_NETWORK_AVAILABLE:
      g_value_set_boolean (value, self->network_available);
      break;
    case PROP_NETWORK_METERED:
      g_value_set_boolean (value, self->network_metered);
      break;
    case PROP_CONNECTIVITY:
      g_value_set_enum (value, self->network_connectivity);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
    }
}

static void
reach_dispose (GObject *object)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (object);

  reach_unfollow (self);
  if (self->bus != NULL)
    {
      reach_release (self);
      unsubscribe (self);
    }
  g_clear_object (&self->bus);
  G_OBJECT_CLASS (reachabilityd_network_monitor_parent_class)->dispose (object);
}

static void
reach_finalize (GObject *object)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (object);

  g_free (self->owner);
  g_free (self->connectivity);
  g_clear_pointer (&self->context, g_main_context_unref);
  G_OBJECT_CLASS (reachabilityd_network_monitor_parent_class)->finalize (object);
}

static void
reachabilityd_network_monitor_class_init (ReachabilitydNetworkMonitorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->get_property = reach_get_property;
  object_class->dispose = reach_dispose;
  object_class->finalize = reach_finalize;
  g_object_class_override_property (object_class, PROP_NETWORK_AVAILABLE, "network-available");
  g_object_class_override_property (object_class, PROP_NETWORK_METERED, "network-metered");
  g_object_class_override_property (object_class, PROP_CONNECTIVITY, "connectivity");
}

static void
reachabilityd_network_monitor_class_finalize (ReachabilitydNetworkMonitorClass *klass)
{
  (void) klass;
}

static void
reach_initable_iface_init (GInitableIface *iface)
{
  iface->init = reach_initable_init;
}

static void
reach_monitor_iface_init (GNetworkMonitorInterface *iface)
{
  iface->can_reach = reach_can_reach;
  iface->can_reach_async = reach_can_reach_async;
  iface->can_reach_finish = reach_can_reach_finish;
}

void
reachabilityd_network_monitor_register (GTypeModule *module)
{
  reachabilityd_network_monitor_register_type (module);
}
