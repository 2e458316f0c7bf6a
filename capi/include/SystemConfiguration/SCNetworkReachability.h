/*
 * Apple's SCNetworkReachability API, with Apple's names, types and flag values.
 * Included by <SystemConfiguration/SystemConfiguration.h>; include that one.
 */
#ifndef REACHABILITY_SCNETWORKREACHABILITY_H
#define REACHABILITY_SCNETWORKREACHABILITY_H

#include <SystemConfiguration/SCBase.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A reference to one target's reachability: a host name, an address, or a pair of
 * addresses. A Core Foundation object: CFRetain and CFRelease work on it, and the
 * last CFRelease frees it. While scheduled, the system holds a reference of its own.
 */
typedef const struct __SCNetworkReachability *SCNetworkReachabilityRef;

/* The flags, bit for bit as Apple's. */
typedef uint32_t SCNetworkReachabilityFlags;
enum {
    kSCNetworkReachabilityFlagsTransientConnection = 1u << 0,
    kSCNetworkReachabilityFlagsReachable = 1u << 1,
    kSCNetworkReachabilityFlagsConnectionRequired = 1u << 2,
    kSCNetworkReachabilityFlagsConnectionOnTraffic = 1u << 3,
    kSCNetworkReachabilityFlagsInterventionRequired = 1u << 4,
    kSCNetworkReachabilityFlagsConnectionOnDemand = 1u << 5,
    kSCNetworkReachabilityFlagsIsLocalAddress = 1u << 16,
    kSCNetworkReachabilityFlagsIsDirect = 1u << 17,
    kSCNetworkReachabilityFlagsIsWWAN = 1u << 18,
    kSCNetworkReachabilityFlagsConnectionAutomatic = kSCNetworkReachabilityFlagsConnectionOnTraffic
};

/* What a callback is given: `info`, kept with `retain`/`release` (either may be NULL). */
typedef struct {
    CFIndex version; /* 0 */
    void *info;
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    CFStringRef (*copyDescription)(const void *info);
} SCNetworkReachabilityContext;

/* Called with the target, its new flags and the context's info. */
typedef void (*SCNetworkReachabilityCallBack)(SCNetworkReachabilityRef target, SCNetworkReachabilityFlags flags,
                                              void *info);

/*
 * The create functions return a reference to release with CFRelease, or NULL (see
 * SCError()). The allocator is ignored (NULL or kCFAllocatorDefault). An address is
 * an IPv4 or IPv6 socket address; its length is implied by its family (Linux's
 * struct sockaddr has no sin_len); the zero address stands for the internet.
 */
SCNetworkReachabilityRef SCNetworkReachabilityCreateWithAddress(CFAllocatorRef allocator,
                                                                const struct sockaddr *address);
SCNetworkReachabilityRef SCNetworkReachabilityCreateWithAddressPair(CFAllocatorRef allocator,
                                                                    const struct sockaddr *localAddress,
                                                                    const struct sockaddr *remoteAddress);
SCNetworkReachabilityRef SCNetworkReachabilityCreateWithName(CFAllocatorRef allocator, const char *nodename);

/* The Core Foundation type of a reference (see docs/c-api.md for its value on Linux). */
CFTypeID SCNetworkReachabilityGetTypeID(void);

/*
 * The flags: scheduled, the latest answer; not scheduled, a fresh one (for a name,
 * without a lookup). The calling thread waits for that answer.
 */
Boolean SCNetworkReachabilityGetFlags(SCNetworkReachabilityRef target, SCNetworkReachabilityFlags *flags);

/* Sets (or, with a NULL callout, clears) the callback; `context` is copied. */
Boolean SCNetworkReachabilitySetCallback(SCNetworkReachabilityRef target, SCNetworkReachabilityCallBack callout,
                                         SCNetworkReachabilityContext *context);

/* Calls back on `runLoop` while it runs in `runLoopMode` (kCFRunLoopDefaultMode, ...). */
Boolean SCNetworkReachabilityScheduleWithRunLoop(SCNetworkReachabilityRef target, CFRunLoopRef runLoop,
                                                 CFStringRef runLoopMode);
/* Stops; no callback runs after it returns. */
Boolean SCNetworkReachabilityUnscheduleFromRunLoop(SCNetworkReachabilityRef target, CFRunLoopRef runLoop,
                                                   CFStringRef runLoopMode);

/* Calls back on `queue` (retained while scheduled); NULL unschedules. */
Boolean SCNetworkReachabilitySetDispatchQueue(SCNetworkReachabilityRef target, dispatch_queue_t queue);

#ifdef __cplusplus
}
#endif

#endif
