/* g_network_monitor_can_reach (and its async form) through the daemon's
 * Manager.Query: the connectable becomes the name or address literal the
 * daemon evaluates (a GNetworkAddress's host name, a GInetSocketAddress's
 * address; anything else, a GNetworkService for one, gives its first
 * address), and the daemon's answer becomes GLib's: reachable (Status 1
 * or 2) is TRUE; otherwise G_IO_ERROR_HOST_NOT_FOUND for a name that did
 * not resolve, G_IO_ERROR_NETWORK_UNREACHABLE while the network is not
 * available, G_IO_ERROR_HOST_UNREACHABLE else (GLib's own monitor's
 * codes), with the daemon's Error text as the message.
 *
 * While the module has handed over (follow.c), GLib's next monitor answers
 * instead, with the caller's connectable. So it does when the service
 * cannot be had for this question: gone from the bus, or hung, which is
 * no sign of life within REACH_CALL_TIMEOUT_MS of the question; then the
 * monitor hands over too (reach_hung). The sign of life is Query's answer;
 * for a host name, whose lookup may take the daemon longer than the bound
 * (a DNS server that does not answer: glibc's 5 s, twice), it is also the
 * answer to a GetAll sent with the Query: a daemon that answers it is
 * working on the lookup, and its answer is waited for (up to GDBus's
 * default timeout). A can_reach thus returns within the bound, plus GLib's
 * monitor's own time, unless the service is alive and looking the name up.
 *
 * One machine answers both forms: the async one in the caller's context;
 * the sync one runs it in a context of its own, iterated until the
 * question and every call it made are done. */
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

/* The service could not be had for the call (rather than answering with an error). */
static gboolean
service_unavailable (const GError *error)
{
  static const gint bus_codes[] = {
    G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_NO_REPLY,
    G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_TIMEOUT, G_DBUS_ERROR_TIMED_OUT,
  };

  if (error->domain == G_IO_ERROR)
    return error->code == G_IO_ERROR_TIMED_OUT || error->code == G_IO_ERROR_CLOSED;
  if (error->domain == G_DBUS_ERROR)
    for (gsize i = 0; i < G_N_ELEMENTS (bus_codes); i++)
      if (error->code == bus_codes[i])
        return TRUE;
  return FALSE;
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

/* --- one question ------------------------------------------------------------- */

typedef struct
{
  GSocketConnectable *connectable;  /* the caller's: GLib's next monitor is asked with it */
  gchar *target;                    /* what the daemon is asked about, once known */
  GCancellable *calls;              /* this question's calls to the service */
  GCancellable *caller;             /* the caller's cancellable, which cancels them too */
  gulong caller_handler;
  GSource *bound;                   /* REACH_CALL_TIMEOUT_MS from the question to a sign of life */
  gboolean alive;                   /* the owner answered the GetAll sent with the Query */
  gboolean settled;                 /* the answer is decided; late calls are dropped */
} Asking;

static void
cancel_calls (GCancellable *caller, gpointer calls)
{
  (void) caller;
  g_cancellable_cancel (G_CANCELLABLE (calls));
}

static void
asking_free (gpointer data)
{
  Asking *asking = data;

  if (asking->caller != NULL)
    {
      g_cancellable_disconnect (asking->caller, asking->caller_handler);
      g_object_unref (asking->caller);
    }
  g_object_unref (asking->calls);
  g_object_unref (asking->connectable);
  g_free (asking->target);
  g_free (asking);
}

/* The answer is decided: the bound and the service's calls are done with. */
static Asking *
settle (GTask *task)
{
  Asking *asking = g_task_get_task_data (task);

  asking->settled = TRUE;
  if (asking->bound != NULL)
    {
      g_source_destroy (asking->bound);
      g_clear_pointer (&asking->bound, g_source_unref);
    }
  g_cancellable_cancel (asking->calls);
  return asking;
}

static void
fallback_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;

  if (g_network_monitor_can_reach_finish (G_NETWORK_MONITOR (source), result, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
  g_object_unref (task);
}

/* GLib's next monitor answers (error: why the service did not, kept if there is none). */
static void
ask_fallback (GTask *task, GError *error)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task));
  Asking *asking = settle (task);

  if (self->fallback == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  if (error != NULL)
    {
      g_debug ("can_reach (%s): %s; %s answers", asking->target, error->message, G_OBJECT_TYPE_NAME (self->fallback));
      g_error_free (error);
    }
  g_network_monitor_can_reach_async (self->fallback, asking->connectable, asking->caller, fallback_done,
                                     g_object_ref (task));
}

static void
query_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task));
  Asking *asking = g_task_get_task_data (task);
  GError *error = NULL;
  GVariant *reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);

  if (asking->settled)
    g_clear_error (&error);
  else if (reply == NULL && service_unavailable (error))
    ask_fallback (task, error);
  else if (reply == NULL)
    {
      settle (task);
      g_task_return_error (task, call_error (error));
    }
  else
    {
      settle (task);
      if (answer (self, asking->target, reply, &error))
        g_task_return_boolean (task, TRUE);
      else
        g_task_return_error (task, error);
    }
  if (reply != NULL)
    g_variant_unref (reply);
  g_object_unref (task);
}

static void
alive_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Asking *asking = g_task_get_task_data (task);
  GVariant *reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, NULL);

  if (reply != NULL)
    {
      asking->alive = TRUE;
      g_variant_unref (reply);
    }
  g_object_unref (task);
}

static gboolean
overdue (gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task));
  Asking *asking = g_task_get_task_data (task);

  g_clear_pointer (&asking->bound, g_source_unref);
  if (asking->alive)
    return G_SOURCE_REMOVE;  /* the daemon is looking the name up */
  reach_hung (self);
  ask_fallback (task, g_error_new (G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "%s did not answer within %d ms",
                                   REACH_SERVICE, REACH_CALL_TIMEOUT_MS));
  return G_SOURCE_REMOVE;
}

/* Asks the daemon (target: consumed); the bound starts now. */
static void
query (GTask *task, gchar *target)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (g_task_get_source_object (task));
  Asking *asking = g_task_get_task_data (task);

  asking->target = target;
  g_dbus_connection_call (self->bus, REACH_SERVICE, REACH_ROOT_PATH, REACH_MANAGER_IFACE, "Query",
                          g_variant_new ("(s)", target), G_VARIANT_TYPE ("(uia{sv})"),
                          G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, asking->calls, query_done, g_object_ref (task));
  if (!g_hostname_is_ip_address (target) && target[0] != '\0')
    g_dbus_connection_call (self->bus, REACH_SERVICE, REACH_ROOT_PATH, "org.freedesktop.DBus.Properties", "GetAll",
                            g_variant_new ("(s)", REACH_TARGET_IFACE), G_VARIANT_TYPE ("(a{sv})"),
                            G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, asking->calls, alive_done, g_object_ref (task));
  asking->bound = g_timeout_source_new (REACH_CALL_TIMEOUT_MS);
  g_source_set_callback (asking->bound, overdue, g_object_ref (task), g_object_unref);
  g_source_attach (asking->bound, g_task_get_context (task));
}

static void
enumerated (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;
  GSocketAddress *address = g_socket_address_enumerator_next_finish (G_SOCKET_ADDRESS_ENUMERATOR (source), result,
                                                                     &error);
  gchar *target = enumerated_target (address, &error);

  if (target == NULL)
    {
      settle (task);
      g_task_return_error (task, error);
    }
  else
    query (task, target);
  g_object_unref (source);
  g_object_unref (task);
}

/* Starts a question in the thread-default context; returns its task (a reference). */
static GTask *
ask (ReachabilitydNetworkMonitor *self, GSocketConnectable *connectable, GCancellable *cancellable,
     GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  Asking *asking = g_new0 (Asking, 1);
  gchar *target;

  g_task_set_source_tag (task, reach_can_reach_async);
  asking->connectable = g_object_ref (connectable);
  asking->calls = g_cancellable_new ();
  g_task_set_task_data (task, asking, asking_free);
  if (cancellable != NULL)
    {
      asking->caller = g_object_ref (cancellable);
      asking->caller_handler = g_cancellable_connect (cancellable, G_CALLBACK (cancel_calls),
                                                      g_object_ref (asking->calls), g_object_unref);
    }
  if (g_atomic_int_get (&self->handed_over) && self->fallback != NULL)
    {
      ask_fallback (task, NULL);
      return task;
    }
  target = direct_target (connectable);
  if (target != NULL)
    query (task, target);
  else
    {
      g_socket_address_enumerator_next_async (g_socket_connectable_enumerate (connectable), asking->calls,
                                              enumerated, g_object_ref (task));
    }
  return task;
}

void
reach_can_reach_async (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  g_object_unref (ask (REACHABILITYD_NETWORK_MONITOR (monitor), connectable, cancellable, callback, user_data));
}

gboolean
reach_can_reach_finish (GNetworkMonitor *monitor, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, monitor), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

typedef struct
{
  gboolean done;
  gboolean reachable;
  GError *error;
} Waiting;

static void
waited (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Waiting *waiting = user_data;

  waiting->reachable = reach_can_reach_finish (G_NETWORK_MONITOR (source), result, &waiting->error);
  waiting->done = TRUE;
}

gboolean
reach_can_reach (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable,
                 GError **error)
{
  ReachabilitydNetworkMonitor *self = REACHABILITYD_NETWORK_MONITOR (monitor);
  GMainContext *context;
  Waiting waiting = { FALSE, FALSE, NULL };
  GTask *task;

  if (g_atomic_int_get (&self->handed_over) && self->fallback != NULL)
    return g_network_monitor_can_reach (self->fallback, connectable, cancellable, error);
  context = g_main_context_new ();
  g_main_context_push_thread_default (context);
  task = ask (self, connectable, cancellable, waited, &waiting);
  /* Until the answer, and until the calls it settled (cancelled) have
   * come back and let the question go: nothing is left on this context. */
  g_object_add_weak_pointer (G_OBJECT (task), (gpointer *) &task);
  g_object_unref (task);
  while (!waiting.done || task != NULL)
    g_main_context_iteration (context, TRUE);
  g_main_context_pop_thread_default (context);
  g_main_context_unref (context);
  if (waiting.error != NULL)
    g_propagate_error (error, waiting.error);
  return waiting.reachable;
}
