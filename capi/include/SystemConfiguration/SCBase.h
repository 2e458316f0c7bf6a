/*
 * What <SystemConfiguration/SystemConfiguration.h> takes from Core Foundation and
 * dispatch. The toolchain's own headers for them compile with clang and -fblocks only
 * (not with gcc, and their umbrella <CoreFoundation/CoreFoundation.h> not even in
 * strict C99/C11), so by default the part C programs need is declared here, with the
 * toolchain's types: the same program then compiles with gcc or clang, C or C++, and
 * links against the same libraries. With clang, -fblocks and -DSC_USE_SYSTEM_HEADERS
 * (and the toolchain's headers on the include path: `pkg-config --variable=swiftincludedir
 * reachability-sc`), the toolchain's <CoreFoundation/CFBase.h>, <CoreFoundation/CFRunLoop.h>,
 * <CoreFoundation/CFString.h> and <dispatch/dispatch.h> are included instead. A program
 * that includes those itself does so before this header; the declarations here then
 * stand aside.
 */
#ifndef REACHABILITY_SCBASE_H
#define REACHABILITY_SCBASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* What Apple's <CoreFoundation/CoreFoundation.h> brings with it and code written for it
 * uses without an include of its own (malloc, free, memset, bzero). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>

#if defined(SC_USE_SYSTEM_HEADERS)
#include <CoreFoundation/CFBase.h>
#include <CoreFoundation/CFRunLoop.h>
#include <CoreFoundation/CFString.h>
#include <dispatch/dispatch.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Core Foundation (libFoundation.so of the Swift toolchain exports these). */
#ifndef __COREFOUNDATION_CFBASE__
typedef bool Boolean;
typedef signed long CFIndex;
typedef unsigned long CFTypeID;
typedef const void *CFTypeRef;
typedef const struct __CFString *CFStringRef;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef uint32_t CFStringEncoding;
enum { kCFStringEncodingUTF8 = 0x08000100 };
extern const CFAllocatorRef kCFAllocatorDefault;
CFTypeRef CFRetain(CFTypeRef cf);
void CFRelease(CFTypeRef cf);
CFIndex CFGetRetainCount(CFTypeRef cf);
CFTypeID CFGetTypeID(CFTypeRef cf);
CFStringRef CFStringCreateWithCString(CFAllocatorRef alloc, const char *cStr, CFStringEncoding encoding);
#endif

#ifndef __COREFOUNDATION_CFRUNLOOP__
typedef struct __CFRunLoop *CFRunLoopRef;
typedef CFStringRef CFRunLoopMode;
extern const CFRunLoopMode kCFRunLoopDefaultMode;
extern const CFRunLoopMode kCFRunLoopCommonModes;
enum {
    kCFRunLoopRunFinished = 1,
    kCFRunLoopRunStopped = 2,
    kCFRunLoopRunTimedOut = 3,
    kCFRunLoopRunHandledSource = 4
};
CFRunLoopRef CFRunLoopGetCurrent(void);
CFRunLoopRef CFRunLoopGetMain(void);
void CFRunLoopRun(void);
int32_t CFRunLoopRunInMode(CFRunLoopMode mode, double seconds, Boolean returnAfterSourceHandled);
void CFRunLoopStop(CFRunLoopRef rl);
void CFRunLoopWakeUp(CFRunLoopRef rl);
#endif

/* dispatch (libdispatch.so of the Swift toolchain). */
#ifndef __DISPATCH_PUBLIC__
typedef struct dispatch_queue_s *dispatch_queue_t;
typedef struct dispatch_queue_attr_s *dispatch_queue_attr_t;
#define DISPATCH_QUEUE_SERIAL NULL
extern struct dispatch_queue_s _dispatch_main_q;
#define dispatch_get_main_queue() (&_dispatch_main_q)
dispatch_queue_t dispatch_queue_create(const char *label, dispatch_queue_attr_t attr);
void dispatch_release(void *object);
void dispatch_main(void);
#endif

#ifdef __cplusplus
}
#endif

#endif
