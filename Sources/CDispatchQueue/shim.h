// The three libdispatch calls the C functions make on a caller's dispatch_queue_t, which
// Swift on Linux cannot make otherwise: a C queue has no Swift DispatchQueue standing for
// it, and Swift marks dispatch_retain/dispatch_release unavailable (it counts references
// itself). Declared under names of their own (asm labels bind them to libdispatch's
// symbols), so that they never meet <dispatch/dispatch.h>'s declarations in one module.
#ifndef REACHABILITY_CDISPATCHQUEUE_SHIM_H
#define REACHABILITY_CDISPATCHQUEUE_SHIM_H

void reachability_dispatch_retain(void *queue) __asm__("dispatch_retain");
void reachability_dispatch_release(void *queue) __asm__("dispatch_release");
void reachability_dispatch_async_f(void *queue, void *context, void (*work)(void *context))
    __asm__("dispatch_async_f");

#endif
