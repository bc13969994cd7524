/* One small logging API for every role: "<N>role[context]: message" lines on
 * stderr, where <N> is the syslog priority journald understands. Only process
 * code (main loops, dispatchers) logs; common/ and proto/ return -errno. */
#pragma once

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

void log_open(const char *role);
void log_set_level(int priority);
int log_get_level(void);
int log_level_from_string(const char *s);   /* -EINVAL if unknown */
/* Context shown after the role, e.g. a session id; NULL clears it. */
void log_set_context(const char *context);

/* Logs at priority; with error != 0, "%m" expands to strerror(-error).
 * Returns error, so "return log_error_errno(r, ...)" works. */
int log_internal(int priority, int error, const char *fmt, ...) _printf_(3, 4);

/* Identical messages of one call site in a flood: the first SBX_LOG_BURST
 * are logged, then one every SBX_LOG_INTERVAL_MS that says how many were
 * left out since the last; after a quiet interval, a new burst. */
typedef struct LogRatelimit {
        unsigned long long last_usec;           /* the last message, logged or not */
        unsigned long long reported_usec;       /* the last one logged */
        unsigned shown;                         /* logged of this burst */
        unsigned left_out;                      /* since the last one logged */
} LogRatelimit;

/* Whether a message at now (monotonic usec) is logged; if so, ret_left_out
 * is how many before it were not. */
bool log_ratelimit_pass(LogRatelimit *rl, unsigned long long now, unsigned *ret_left_out);
int log_ratelimited(LogRatelimit *rl, int priority, int error, const char *fmt, ...) _printf_(4, 5);
/* One LogRatelimit per call site. */
#define log_warning_errno_ratelimited(e, ...)                                          \
        ({                                                                              \
                static LogRatelimit _rl_;                                               \
                log_ratelimited(&_rl_, LOG_WARNING, (e), __VA_ARGS__);                  \
        })
#define log_error_errno_ratelimited(e, ...)                                            \
        ({                                                                              \
                static LogRatelimit _rl_;                                               \
                log_ratelimited(&_rl_, LOG_ERR, (e), __VA_ARGS__);                      \
        })

#define log_debug(...) ((void) log_internal(LOG_DEBUG, 0, __VA_ARGS__))
#define log_info(...) ((void) log_internal(LOG_INFO, 0, __VA_ARGS__))
#define log_notice(...) ((void) log_internal(LOG_NOTICE, 0, __VA_ARGS__))
#define log_warning(...) ((void) log_internal(LOG_WARNING, 0, __VA_ARGS__))
#define log_error(...) ((void) log_internal(LOG_ERR, 0, __VA_ARGS__))
#define log_debug_errno(e, ...) log_internal(LOG_DEBUG, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_internal(LOG_ERR, (e), __VA_ARGS__)
