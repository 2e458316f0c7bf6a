/* Following the daemon: the internet target held (WatchAddress, again for
 * each new owner), its properties read (GetAll) and followed
 * (PropertiesChanged from the name's current owner only, NameOwnerChanged
 * for a new owner, held and read again); GLib's next monitor
 * followed beside it and handed the answer while the service cannot be
 * had (hand_over, take_over); and both translated into GLib's three
 * values (reach_publish). monitor.c's top comment says when each answers
 * and what the mapping is. */
#include "monitor.h"

#include <string.h>

/* --- translation ------------------------------------------------------------ */

/* The daemon's Connectivity while there is a route: "none" (NetworkManager
 * has no connection with a default route, so it checked nothing on the one
 * the kernel uses) and "unknown" (nothing checked) are FULL, as GLib's own
 * monitor says of a default route it did not check. */
static GNetworkConnectivity
connectivity_with_route (const gchar *word)
{
  if (g_strcmp0 (word, "limited") == 0)
    return G_NETWORK_CONNECTIVITY_LIMITED;
  if (g_strcmp0 (word, "portal") == 0)
    return G_NETWORK_CONNECTIVITY_PORTAL;
  return G_NETWORK_CONNECTIVITY_FULL;
}

/* What GLib's callers are to see now: the daemon's words, or while the
 * module has handed over, GLib's next monitor's values; GLib's rules then
 * hold whoever answered (metered and a connectivity above LOCAL only with a
 * default route, LOCAL only without one). */
static void
current_answer (ReachabilitydNetworkMonitor *self, gboolean *available, gboolean *metered,
                GNetworkConnectivity *connectivity)
{
  if (!g_atomic_int_get (&self->handed_over))
    {
      *available = self->status >= 0 && (self->flags & REACH_FLAG_REACHABLE) != 0;
      *metered = self->metered;
      *connectivity = connectivity_with_route (self->connectivity);
    }
  else if (self->fallback != NULL)
    {
      *available = g_network_monitor_get_network_available (self->fallback);
      *metered = g_network_monitor_get_network_metered (self->fallback);
      *connectivity = g_network_monitor_get_connectivity (self->fallback);
    }
  else
    {
      /* No monitor of GLib's could start: nothing is known. */
      *available = *metered = FALSE;
      *connectivity = G_NETWORK_CONNECTIVITY_LOCAL;
    }
  *metered = *available && *metered;
  if (!*available)
    *connectivity = G_NETWORK_CONNECTIVITY_LOCAL;
  else if (*connectivity == G_NETWORK_CONNECTIVITY_LOCAL)
    *connectivity = G_NETWORK_CONNECTIVITY_FULL;
}

/* The current answer as GLib's three values; notify and network-changed when
 * (and only when) one of them changed, unless quiet (the first read). */
void
reach_publish (ReachabilitydNetworkMonitor *self, gboolean quiet)
{
  gboolean available, metered, changed = FALSE;
  GNetworkConnectivity connectivity;

  current_answer (self, &available, &metered, &connectivity);
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

/* --- who answers ------------------------------------------------------------- */

/* The service cannot be had (why): GLib's next monitor answers from now on. */
static void
hand_over (ReachabilitydNetworkMonitor *self, const gchar *why)
{
  if (!g_atomic_int_get (&self->handed_over))
    {
      g_debug ("%s; %s answers until it is back", why,
               self->fallback != NULL ? G_OBJECT_TYPE_NAME (self->fallback) : "nobody");
      g_atomic_int_set (&self->handed_over, TRUE);
    }
  reach_publish (self, FALSE);
}

/* The owner answered with all its properties: its answer is GLib's again. */
static void
take_over (ReachabilitydNetworkMonitor *self, GVariant *properties)
{
  reach_take_properties (self, properties);
  if (g_atomic_int_get (&self->handed_over))
    {
      g_debug ("%s answers again (%s)", REACH_SERVICE, self->owner);
      g_atomic_int_set (&self->handed_over, FALSE);
    }
  reach_publish (self, FALSE);
}

/* --- holding and reading the internet target -------------------------------- */

/* Holding the internet target: the object whose answer is this program's
 * user's own (a held target's signals go to its holders, each in its own
 * user's view). Holding twice is holding once. */
GDBusMessage *
reach_hold_message (void)
{
  GDBusMessage *message = g_dbus_message_new_method_call (REACH_SERVICE, REACH_ROOT_PATH, REACH_MANAGER_IFACE,
                                                          "WatchAddress");
  g_dbus_message_set_body (message, g_variant_new ("(s)", REACH_INTERNET_ADDRESS));
  return message;
}

/* TRUE when the reply holds REACH_INTERNET_PATH for us (its sender in *sender). */
gboolean
reach_hold_result (GDBusMessage *reply, const gchar **sender, GError **error)
{
  GVariant *body;
  const gchar *path = NULL;

  if (reply == NULL || g_dbus_message_to_gerror (reply, error))
    return FALSE;
  body = g_dbus_message_get_body (reply);
  if (body != NULL && g_variant_is_of_type (body, G_VARIANT_TYPE ("(o)")))
    g_variant_get (body, "(&o)", &path);
  if (g_strcmp0 (path, REACH_INTERNET_PATH) != 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s answered WatchAddress %s with %s, not %s",
                   REACH_SERVICE, REACH_INTERNET_ADDRESS, path != NULL ? path : body != NULL ? g_variant_get_type_string (body) : "nothing",
                   REACH_INTERNET_PATH);
      return FALSE;
    }
  *sender = g_dbus_message_get_sender (reply);
  return TRUE;
}

/* Lets the internet target go (the monitor is going away, or init found
 * the service is another namespace's); no answer is waited for. */
void
reach_release (ReachabilitydNetworkMonitor *self)
{
  GDBusMessage *message;

  if (!self->held || self->owner == NULL)
    return;
  message = g_dbus_message_new_method_call (self->owner, REACH_ROOT_PATH, REACH_MANAGER_IFACE, "Release");
  g_dbus_message_set_body (message, g_variant_new ("(o)", REACH_INTERNET_PATH));
  g_dbus_message_set_flags (message, G_DBUS_MESSAGE_FLAGS_NO_REPLY_EXPECTED | G_DBUS_MESSAGE_FLAGS_NO_AUTO_START);
  g_dbus_connection_send_message (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, NULL, NULL);
  g_object_unref (message);
  self->held = FALSE;
}

GDBusMessage *
reach_get_all_message (void)
{
  GDBusMessage *message = g_dbus_message_new_method_call (REACH_SERVICE, REACH_INTERNET_PATH,
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
clear_bound (ReachabilitydNetworkMonitor *self)
{
  if (self->read_bound != NULL)
    {
      g_source_destroy (self->read_bound);
      g_clear_pointer (&self->read_bound, g_source_unref);
    }
}

static void
stop_reading (ReachabilitydNetworkMonitor *self)
{
  if (self->reading != NULL)
    {
      g_cancellable_cancel (self->reading);
      g_clear_object (&self->reading);
    }
  clear_bound (self);
}

/* The reply to a call of a read (send_in_read), or an error; FALSE when the
 * read was cancelled (another replaced it, or the monitor is going away):
 * then nothing may be touched. */
static gboolean
read_step_finished (GObject *source, GAsyncResult *result, GDBusMessage **reply, GError **error)
{
  *reply = g_dbus_connection_send_message_with_reply_finish (G_DBUS_CONNECTION (source), result, error);
  if (!g_error_matches (*error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return TRUE;
  g_clear_error (error);
  g_clear_object (reply);
  return FALSE;
}

static void
read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;
  GDBusMessage *reply;
  ReachabilitydNetworkMonitor *self;
  const gchar *sender = NULL;
  GVariant *properties;

  if (!read_step_finished (source, result, &reply, &error))
    return;
  self = REACHABILITYD_NETWORK_MONITOR (user_data);
  g_clear_object (&self->reading);
  clear_bound (self);
  properties = reach_get_all_result (reply, &sender, error == NULL ? &error : NULL);
  if (properties == NULL)
    {
      /* Gone, or an error instead of its answer: the next owner, its next
       * signal or GLib's next change reads again. */
      gchar *why = g_strdup_printf ("reading %s failed: %s", REACH_SERVICE, error != NULL ? error->message : "?");
      self->held = FALSE;  /* the next read holds again, in case the hold is what went */
      hand_over (self, why);
      g_free (why);
      g_clear_error (&error);
    }
  else if (g_strcmp0 (sender, self->owner) == 0)
    take_over (self, properties);
  if (properties != NULL)
    g_variant_unref (properties);
  g_clear_object (&reply);
}

static gboolean
read_overdue (gpointer user_data)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (user_data);

  /* The read stays in flight: its answer, however late, is the service back. */
  g_clear_pointer (&self->read_bound, g_source_unref);
  hand_over (self, "no answer within " G_STRINGIFY (REACH_CALL_TIMEOUT_MS) " ms (hung)");
  return G_SOURCE_REMOVE;
}

/* Sends message (no activation: the owner is there) with the read's cancellable. */
static void
send_in_read (ReachabilitydNetworkMonitor *self, GDBusMessage *message, GAsyncReadyCallback done)
{
  g_dbus_message_set_flags (message, G_DBUS_MESSAGE_FLAGS_NO_AUTO_START);
  g_dbus_connection_send_message_with_reply (self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, G_MAXINT, NULL,
                                             self->reading, done, self);
  g_object_unref (message);
}

static void
hold_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;
  GDBusMessage *reply;
  ReachabilitydNetworkMonitor *self;
  const gchar *sender = NULL;

  if (!read_step_finished (source, result, &reply, &error))
    return;
  self = REACHABILITYD_NETWORK_MONITOR (user_data);
  if (!reach_hold_result (reply, &sender, error == NULL ? &error : NULL) || g_strcmp0 (sender, self->owner) != 0)
    {
      /* Refused (the user's targets are all taken), or another owner's
       * answer: GLib's next monitor answers until the next owner or change. */
      gchar *why = g_strdup_printf ("holding %s's internet target failed: %s", REACH_SERVICE,
                                    error != NULL ? error->message : "another owner answered");
      g_clear_object (&self->reading);
      clear_bound (self);
      hand_over (self, why);
      g_free (why);
    }
  else
    {
      self->held = TRUE;
      send_in_read (self, reach_get_all_message (), read_done);
    }
  g_clear_error (&error);
  g_clear_object (&reply);
}

/* Reads every property of the internet target, holding it first when this
 * owner does not hold it for us yet (a new owner, or a read that failed);
 * past REACH_CALL_TIMEOUT_MS without the answer the service counts as
 * hung. The bound is the module's own timer rather than the calls', so
 * that they stay in flight and the late answer hands the service back;
 * handed over already, a read has no bound (there is nothing more to hand
 * over), so a hung service costs no timer. */
static void
start_read (ReachabilitydNetworkMonitor *self)
{
  self->reading = g_cancellable_new ();
  if (self->held)
    send_in_read (self, reach_get_all_message (), read_done);
  else
    send_in_read (self, reach_hold_message (), hold_done);
  if (g_atomic_int_get (&self->handed_over))
    return;
  self->read_bound = g_timeout_source_new (REACH_CALL_TIMEOUT_MS);
  g_source_set_callback (self->read_bound, read_overdue, self, NULL);
  g_source_attach (self->read_bound, self->context);
}

/* A read that replaces the one in flight (its answer may predate what is asked now). */
static void
read_again (ReachabilitydNetworkMonitor *self)
{
  stop_reading (self);
  start_read (self);
}

/* Is the owner there? A read, unless one is in flight already (it answers that). */
static void
probe (ReachabilitydNetworkMonitor *self)
{
  if (self->owner != NULL && self->reading == NULL)
    start_read (self);
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
  self->held = FALSE;  /* a new owner (or none) holds nothing for us */
  if (self->owner != NULL)
    read_again (self);
  else
    {
      stop_reading (self);
      hand_over (self, REACH_SERVICE " left the bus");
    }
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
      /* Handed over, this is the owner alive again: read everything, then take over. */
      if (g_atomic_int_get (&self->handed_over) || g_variant_n_children (invalidated) > 0)
        read_again (self);
      else
        reach_publish (self, FALSE);
    }
  g_variant_unref (changed);
  g_variant_unref (invalidated);
}

/* --- GLib's next monitor ----------------------------------------------------- */

/* One turn after the fallback's signals (its notify and network-changed
 * come one after another; the turn sees all three values settled): handed
 * over, its answer is published; either way the network changed, so the
 * service is asked within the bound whether it is there to say so. */
static gboolean
fallback_turn (gpointer user_data)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (user_data);

  g_clear_pointer (&self->fallback_turn, g_source_unref);
  if (g_atomic_int_get (&self->handed_over))
    reach_publish (self, FALSE);
  probe (self);
  return G_SOURCE_REMOVE;
}

static void
fallback_changed (ReachabilitydNetworkMonitor *self)
{
  if (self->fallback_turn != NULL)
    return;
  self->fallback_turn = g_idle_source_new ();
  g_source_set_callback (self->fallback_turn, fallback_turn, self, NULL);
  g_source_attach (self->fallback_turn, self->context);
}

static void
on_fallback_network_changed (GNetworkMonitor *fallback, gboolean available, gpointer user_data)
{
  (void) fallback, (void) available;
  fallback_changed (REACHABILITYD_NETWORK_MONITOR (user_data));
}

static void
on_fallback_notify (GObject *fallback, GParamSpec *pspec, gpointer user_data)
{
  (void) fallback, (void) pspec;
  fallback_changed (REACHABILITYD_NETWORK_MONITOR (user_data));
}

/* Follows self->fallback's signals (the monitor made at start, if any). */
void
reach_follow_fallback (ReachabilitydNetworkMonitor *self)
{
  if (self->fallback == NULL)
    return;
  g_signal_connect (self->fallback, "network-changed", G_CALLBACK (on_fallback_network_changed), self);
  g_signal_connect (self->fallback, "notify", G_CALLBACK (on_fallback_notify), self);
}

/* Stops everything follow.c started (the monitor is going away). */
void
reach_unfollow (ReachabilitydNetworkMonitor *self)
{
  stop_reading (self);
  if (self->fallback_turn != NULL)
    {
      g_source_destroy (self->fallback_turn);
      g_clear_pointer (&self->fallback_turn, g_source_unref);
    }
  if (self->fallback != NULL)
    g_signal_handlers_disconnect_by_data (self->fallback, self);
  g_clear_object (&self->fallback);
}

static gboolean
hung_turn (gpointer user_data)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (user_data);

  if (self->owner == NULL)
    return G_SOURCE_REMOVE;  /* gone meanwhile: handed over already */
  hand_over (self, "no answer to can_reach within " G_STRINGIFY (REACH_CALL_TIMEOUT_MS) " ms (hung)");
  /* A read in flight: its answer, however late, is the service back. */
  probe (self);
  return G_SOURCE_REMOVE;
}

/* A can_reach (on any thread) had no sign of life from the owner within
 * the bound: the monitor hands over, in its own context. */
void
reach_hung (ReachabilitydNetworkMonitor *self)
{
  GSource *source = g_idle_source_new ();

  g_source_set_callback (source, hung_turn, g_object_ref (self), g_object_unref);
  g_source_attach (source, self->context);
  g_source_unref (source);
}
