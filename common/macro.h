/* Cleanup attributes and ownership helpers shared by every sbx binary. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _fallthrough_ __attribute__((fallthrough))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The struct of type that holds member at ptr (an EventSource in a Client, say). */
#define container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

/* Return the value of a pointer variable and set the variable to NULL. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _tp_ = (p);    \
                (p) = NULL;                  \
                _tp_;                        \
        })

/* Return the value of an fd variable and set the variable to -EBADF. */
#define TAKE_FD(fd)                          \
        ({                                   \
                int _tf_ = (fd);             \
                (fd) = -EBADF;               \
                _tf_;                        \
        })

/* Evaluate a libc call that returns -1 and sets errno; yield -errno or the result. */
#define RET_NERRNO(expr)                     \
        ({                                   \
                __typeof__(expr) _rn_ = (expr); \
                _rn_ < 0 ? -errno : _rn_;    \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Close an fd, keeping errno; returns -EBADF for "fd = safe_close(fd)". */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        (void) safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)  \
        static inline void func##p(type *p) {    \
                if (*p)                          \
                        func(*p);                \
        }
