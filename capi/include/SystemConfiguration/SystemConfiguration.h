/*
 * <SystemConfiguration/SystemConfiguration.h> for Linux: Apple's SCNetworkReachability
 * C functions, answered by reachabilityd (or, without the daemon, by the same engine
 * in the calling process). Link with `pkg-config --cflags --libs reachability-sc`.
 *
 * As Apple's header, it brings sockets (struct sockaddr_in, AF_INET), Core Foundation
 * and dispatch, the C library headers Core Foundation's umbrella brings (<stdlib.h>,
 * <string.h>, <strings.h>: malloc, free, memset, bzero), and the flags' old names
 * (SCNetwork.h). The toolchain's own <CoreFoundation/CoreFoundation.h> and
 * <dispatch/dispatch.h> compile with clang and -fblocks only; where they are not
 * usable this header declares the part of them C programs need (opaque CFTypeRef,
 * CFRunLoopRef, CFStringRef, dispatch_queue_t and the functions on them). See
 * docs/c-api.md: what differs from Apple's, and `sin_len`.
 */
#ifndef REACHABILITY_SYSTEMCONFIGURATION_H
#define REACHABILITY_SYSTEMCONFIGURATION_H

#include <SystemConfiguration/SCBase.h>
#include <SystemConfiguration/SCNetworkReachability.h>
#include <SystemConfiguration/SCNetwork.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (SCError()) this implementation sets. Apple's values. */
enum {
    kSCStatusOK = 0,
    kSCStatusFailed = 1001,
    kSCStatusInvalidArgument = 1002,
};

/* The calling thread's status of the last call that failed (kSCStatusOK if none). */
int SCError(void);

/* The text of a status, in static storage (never freed). */
const char *SCErrorString(int status);

#ifdef __cplusplus
}
#endif

#endif
