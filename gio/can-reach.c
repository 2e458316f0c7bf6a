/* g_network_monitor_can_reach (and its async form) through the daemon's
 * Manager.Query: the connectable becomes the name or address literal the
 * daemon evaluates (a GNetworkAddress's host name, a GInetSocketAddress's
 * address; anything else, a GNetworkService for one, gives its first
 * address), and the daemon's answer becomes GLib's: reachable (Status 1
 * or 2) is TRUE; otherwise G_IO_ERROR_HOST_NOT_FOUND for a name that did
 * not resolve, G_IO_ERROR_NETWORK_UNREACHABLE while the network is not
 * available, G_IO_ERROR_HOST_UNREACHABLE else (GLib's own monitor's
 * codes), with the daemon's Error text as the message. */
#include "monitor.h"

#include <string.h>

#define INVALID_TARGET REACH_SERVICE ".Error.InvalidTarget"

/* The target when the connectable names it without a lookup; NULL otherwise. */
static gchar *
direct_target (GSocketConnectable *connectable)
{
  if (G_IS_NETWORK_ADDRESS (connectable))
    return g_strdup (g_network_address_get_hostname (G_NETWORK_ADDRESS (connectable)));
  if (G_IS_INET_SOCKET_ADDRESS (connectable))
    return g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (connectable)));
  return NULL;
}

/* The target for an enumerated address (consumed); NULL with error otherwise. */
static gchar *
enumerated_target (GSocketAddress *address, GError **error)
{
  gchar *target = NULL;

  if (address == NULL)
    {
      if (error != NULL && *error == NULL)
        g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_HOST_NOT_FOUND, "the connectable has no address");
      return NULL;
    }
  if (G_IS_INET_SOCKET_ADDRESS (address))
    target = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address)));
  else
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                         "reachabilityd answers for network addresses only");
  g_object_unref (address);
  return target;
}

/* A D-Bus error of the call, in GIO's terms where one fits. */
static GError *
call_error (GError *error)
{
  gchar *name = g_dbus_error_get_remote_error (error);

  if (g_strcmp0 (name, INVALID_TARGET) == 0)
    {
      g_dbus_error_strip_remote_error (error);
      error->domain = G_IO_ERROR;
      error->code = G_IO_ERROR_INVALID_ARGUMENT;
    }
  g_free (name);
  return error;
}

/* Query's reply, (uia{sv}), as TRUE or an error. */
static gboolean
answer (ReachabilitydNetworkMonitor *self, const gchar *target, GVariant *reply, GError **error)
{
  guint32 flags;
  gint32 status;
  GVariant *details;
  const gchar *reason = "", *text = "";
  gint code;

  g_variant_get (reply, "(ui@a{sv})", &flags, &status, &details);
  if (status == 1 || status == 2)
    {
      g_variant_unref (details);
      return TRUE;
    }
  g_variant_lookup (details, "reason", "&s", &reason);
  g_variant_lookup (details, "error", "&s", &text);
  if (strcmp (reason, "lookup-failed") == 0)
    code = G_IO_ERROR_HOST_NOT_FOUND;
  else if (!self->network_available)
    code = G_IO_ERROR_NETWORK_UNREACHABLE;
  else
    code = G_IO_ERROR_HOST_UNREACHABLE;
  g_set_error (error, G_IO_ERROR, code, "%s is not reachable: %s", target,
               text[0] != '\0' ? text : status < 0 ? "not known yet" : reason[0] != '\0' ? reason : "no route");
  g_variant_unref (details);
  return FALSE;
}

gboolean
reach_can_reach (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable,
                 GError **error)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (monitor);
  gchar *target = direct_target (connectable);
  GVariant *reply;
  GError *local = NULL;
  gboolean reachable;

  if (target == NULL)
    {
      GSocketAddressEnumerator *addresses = g_socket_connectable_enumerate (connectable);
      target = enumerated_target (g_socket_address_enumerator_next (addresses, cancellable, error), error);
      g_object_unref (addresses);
      if (target == NULL)
        return FALSE;
    }
  reply = g_dbus_connection_call_sync (self->bus, REACH_SERVICE, REACH_ROOT_PATH, REACH_MANAGER_IFACE, "Query",
                                       g_variant_new ("(s)", target), G_VARIANT_TYPE ("(uia{sv})"),
                                       G_DBUS_CALL_FLAGS_NONE, -1, cancellable, &local);
  if (reply == NULL)
    {
      g_propagate_error (error, call_error (local));
      g_free (target);
      return FALSE;
    }
  reachable = answer (self, target, reply, error);
  g_variant_unref (reply);
  g_free (target);
  return reachable;
}

static void
query_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;
  GVariant *reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);

  if (reply == NULL)
    g_task_return_error (task, call_error (error));
  else if (answer (REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task)), g_task_get_task_data (task),
                   reply, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
  if (reply != NULL)
    g_variant_unref (reply);
  g_object_unref (task);
}

static void
query_async (GTask *task, gchar *target)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task));

  g_task_set_task_data (task, target, g_free);
  g_dbus_connection_call (self->bus, REACH_SERVICE, REACH_ROOT_PATH, REACH_MANAGER_IFACE, "Query",
                          g_variant_new ("(s)", target), G_VARIANT_TYPE ("(uia{sv})"), G_DBUS_CALL_FLAGS_NONE, -1,
                          g_task_get_cancellable (task), query_done, task);
}

static void
enumerated (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;
  GSocketAddress *address = g_socket_address_enumerator_next_finish (G_SOCKET_ADDRESS_ENUMERATOR (source), result,
                                                                     &error);
  gchar *target = enumerated_target (address, &error);

  g_object_unref (source);
  if (target == NULL)
    {
      g_task_return_error (task, error);
      g_object_unref (task);
      return;
    }
  query_async (task, target);
}

void
reach_can_reach_async (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (monitor, cancellable, callback, user_data);
  gchar *target = direct_target (connectable);

  g_task_set_source_tag (task, reach_can_reach_async);
  if (target != NULL)
    query_async (task, target);
  else
    g_socket_address_enumerator_next_async (g_socket_connectable_enumerate (connectable), cancellable, enumerated,
                                            task);
}

gboolean
reach_can_reach_finish (GNetworkMonitor *monitor, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, monitor), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
