/*
 * What SCNetworkReachabilityGetFlags costs from C (Benchmarks/c_api_cost.py builds and runs it):
 *
 *   getflags-bench N
 *
 * The zero address (the internet): the first GetFlags (the process's first use: the runtime's
 * thread, the bus connection, the choice of daemon or in-process), then N GetFlags while not
 * scheduled (each a fresh answer from the daemon or the in-process engine), then, scheduled on a
 * dispatch queue and its first callback come, N GetFlags while scheduled (the latest answer).
 * Prints "first-us=… unscheduled-us-p50=… unscheduled-us-p99=… scheduled-us-p50=… scheduled-us-p99=…".
 */
#include <SystemConfiguration/SystemConfiguration.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t called = PTHREAD_COND_INITIALIZER;
static int callbacks;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *values, long count, int p) {
    qsort(values, (size_t)count, sizeof *values, compare);
    return values[(count - 1) * p / 100];
}

static void callback(SCNetworkReachabilityRef target, SCNetworkReachabilityFlags flags, void *info) {
    (void)target, (void)flags, (void)info;
    pthread_mutex_lock(&lock);
    callbacks++;
    pthread_cond_signal(&called);
    pthread_mutex_unlock(&lock);
}

static void time_calls(SCNetworkReachabilityRef reference, double *samples, long count) {
    for (long i = 0; i < count; i++) {
        SCNetworkReachabilityFlags flags;
        double start = now_us();
        if (!SCNetworkReachabilityGetFlags(reference, &flags)) exit(1);
        samples[i] = now_us() - start;
    }
}

int main(int argc, char **argv) {
    long count = argc == 2 ? atol(argv[1]) : 0;
    if (count < 1) {
        fprintf(stderr, "usage: %s N\n", argv[0]);
        return 2;
    }
    double *samples = calloc((size_t)count, sizeof *samples);
    struct sockaddr_in zero;
    memset(&zero, 0, sizeof zero);
    zero.sin_family = AF_INET;
    SCNetworkReachabilityRef internet = SCNetworkReachabilityCreateWithAddress(NULL, (const struct sockaddr *)&zero);
    if (samples == NULL || internet == NULL) return 1;

    SCNetworkReachabilityFlags flags;
    double start = now_us();
    if (!SCNetworkReachabilityGetFlags(internet, &flags)) return 1;
    printf("first-us=%.0f ", now_us() - start);

    time_calls(internet, samples, count);
    printf("unscheduled-us-p50=%.1f ", percentile(samples, count, 50));
    printf("unscheduled-us-p99=%.1f ", percentile(samples, count, 99));

    SCNetworkReachabilityContext context = {0, NULL, NULL, NULL, NULL};
    dispatch_queue_t queue = dispatch_queue_create("getflags-bench", DISPATCH_QUEUE_SERIAL);
    if (!SCNetworkReachabilitySetCallback(internet, callback, &context) ||
        !SCNetworkReachabilitySetDispatchQueue(internet, queue)) {
        return 1;
    }
    /* An address calls back only on change: wait for the subscription's first answer through GetFlags. */
    SCNetworkReachabilityGetFlags(internet, &flags);
    time_calls(internet, samples, count);
    printf("scheduled-us-p50=%.2f ", percentile(samples, count, 50));
    printf("scheduled-us-p99=%.2f\n", percentile(samples, count, 99));

    SCNetworkReachabilitySetDispatchQueue(internet, NULL);
    dispatch_release(queue);
    CFRelease(internet);
    free(samples);
    return 0;
}
