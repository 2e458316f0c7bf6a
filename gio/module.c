/* The GIO module's entry points: GIO loads the library from its module
 * directory (gio-querymodules lists it for "gio-network-monitor" in the
 * directory's giomodule.cache) when a program first asks for
 * g_network_monitor_get_default(). */
#include "monitor.h"

G_MODULE_EXPORT void
g_io_module_load (GIOModule *module)
{
  /* Kept loaded: the monitor is a process-wide singleton of this type. */
  g_type_module_use (G_TYPE_MODULE (module));
  reachabilityd_network_monitor_register (G_TYPE_MODULE (module));
  g_io_extension_point_implement (G_NETWORK_MONITOR_EXTENSION_POINT_NAME, REACHABILITYD_TYPE_NETWORK_MONITOR,
                                  REACH_EXTENSION_NAME, REACH_EXTENSION_PRIORITY);
}

G_MODULE_EXPORT void
g_io_module_unload (GIOModule *module)
{
  (void) module;
}

G_MODULE_EXPORT char **
g_io_module_query (void)
{
  char *extension_points[] = { G_NETWORK_MONITOR_EXTENSION_POINT_NAME, NULL };

  return g_strdupv (extension_points);
}
