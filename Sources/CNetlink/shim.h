#ifndef REACH_CNETLINK_SHIM_H
#define REACH_CNETLINK_SHIM_H
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>

_Static_assert(sizeof(struct nlmsghdr) == 16, "nlmsghdr layout");
_Static_assert(sizeof(struct rtmsg) == 12, "rtmsg layout");
_Static_assert(sizeof(struct ifinfomsg) == 16, "ifinfomsg layout");
_Static_assert(sizeof(struct rtattr) == 4, "rtattr layout");

/* Multicast group bits (some are enum values, some macros). */
static inline unsigned int reach_rtmgrp_all(void) {
    return RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
}

/* From <linux/if.h>, which cannot be included beside <net/if.h>. */
static inline unsigned int reach_iff_lower_up(void) { return 1u << 16; }
enum { REACH_IF_OPER_UNKNOWN = 0, REACH_IF_OPER_UP = 6 };

/* CLOCK_REALTIME in microseconds. */
static inline unsigned long long reach_realtime_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

#endif
