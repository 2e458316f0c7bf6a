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
 * Translation (publish): network-available is Flags' Reachable bit (the
 * kernel has a route to the internet: GLib's "default route"), with Status
 * known; network-metered is Metered; connectivity maps "full", "limited" and
 * "portal" to FULL, LIMITED and PORTAL, "none" to LOCAL, and "unknown"
 * (nothing checked, the kernel backend) to FULL with a route and LOCAL
 * without, as GLib's own monitor does; no route is always LOCAL.
 * network-changed is emitted once when any of the three changed, after
 * their notify signals, and never otherwise. */
#include "monitor.h"

#include <string.h>

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

/* --- translation ------------------------------------------------------------ */

static GNetworkConnectivity
connectivity_for (const gchar *word, gboolean available)
{
  if (!available)
    return G_NETWORK_CONNECTIVITY_LOCAL;
  if (g_strcmp0 (word, "full") == 0 || g_strcmp0 (word, "unknown") == 0)
    return G_NETWORK_CONNECTIVITY_FULL;
  if (g_strcmp0 (word, "limited") == 0)
    return G_NETWORK_CONNECTIVITY_LIMITED;
  if (g_strcmp0 (word, "portal") == 0)
    return G_NETWORK_CONNECTIVITY_PORTAL;
  return G_NETWORK_CONNECTIVITY_LOCAL;
}

/* The daemon's words as GLib's three values; notify and network-changed when
 * (and only when) one of them changed, unless quiet (the first read). */
static void
publish (ReachabilitydNetworkMonitor *self, gboolean quiet)
{
  gboolean available = self->status >= 0 && (self->flags & REACH_FLAG_REACHABLE) != 0;
  gboolean metered = available && self->metered;
  GNetworkConnectivity connectivity = connectivity_for (self->connectivity, available);
  gboolean changed = FALSE;

  g_object_freeze_notify (G_OBJECT (self));
  if (available != self->network_available)
    {
      self->network_available = available;
      changed = TRUE;
      if (!quiet)
        g_object_notify (G_OBJECT (self), "network-available");
    }
  if (metered != self->network_metered)
    {
      self->network_metered = metered;
      changed = TRUE;
      if (!quiet)
        g_object_notify (G_OBJECT (self), "network-metered");
    }
  if (connectivity != self->network_connectivity)
    {
      self->network_connectivity = connectivity;
      changed = TRUE;
      if (!quiet)
        g_object_notify (G_OBJECT (self), "connectivity");
    }
  g_object_thaw_notify (G_OBJECT (self));
  if (changed && !quiet)
    g_signal_emit_by_name (self, "network-changed", available);
}

/* Takes the Target properties GLib needs from an a{sv}; others are ignored. */
static void
take_properties (ReachabilitydNetworkMonitor *self, GVariant *properties)
{
  gint32 status;
  guint32 flags;
  gboolean metered;
  const gchar *connectivity;

  if (g_variant_lookup (properties, "Status", "i", &status))
    self->status = status;
  if (g_variant_lookup (properties, "Flags", "u", &flags))
    self->flags = flags;
  if (g_variant_lookup (properties, "Metered", "b", &metered))
    self->metered = metered;
  if (g_variant_lookup (properties, "Connectivity", "&s", &connectivity))
    {
      g_free (self->connectivity);
      self->connectivity = g_strdup (connectivity);
    }
}

static void
set_owner (ReachabilitydNetworkMonitor *self, const gchar *owner)
{
  g_free (self->owner);
  self->owner = owner != NULL && owner[0] != '\0' ? g_strdup (owner) : NULL;
}

/* --- reading the root object ------------------------------------------------- */

static GDBusMessage *
get_all_message (void)
{
  GDBusMessage *message = g_dbus_message_new_method_call (REACH_SERVICE, REACH_ROOT_PATH,
                                                          "org.freedesktop.DBus.Properties", "GetAll");
  g_dbus_message_set_body (message, g_variant_new ("(s)", REACH_TARGET_IFACE));
  return message;
}

/* The reply's a{sv} (new reference), its sender in *sender; NULL and error otherwise. */
static GVariant *
get_all_result (GDBusMessage *reply, const gchar **sender, GError **error)
{
  GVariant *body;

  if (reply == NULL || g_dbus_message_to_gerror (reply, error))
    return NULL;
  body = g_dbus_message_get_body (reply);
  if (body == NULL || !g_variant_is_of_type (body, G_VARIANT_TYPE ("(a{sv})")))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s answered GetAll with %s, not (a{sv})",
                   REACH_SERVICE, body != NULL ? g_variant_get_type_string (body) : "nothing");
      return NULL;
    }
  *sender = g_dbus_message_get_sender (reply);
  return g_variant_get_child_value (body, 0);
}

static void
read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;
  GDBusMessage *reply = g_dbus_connection_send_message_with_reply_finish (G_DBUS_CONNECTION (source), result,
                                                                          &error);
  ReachabilitydNetworkMonitor *self;
  const gchar *sender = NULL;
  GVariant *properties;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      /* Another read replaced this one, or the monitor is going away. */
      g_error_free (error);
      g_clear_object (&reply);
      return;
    }
  self = REACHABILITYD_NETWORK_MONITOR (user_data);
  properties = get_all_result (reply, &sender, error == NULL ? &error : NULL);
  if (properties == NULL)
    {
      /* Gone again before it answered: the next owner's arrival reads again. */
      g_debug ("reachabilityd: reading %s failed: %s", REACH_SERVICE, error != NULL ? error->message : "?");
      g_clear_error (&error);
    }
  else if (g_strcmp0 (sender, self->owner) == 0)
    {
      take_properties (self, properties);
      publish (self, FALSE);
    }
  if (properties != NULL)
    g_variant_unref (properties);
  g_clear_object (&reply);
  g_clear_object (&self->reading);
}

/* Reads every property again (no activation: the owner is there). */
static void
read_again (ReachabilitydNetworkMonitor *self)
{
  GDBusMessage *message = get_all_message ();

  if (self->reading != NULL)
    {
      g_cancellable_cancel (self->reading);
      g_object_unref (self->reading);
    }
  self->reading = g_cancellable_new ();
  g_dbus_message_set_flags (message, G_DBUS_MESSAGE_FLAGS_NO_AUTO_START);
  g_dbus_connection_send_message_with_reply (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, -1, NULL,
                                             self->reading, read_done, self);
  g_object_unref (message);
}

/* --- the daemon's signals ---------------------------------------------------- */

static void
on_owner_changed (GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                  const gchar *member, GVariant *parameters, gpointer user_data)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (user_data);
  const gchar *name, *old_owner, *new_owner;

  (void) bus, (void) sender, (void) path, (void) interface, (void) member;
  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sss)")))
    return;
  g_variant_get (parameters, "(&s&s&s)", &name, &old_owner, &new_owner);
  if (strcmp (name, REACH_SERVICE) != 0 || g_strcmp0 (new_owner[0] ? new_owner : NULL, self->owner) == 0)
    return;  /* not ours, or the owner the first read already came from */
  set_owner (self, new_owner);
  if (self->owner != NULL)
    read_again (self);
}

static void
on_properties_changed (GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                       const gchar *member, GVariant *parameters, gpointer user_data)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (user_data);
  const gchar *changed_interface;
  GVariant *changed, *invalidated;

  (void) bus, (void) path, (void) interface, (void) member;
  /* The bus delivers by the well-known name's owner; checking it here too
   * keeps out anybody else's signal that another match on this connection
   * let in. */
  if (self->owner == NULL || g_strcmp0 (sender, self->owner) != 0
      || !g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sa{sv}as)")))
    return;
  g_variant_get (parameters, "(&s@a{sv}@as)", &changed_interface, &changed, &invalidated);
  if (strcmp (changed_interface, REACH_TARGET_IFACE) == 0)
    {
      take_properties (self, changed);
      if (g_variant_n_children (invalidated) > 0)
        read_again (self);
      else
        publish (self, FALSE);
    }
  g_variant_unref (changed);
  g_variant_unref (invalidated);
}

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
      REACH_SERVICE, G_DBUS_SIGNAL_FLAGS_NONE, on_owner_changed, self, NULL);
  self->properties_subscription = g_dbus_connection_signal_subscribe (
      self->bus, REACH_SERVICE, "org.freedesktop.DBus.Properties", "PropertiesChanged", REACH_ROOT_PATH,
      REACH_TARGET_IFACE, G_DBUS_SIGNAL_FLAGS_NONE, on_properties_changed, self, NULL);

  /* This call starts the service if it is only activatable; its reply's
   * sender is the owner whose signals count from now on. */
  message = get_all_message ();
  reply = g_dbus_connection_send_message_with_reply_sync (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          remaining_ms (deadline), NULL, cancellable, error);
  g_object_unref (message);
  properties = get_all_result (reply, &sender, error);
  if (properties == NULL)
    {
      g_clear_object (&reply);
      unsubscribe (self);
      return FALSE;
    }
  set_owner (self, sender);
  take_properties (self, properties);
  publish (self, TRUE);
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
