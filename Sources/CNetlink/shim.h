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
#include <linux/neighbour.h>
#include <linux/netconf.h>
#include <linux/fib_rules.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>

_Static_assert(sizeof(struct nlmsghdr) == 16, "nlmsghdr layout");
_Static_assert(sizeof(struct rtmsg) == 12, "rtmsg layout");
_Static_assert(sizeof(struct ifinfomsg) == 16, "ifinfomsg layout");
_Static_assert(sizeof(struct rtattr) == 4, "rtattr layout");
_Static_assert(sizeof(struct ndmsg) == 12, "ndmsg layout");
_Static_assert(sizeof(struct fib_rule_hdr) == 12, "fib_rule_hdr layout");
_Static_assert(sizeof(struct fib_rule_uid_range) == 8, "fib_rule_uid_range layout");
_Static_assert(sizeof(struct inet_diag_msg) == 72, "inet_diag_msg layout");

/* The sock_diag groups whose messages are the TCP sockets being destroyed, IPv4's and
 * IPv6's, as bind(2)'s bit mask (any user may listen). */
static inline unsigned int reach_tcp_destroy_groups(void) {
    return (1u << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1u << (SKNLGRP_INET6_TCP_DESTROY - 1));
}

/* A socket filter for those messages that drops the connections that were answered (tcp_info's
 * tcpi_segs_in not 0), so that a machine whose connections work never wakes the listener: a
 * message laid out as Linux lays it out (nlmsghdr, inet_diag_msg, INET_DIAG_PROTOCOL at 88,
 * INET_DIAG_INFO at 96, segs_in at 240) is judged; any other passes. Classic BPF loads are
 * big-endian, hence ntohs of the (host-order) attribute types. */
#include <linux/filter.h>
static inline int reach_drop_answered_connections(int fd, int drop) {
    if (!drop)
        return setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, NULL, 0) == 0 || errno == ENOENT ? 0 : -1;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 16 + 72 + 2),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohs(INET_DIAG_PROTOCOL), 0, 4),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 16 + 72 + 8 + 2),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohs(INET_DIAG_INFO), 0, 2),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16 + 72 + 8 + 4 + 140),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog program = { .len = sizeof code / sizeof code[0], .filter = code };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program);
}

/* Multicast group bits (some are enum values, some macros). */
static inline unsigned int reach_rtmgrp_all(void) {
    /* Links, addresses, routes, policy rules, next-hop objects, neighbours (a
     * gateway's state) and device configuration (ignore_routes_with_linkdown):
     * everything that can change which route a packet takes. */
    return RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE
        | RTMGRP_IPV4_RULE | (1u << (RTNLGRP_IPV6_RULE - 1)) | (1u << (RTNLGRP_NEXTHOP - 1)) | RTMGRP_NEIGH
        | (1u << (RTNLGRP_IPV4_NETCONF - 1)) | (1u << (RTNLGRP_IPV6_NETCONF - 1));
}

/* From <linux/if.h>, which cannot be included beside <net/if.h>. */
static inline unsigned int reach_iff_lower_up(void) { return 1u << 16; }
enum { REACH_IF_OPER_UNKNOWN = 0, REACH_IF_OPER_UP = 6 };

/* recvmmsg(2) is declared only with _GNU_SOURCE, which Swift's Glibc module
 * does not define: the same call through syscall(2), with its struct. */
#include <sys/syscall.h>
struct reach_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};
enum { REACH_MSG_WAITFORONE = 0x10000 };
static inline int reach_recvmmsg(int fd, struct reach_mmsghdr *vector, unsigned int count, int flags) {
    return (int)syscall(SYS_recvmmsg, fd, vector, count, flags, (void *)0);
}

/* timerfd(2): a CLOCK_REALTIME timer with TFD_TIMER_CANCEL_ON_SET wakes its reader when the
 * wall clock is set (a jump, or the kernel's resume from suspend). */
#include <sys/timerfd.h>

/* One DNS query of `name` for records of `type` (1: A, 28: AAAA) with the system
 * resolver's own configuration (resolv.conf's servers, search list and options; a name
 * with a trailing dot is absolute), the reply's message written to `answer`: its length,
 * or -1 (no reply, or another failure). A negative reply (the name does not exist, or has
 * no record of the type) is a reply too: res_nsearch says -1 for it but leaves its message
 * in `answer`, whose length it does not give, so the whole zeroed buffer is returned (the
 * message's header says how much of it the records take). A private resolver state per
 * call (res_ninit), so that it may run on any thread; it blocks like getaddrinfo, so it
 * runs on a worker thread. Used only to read the TTLs getaddrinfo does not give. */
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/nameser.h>
#include <resolv.h>
static inline int reach_dns_query(const char *name, int type, unsigned char *answer, int length) {
    struct __res_state state;
    memset(&state, 0, sizeof state);
    if (res_ninit(&state) != 0) {
        res_nclose(&state);
        return -1;
    }
    /* Bounded: 2 s per server, one attempt (getaddrinfo has just had its answer from them). */
    state.retrans = 2;
    state.retry = 1;
    memset(answer, 0, (size_t)length);
    int count = res_nsearch(&state, name, ns_c_in, type, answer, length);
    if (count < 0 && (state.res_h_errno == HOST_NOT_FOUND || state.res_h_errno == NO_DATA))
        count = length;
    res_nclose(&state);
    return count;
}

#endif
