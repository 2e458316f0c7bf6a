/* A GLib program that knows nothing of reachabilityd: GIO's network monitor
 * only (g_network_monitor_get_default and its API), printing what it sees.
 *
 *   monitor-test [--follow] [HOST-OR-ADDRESS ...]
 *
 * Prints "ready TYPE AVAILABLE METERED CONNECTIVITY" (the default monitor's
 * type name; 0/1; 0/1; GNetworkConnectivity's number), then for each
 * argument "reach sync ARG ok" or "reach sync ARG error CODE MESSAGE"
 * (g_network_monitor_can_reach; CODE a GIOErrorEnum number, -1 for
 * another domain) and the same with "async"
 * (g_network_monitor_can_reach_async). With --follow it then prints
 * "changed MONOTONIC AVAILABLE METERED CONNECTIVITY PROPERTY" (seconds on
 * CLOCK_MONOTONIC; AVAILABLE the signal's argument, PROPERTY what
 * g_network_monitor_get_network_available says in the handler, which is
 * what a program that reads the monitor sees) for every network-changed, and answers each line of its
 * standard input (a host or address) as the arguments ("async" only; a
 * line "sync HOST-OR-ADDRESS" with g_network_monitor_can_reach, printed as
 * "reach sync ..."), until its standard input ends; otherwise it exits. */
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

static GMainLoop *loop;
static guint pending;
static gboolean following;

static void
print_answer (const char *how, const char *target, gboolean reachable, GError *error)
{
  if (reachable)
    printf ("reach %s %s ok\n", how, target);
  else
    printf ("reach %s %s error %d %s\n", how, target, error->domain == G_IO_ERROR ? error->code : -1,
            error->message);
  fflush (stdout);
}

static GSocketConnectable *
connectable_for (const char *target)
{
  GInetAddress *address = g_inet_address_new_from_string (target);
  GSocketConnectable *connectable;

  if (address == NULL)
    return g_network_address_new (target, 80);
  connectable = G_SOCKET_CONNECTABLE (g_inet_socket_address_new (address, 80));
  g_object_unref (address);
  return connectable;
}

static void
reached (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;
  gboolean reachable = g_network_monitor_can_reach_finish (G_NETWORK_MONITOR (source), result, &error);

  print_answer ("async", user_data, reachable, error);
  g_clear_error (&error);
  g_free (user_data);
  if (--pending == 0 && !following)
    g_main_loop_quit (loop);
}

static void
ask_sync (GNetworkMonitor *monitor, const char *target)
{
  GSocketConnectable *connectable = connectable_for (target);
  GError *error = NULL;
  gboolean reachable = g_network_monitor_can_reach (monitor, connectable, NULL, &error);

  print_answer ("sync", target, reachable, error);
  g_clear_error (&error);
  g_object_unref (connectable);
}

static void
ask (GNetworkMonitor *monitor, const char *target)
{
  GSocketConnectable *connectable = connectable_for (target);

  pending++;
  g_network_monitor_can_reach_async (monitor, connectable, NULL, reached, g_strdup (target));
  g_object_unref (connectable);
}

static void
changed (GNetworkMonitor *monitor, gboolean available, gpointer user_data)
{
  (void) user_data;
  printf ("changed %.6f %d %d %d %d\n", g_get_monotonic_time () / 1e6, available,
          g_network_monitor_get_network_metered (monitor), g_network_monitor_get_connectivity (monitor),
          g_network_monitor_get_network_available (monitor));
  fflush (stdout);
}

static gboolean
input (GIOChannel *channel, GIOCondition condition, gpointer user_data)
{
  gchar *line = NULL;
  GIOStatus status = g_io_channel_read_line (channel, &line, NULL, NULL, NULL);

  (void) condition;
  if (status == G_IO_STATUS_NORMAL)
    {
      g_strstrip (line);
      if (g_str_has_prefix (line, "sync "))
        ask_sync (G_NETWORK_MONITOR (user_data), g_strstrip (line + strlen ("sync ")));
      else if (line[0] != '\0')
        ask (G_NETWORK_MONITOR (user_data), line);
      g_free (line);
      return G_SOURCE_CONTINUE;
    }
  g_free (line);
  if (status == G_IO_STATUS_AGAIN)
    return G_SOURCE_CONTINUE;
  g_main_loop_quit (loop);
  return G_SOURCE_REMOVE;
}

int
main (int argc, char **argv)
{
  gboolean follow = argc > 1 && strcmp (argv[1], "--follow") == 0;
  int first = follow ? 2 : 1;
  GNetworkMonitor *monitor = g_network_monitor_get_default ();
  GIOChannel *channel;

  loop = g_main_loop_new (NULL, FALSE);
  printf ("ready %s %d %d %d\n", G_OBJECT_TYPE_NAME (monitor), g_network_monitor_get_network_available (monitor),
          g_network_monitor_get_network_metered (monitor), g_network_monitor_get_connectivity (monitor));
  fflush (stdout);
  g_signal_connect (monitor, "network-changed", G_CALLBACK (changed), NULL);

  for (int i = first; i < argc; i++)
    {
      ask_sync (monitor, argv[i]);
      ask (monitor, argv[i]);
    }
  if (pending > 0)
    g_main_loop_run (loop);

  if (follow)
    {
      following = TRUE;
      channel = g_io_channel_unix_new (0);
      g_io_add_watch (channel, G_IO_IN | G_IO_HUP | G_IO_ERR, input, monitor);
      g_main_loop_run (loop);
      g_io_channel_unref (channel);
    }
  g_signal_handlers_disconnect_by_func (monitor, changed, NULL);
  g_main_loop_unref (loop);
  return 0;
}
