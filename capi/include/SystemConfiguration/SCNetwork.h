/*
 * SCNetwork.h: the flags' first names, from before SCNetworkReachability (Apple's
 * SCNetwork.h, deprecated there and still compiled): code written against
 * SCNetworkCheckReachabilityByName and friends, or that tests the old names, compiles.
 * Included by <SystemConfiguration/SystemConfiguration.h>; include that one.
 */
#ifndef REACHABILITY_SCNETWORK_H
#define REACHABILITY_SCNETWORK_H

#include <stdint.h>
#include <SystemConfiguration/SCNetworkReachability.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t SCNetworkConnectionFlags;
/* Each the same bit as its SCNetworkReachability name (one place for each value). */
enum {
    kSCNetworkFlagsTransientConnection = kSCNetworkReachabilityFlagsTransientConnection,
    kSCNetworkFlagsReachable = kSCNetworkReachabilityFlagsReachable,
    kSCNetworkFlagsConnectionRequired = kSCNetworkReachabilityFlagsConnectionRequired,
    kSCNetworkFlagsConnectionAutomatic = kSCNetworkReachabilityFlagsConnectionOnTraffic,
    kSCNetworkFlagsInterventionRequired = kSCNetworkReachabilityFlagsInterventionRequired,
    kSCNetworkFlagsIsLocalAddress = kSCNetworkReachabilityFlagsIsLocalAddress,
    kSCNetworkFlagsIsDirect = kSCNetworkReachabilityFlagsIsDirect
};

#ifdef __cplusplus
}
#endif

#endif
