/* The digest row of make bench (issue 19): broker/digest.c over a 50 MB
 * go test -v log made here (runs, passes, every 1000th test failing with a
 * log line), timed N times in-process; with "generic", 50 MB of lines no
 * parser knows (every parser reads it all before the generic one: the worst
 * case). Prints {"samples": {"sbx": [µs, ...]}, "vars": {"bytes": N, "failures": K}}.
 *   digestbench BYTES N [go|generic] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../broker/digest.h"

static long long now_us(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv) {
        size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 50u << 20, len = 0;
        int n = argc > 2 ? atoi(argv[2]) : 5;
        int generic = argc > 3 && strcmp(argv[3], "generic") == 0;
        char *log = malloc(bytes + 256);
        long long failures = 0;

        if (!log)
                return 1;
        for (unsigned long i = 0; len < bytes; i++) {
                int k = generic ? snprintf(log + len, 256, "step %lu of the import: %s\n", i,
                                           i % 1000 == 999 ? "error: record has no id" : "record stored")
                        : i % 1000 == 999
                        ? snprintf(log + len, 256, "=== RUN   TestCase%lu\n    case_test.go:%lu: got %lu, want %lu\n"
                                   "--- FAIL: TestCase%lu (0.00s)\n", i, i % 500 + 1, i, i + 1, i)
                        : snprintf(log + len, 256, "=== RUN   TestCase%lu\n--- PASS: TestCase%lu (0.00s)\n", i, i);
                len += (size_t) k;
        }
        printf("{\"samples\": {\"sbx\": [");
        for (int r = 0; r < n; r++) {
                long long t0 = now_us();
                json_t *d = digest_make(generic ? "shell bash import.sh" : "go go test -v ./...", log, len, "", 0, false);
                long long t1 = now_us();

                if (!d)
                        return 1;
                failures = json_integer_value(json_object_get(d, "failureCount"));
                json_decref(d);
                printf("%s%lld", r ? ", " : "", t1 - t0);
        }
        printf("]}, \"vars\": {\"bytes\": %zu, \"failures\": %lld}}\n", len, failures);
        free(log);
        return 0;
}
