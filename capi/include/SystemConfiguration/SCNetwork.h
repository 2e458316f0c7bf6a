/*
 * SCNetwork.h: the flags' first names, from before SCNetworkReachability (Apple's
 * SCNetwork.h, deprecated there and still compiled): code written against
 * SCNetworkCheckReachabilityByName and friends, or that tests the old names, compiles.
 * The values are the same bits as kSCNetworkReachabilityFlags*.
 * Included by <SystemConfiguration/SystemConfiguration.h>; include that one.
 */
#ifndef REACHABILITY_SCNETWORK_H
#define REACHABILITY_SCNETWORK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t SCNetworkConnectionFlags;
enum {
    kSCNetworkFlagsTransientConnection = 1u << 0,
    kSCNetworkFlagsReachable = 1u << 1,
    kSCNetworkFlagsConnectionRequired = 1u << 2,
    kSCNetworkFlagsConnectionAutomatic = 1u << 3,
    kSCNetworkFlagsInterventionRequired = 1u << 4,
    kSCNetworkFlagsIsLocalAddress = 1u << 16,
    kSCNetworkFlagsIsDirect = 1u << 17
};

#ifdef __cplusplus
}
#endif

#endif
