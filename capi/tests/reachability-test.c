/*
 * The C API from a C program, through the installed header and pkg-config only:
 *
 *   reachability-test basics
 *       references by address, name and pair; flags; CFRetain/CFRelease; errors. Exit 0 when right.
 *   reachability-test watch queue|runloop ADDRESS LOCAL
 *       the internet (the zero address), ADDRESS, the pair LOCAL -> ADDRESS and the name
 *       "localhost", each with a counted context, scheduled on a dispatch queue or on the
 *       main thread's run loop. Prints "flags LABEL flags=0xN" for each once scheduled,
 *       "callback LABEL flags=0xN" for each callback, then "scheduled". On "stop" (stdin)
 *       it unschedules everything, prints "stopped", releases everything, checks that every
 *       retain of the contexts is released (at once, or within 10 s by a callout that was
 *       already running on the queue's thread and held its reference, as Apple's do), and
 *       exits 0.
 *
 * Built by Tests/Integration/test_c_api.py with -Wall -Wextra -Werror under AddressSanitizer.
 */
#include <SystemConfiguration/SystemConfiguration.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(condition)                                                                         \
    do {                                                                                         \
        if (!(condition)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s (SCError %d: %s)\n", __FILE__, __LINE__,   \
                    #condition, SCError(), SCErrorString(SCError()));                            \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

struct probe {
    const char *label;
    atomic_int retains;
    atomic_int releases;
};

static pthread_t main_thread;
static atomic_bool on_run_loop;
static atomic_int wrong_thread;
static pthread_mutex_t output = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast by each release, for the check that every retain is released. */
static pthread_mutex_t counted = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;

static void say(const char *event, const char *label, SCNetworkReachabilityFlags flags) {
    pthread_mutex_lock(&output);
    printf("%s %s flags=0x%x\n", event, label, (unsigned)flags);
    fflush(stdout);
    pthread_mutex_unlock(&output);
}

static const void *retain_probe(const void *info) {
    struct probe *probe = (struct probe *)info;
    atomic_fetch_add(&probe->retains, 1);
    return info;
}

static void release_probe(const void *info) {
    struct probe *probe = (struct probe *)info;
    pthread_mutex_lock(&counted);
    atomic_fetch_add(&probe->releases, 1);
    pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&counted);
}

static CFStringRef describe_probe(const void *info) {
    return CFStringCreateWithCString(kCFAllocatorDefault, ((const struct probe *)info)->label,
                                     kCFStringEncodingUTF8);
}

static void callback(SCNetworkReachabilityRef target, SCNetworkReachabilityFlags flags, void *info) {
    struct probe *probe = info;
    CHECK(target != NULL && probe != NULL);
    /* A run loop's callbacks run on its thread; a queue's never on the main thread (it is
     * blocked reading stdin). */
    if (pthread_equal(pthread_self(), main_thread) != atomic_load(&on_run_loop)) {
        atomic_fetch_add(&wrong_thread, 1);
    }
    say("callback", probe->label, flags);
}

static struct sockaddr_in ipv4(const char *text) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    if (text != NULL) {
        CHECK(inet_pton(AF_INET, text, &address.sin_addr) == 1);
    }
    return address;
}

static int basics(void) {
    struct sockaddr_in zero = ipv4(NULL), loopback = ipv4("127.0.0.1");
    struct sockaddr_in6 loopback6;
    memset(&loopback6, 0, sizeof loopback6);
    loopback6.sin6_family = AF_INET6;
    loopback6.sin6_addr = in6addr_loopback;

    SCNetworkReachabilityRef internet = SCNetworkReachabilityCreateWithAddress(NULL, (const struct sockaddr *)&zero);
    SCNetworkReachabilityRef local = SCNetworkReachabilityCreateWithAddress(kCFAllocatorDefault,
                                                                            (const struct sockaddr *)&loopback6);
    SCNetworkReachabilityRef name = SCNetworkReachabilityCreateWithName(NULL, "localhost");
    SCNetworkReachabilityRef pair = SCNetworkReachabilityCreateWithAddressPair(
        NULL, (const struct sockaddr *)&loopback, (const struct sockaddr *)&loopback);
    CHECK(internet != NULL && local != NULL && name != NULL && pair != NULL);

    SCNetworkReachabilityFlags flags = 0xffffffffu;
    CHECK(SCNetworkReachabilityGetFlags(local, &flags));
    say("flags", "loopback6", flags);
    CHECK(flags & kSCNetworkReachabilityFlagsReachable);
    CHECK(flags & kSCNetworkReachabilityFlagsIsLocalAddress);
    CHECK(SCNetworkReachabilityGetFlags(pair, &flags));
    say("flags", "pair", flags);
    CHECK(flags & kSCNetworkReachabilityFlagsReachable);
    CHECK(SCNetworkReachabilityGetFlags(internet, &flags));
    say("flags", "internet", flags);
    SCNetworkReachabilityFlags named = 0;
    CHECK(SCNetworkReachabilityGetFlags(name, &named));
    CHECK(named == flags); /* a name not scheduled reads as the internet, without a lookup */

    /* A Core Foundation object: retained and released by Core Foundation, of one type. */
    CHECK(CFRetain(internet) == internet);
    CFRelease(internet);
    CHECK(CFGetTypeID(internet) == SCNetworkReachabilityGetTypeID());
    CHECK(SCNetworkReachabilityGetFlags(internet, &flags));

    /* What Apple's refuses, with SCError() set. */
    struct sockaddr unknown;
    memset(&unknown, 0, sizeof unknown);
    unknown.sa_family = AF_UNIX;
    CHECK(SCNetworkReachabilityCreateWithAddress(NULL, &unknown) == NULL);
    CHECK(SCError() == kSCStatusInvalidArgument);
    CHECK(strlen(SCErrorString(kSCStatusInvalidArgument)) > 0);
    CHECK(SCNetworkReachabilityCreateWithName(NULL, "") == NULL);
    CHECK(SCNetworkReachabilityCreateWithAddressPair(NULL, NULL, NULL) == NULL);
    CHECK(!SCNetworkReachabilityGetFlags(internet, NULL));

    /* Setting, replacing and clearing a callback releases what it retained. */
    struct probe probe = {"basics", 0, 0};
    SCNetworkReachabilityContext context = {0, &probe, retain_probe, release_probe, describe_probe};
    CHECK(SCNetworkReachabilitySetCallback(name, callback, &context));
    CHECK(SCNetworkReachabilitySetCallback(name, NULL, NULL));
    CHECK(atomic_load(&probe.retains) == 1 && atomic_load(&probe.releases) == 1);

    CFRelease(internet);
    CFRelease(local);
    CFRelease(name);
    CFRelease(pair);
    puts("basics ok");
    return 0;
}

struct watched {
    struct probe probe;
    SCNetworkReachabilityRef reference;
};

static void *read_commands(void *unused) {
    (void)unused;
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (strncmp(line, "stop", 4) == 0) break;
    }
    /* The run loop is stopped from here; on a queue, the main thread is waiting on the join. */
    if (atomic_load(&on_run_loop)) CFRunLoopStop(CFRunLoopGetMain());
    return NULL;
}

static int watch(const char *scheduling, const char *address, const char *local_address) {
    struct sockaddr_in zero = ipv4(NULL), remote = ipv4(address), local = ipv4(local_address);
    struct watched watched[4] = {
        {{"internet", 0, 0}, SCNetworkReachabilityCreateWithAddress(NULL, (const struct sockaddr *)&zero)},
        {{"address", 0, 0}, SCNetworkReachabilityCreateWithAddress(NULL, (const struct sockaddr *)&remote)},
        {{"pair", 0, 0},
         SCNetworkReachabilityCreateWithAddressPair(NULL, (const struct sockaddr *)&local,
                                                    (const struct sockaddr *)&remote)},
        {{"host", 0, 0}, SCNetworkReachabilityCreateWithName(NULL, "localhost")},
    };
    const size_t count = sizeof watched / sizeof watched[0];
    const int queue = strcmp(scheduling, "queue") == 0;
    atomic_store(&on_run_loop, !queue);
    dispatch_queue_t dispatch = queue ? dispatch_queue_create("reachability-test", DISPATCH_QUEUE_SERIAL) : NULL;

    for (size_t i = 0; i < count; i++) {
        CHECK(watched[i].reference != NULL);
        SCNetworkReachabilityContext context = {0, &watched[i].probe, retain_probe, release_probe, describe_probe};
        CHECK(SCNetworkReachabilitySetCallback(watched[i].reference, callback, &context));
        if (queue) {
            CHECK(SCNetworkReachabilitySetDispatchQueue(watched[i].reference, dispatch));
        } else {
            CHECK(SCNetworkReachabilityScheduleWithRunLoop(watched[i].reference, CFRunLoopGetMain(),
                                                           kCFRunLoopDefaultMode));
        }
        SCNetworkReachabilityFlags flags = 0;
        CHECK(SCNetworkReachabilityGetFlags(watched[i].reference, &flags));
        say("flags", watched[i].probe.label, flags);
    }
    if (queue) dispatch_release(dispatch); /* the references hold it while scheduled */
    say("scheduled", "all", 0);

    pthread_t reader;
    CHECK(pthread_create(&reader, NULL, read_commands, NULL) == 0);
    if (!queue) {
        CFRunLoopRun(); /* returns when the reader stops it: the references' sources keep it running */
    }
    CHECK(pthread_join(reader, NULL) == 0);

    for (size_t i = 0; i < count; i++) {
        if (queue) {
            CHECK(SCNetworkReachabilitySetDispatchQueue(watched[i].reference, NULL));
        } else {
            CHECK(SCNetworkReachabilityUnscheduleFromRunLoop(watched[i].reference, CFRunLoopGetMain(),
                                                             kCFRunLoopDefaultMode));
        }
    }
    say("stopped", "all", 0);
    for (size_t i = 0; i < count; i++) CFRelease(watched[i].reference);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&counted);
    for (size_t i = 0; i < count; i++) {
        struct probe *probe = &watched[i].probe;
        while (atomic_load(&probe->retains) != atomic_load(&probe->releases)) {
            if (pthread_cond_timedwait(&released, &counted, &deadline) != 0) {
                fprintf(stderr, "%s: %d retains, %d releases 10 s after the last CFRelease\n", probe->label,
                        atomic_load(&probe->retains), atomic_load(&probe->releases));
                return 1;
            }
        }
    }
    pthread_mutex_unlock(&counted);
    CHECK(atomic_load(&wrong_thread) == 0);
    return 0;
}

int main(int argc, char **argv) {
    main_thread = pthread_self();
    if (argc == 2 && strcmp(argv[1], "basics") == 0) return basics();
    if (argc == 5 && strcmp(argv[1], "watch") == 0) return watch(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: %s basics | watch queue|runloop ADDRESS LOCAL\n", argv[0]);
    return 2;
}
