/* reachabilityd's GNetworkMonitor (the "gio-network-monitor" extension point).
 *
 * Start (GInitable): the service must be on the system bus or activatable
 * (GetNameOwner, then ListActivatableNames), and answer one GetAll of the
 * root object's Target interface (which starts it when it is only
 * activatable), all within REACH_INIT_TIMEOUT_MS; otherwise init fails and
 * GLib takes its next monitor (NetworkManager's, then its own).
 *
 * Then it follows the root object's PropertiesChanged, accepted only from
 * the name's current owner (tracked with NameOwnerChanged), and reads the
 * properties again whenever a new owner appears (a restarted or upgraded
 * daemon). While the service is away the last answer stays.
 *
 * Translation (reach_publish): network-available is Flags' Reachable bit (the
 * kernel has a route to the internet: GLib's "default route"), with Status
 * known; network-metered is Metered; connectivity maps "full", "limited" and
 * "portal" to FULL, LIMITED and PORTAL, "none" to LOCAL, and "unknown"
 * (nothing checked, the kernel backend) to FULL with a route and LOCAL
 * without, as GLib's own monitor does; no route is always LOCAL.
 * network-changed is emitted once when any of the three changed, after
 * their notify signals, and never otherwise. */
#include "monitor.h"

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

static void
unsubscribe (ReachabilitydNetworkMonitor *self)
{
  if (self->owner_subscription != 0)
    g_dbus_connection_signal_unsubscribe (self->bus, self->owner_subscription);
  if (self->properties_subscription != 0)
    g_dbus_connection_signal_unsubscribe (self->bus, self->properties_subscription);
  self->owner_subscription = self->properties_subscription = 0;
}

static gboolean
reach_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (initable);
  gint64 deadline = g_get_monotonic_time () + (gint64) REACH_INIT_TIMEOUT_MS * 1000;
  gchar *owner = NULL;
  GDBusMessage *message, *reply;
  GVariant *properties = NULL;
  const gchar *sender = NULL;

  self->bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, cancellable, error);
  if (self->bus == NULL || !service_present (self->bus, deadline, &owner, cancellable, error))
    return FALSE;
  g_free (owner);

  /* Subscribed before the first read, so that no change falls between. */
  self->owner_subscription = g_dbus_connection_signal_subscribe (
      self->bus, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
      REACH_SERVICE, G_DBUS_SIGNAL_FLAGS_NONE, reach_on_owner_changed, self, NULL);
  self->properties_subscription = g_dbus_connection_signal_subscribe (
      self->bus, REACH_SERVICE, "org.freedesktop.DBus.Properties", "PropertiesChanged", REACH_ROOT_PATH,
      REACH_TARGET_IFACE, G_DBUS_SIGNAL_FLAGS_NONE, reach_on_properties_changed, self, NULL);

  /* This call starts the service if it is only activatable; its reply's
   * sender is the owner whose signals count from now on. */
  message = reach_get_all_message ();
  reply = g_dbus_connection_send_message_with_reply_sync (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          remaining_ms (deadline), NULL, cancellable, error);
  g_object_unref (message);
  properties = reach_get_all_result (reply, &sender, error);
  if (properties == NULL)
    {
      g_clear_object (&reply);
      unsubscribe (self);
      return FALSE;
    }
  reach_set_owner (self, sender);
  reach_take_properties (self, properties);
  reach_publish (self, TRUE);
  g_variant_unref (properties);
  g_object_unref (reply);
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

  if (self->reading != NULL)
    g_cancellable_cancel (self->reading);
  g_clear_object (&self->reading);
  if (self->bus != NULL)
    unsubscribe (self);
  g_clear_object (&self->bus);
  G_OBJECT_CLASS (reachabilityd_network_monitor_parent_class)->dispose (object);
}

static void
reach_finalize (GObject *object)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (object);

  g_free (self->owner);
  g_free (self->connectivity);
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
