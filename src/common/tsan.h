/* ThreadSanitizer annotations (docs/testing.md, "ThreadSanitizer"). Each use names the ordering or the
 * harmlessness that TSan cannot see; outside a -DMC_TSAN=ON build they compile to nothing.
 *  - MC_TSAN_RELEASE(p) / MC_TSAN_ACQUIRE(p): a happens-before edge that goes through the kernel (an
 *    epoll re-arm seen by another thread's epoll_wait, a socket, another process) between a release on
 *    p in one thread and an acquire on p in another.
 *  - MC_TSAN_IGNORE_BEGIN() / MC_TSAN_IGNORE_END(): accesses in between are not recorded (for accesses
 *    that change no byte, such as the page-touching atomic add of 0 in prefault.c). */
#ifndef MC_COMMON_TSAN_H
#define MC_COMMON_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define MC_TSAN_ON 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MC_TSAN_ON 1
#endif
#endif

#ifdef MC_TSAN_ON
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define MC_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define MC_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define MC_TSAN_IGNORE_BEGIN() __tsan_ignore_thread_begin()
#define MC_TSAN_IGNORE_END() __tsan_ignore_thread_end()
#else
#define MC_TSAN_ACQUIRE(p) ((void)0)
#define MC_TSAN_RELEASE(p) ((void)0)
#define MC_TSAN_IGNORE_BEGIN() ((void)0)
#define MC_TSAN_IGNORE_END() ((void)0)
#endif

#endif
