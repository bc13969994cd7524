#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

static const char *log_role = "sbx";
static char log_context[80];
static int log_level = LOG_INFO;

void log_open(const char *role) {
        log_role = role;
}

void log_set_level(int priority) {
        log_level = priority;
}

int log_get_level(void) {
        return log_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_ERR] = "error", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (names[i] && strcasecmp(names[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

void log_set_context(const char *context) {
        if (context)
                snprintf(log_context, sizeof(log_context), "[%s]", context);
        else
                log_context[0] = '\0';
}

int log_internal(int priority, int error, const char *fmt, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        if (priority > log_level)
                return error;
        /* %m means the error we were given, not whatever errno is now. */
        errno = error < 0 ? -error : error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        /* One event per line: never let a message forge another line. */
        for (char *p = buf; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        fprintf(stderr, "<%d>%s%s: %s\n", priority, log_role, log_context, buf);
        errno = saved;
        return error;
}

bool log_ratelimit_pass(LogRatelimit *rl, unsigned long long now, unsigned *ret_left_out) {
        const unsigned long long interval = SBX_LOG_INTERVAL_MS * 1000ull;
        bool quiet = rl->shown > 0 && now - rl->last_usec >= interval;

        rl->last_usec = now;
        if (quiet)
                rl->shown = 0;
        if (rl->shown < SBX_LOG_BURST || now - rl->reported_usec >= interval) {
                if (rl->shown < SBX_LOG_BURST)
                        rl->shown++;
                rl->reported_usec = now;
                *ret_left_out = rl->left_out;
                rl->left_out = 0;
                return true;
        }
        rl->left_out++;
        return false;
}

int log_ratelimited(LogRatelimit *rl, int priority, int error, const char *fmt, ...) {
        char buf[1800];
        unsigned left_out;
        va_list ap;
        int saved = errno;

        if (priority > log_level || !log_ratelimit_pass(rl, now_usec(), &left_out))
                return error;
        errno = error < 0 ? -error : error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        errno = saved;
        if (left_out)
                return log_internal(priority, error, "%s (and %u more like it left out)", buf, left_out);
        return log_internal(priority, error, "%s", buf);
}
