/* Following the daemon: its root object's properties read (GetAll) and
 * followed (PropertiesChanged from the name's current owner only,
 * NameOwnerChanged for a new owner, read again), and translated into
 * GLib's three values (reach_publish; the mapping is described in
 * monitor.c's top comment). */
#include "monitor.h"

#include <string.h>

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
void
reach_publish (ReachabilitydNetworkMonitor *self, gboolean quiet)
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
void
reach_take_properties (ReachabilitydNetworkMonitor *self, GVariant *properties)
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

void
reach_set_owner (ReachabilitydNetworkMonitor *self, const gchar *owner)
{
  g_free (self->owner);
  self->owner = owner != NULL && owner[0] != '\0' ? g_strdup (owner) : NULL;
}

/* --- reading the root object ------------------------------------------------- */

GDBusMessage *
reach_get_all_message (void)
{
  GDBusMessage *message = g_dbus_message_new_method_call (REACH_SERVICE, REACH_ROOT_PATH,
                                                          "org.freedesktop.DBus.Properties", "GetAll");
  g_dbus_message_set_body (message, g_variant_new ("(s)", REACH_TARGET_IFACE));
  return message;
}

/* The reply's a{sv} (new reference), its sender in *sender; NULL and error otherwise. */
GVariant *
reach_get_all_result (GDBusMessage *reply, const gchar **sender, GError **error)
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
  properties = reach_get_all_result (reply, &sender, error == NULL ? &error : NULL);
  if (properties == NULL)
    {
      /* Gone again before it answered: the next owner's arrival reads again. */
      g_debug ("reachabilityd: reading %s failed: %s", REACH_SERVICE, error != NULL ? error->message : "?");
      g_clear_error (&error);
    }
  else if (g_strcmp0 (sender, self->owner) == 0)
    {
      reach_take_properties (self, properties);
      reach_publish (self, FALSE);
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
  GDBusMessage *message = reach_get_all_message ();

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

void
reach_on_owner_changed (GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
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
  reach_set_owner (self, new_owner);
  if (self->owner != NULL)
    read_again (self);
}

void
reach_on_properties_changed (GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
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
      reach_take_properties (self, changed);
      if (g_variant_n_children (invalidated) > 0)
        read_again (self);
      else
        reach_publish (self, FALSE);
    }
  g_variant_unref (changed);
  g_variant_unref (invalidated);
}

