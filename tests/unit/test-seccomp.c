/* Unit tests for supervisor/os/seccomp.c: the filter as libseccomp's pseudo-code
 * (sandbox_seccomp_export), read per ABI. Independent of the kernel: the
 * battery (tests/security/attempts.test.mjs) checks what the kernel then does
 * with the filter; this checks that each ABI's part has the rules at all, so
 * a rule libseccomp silently left out of one ABI (the i386 socket(2) family
 * rules once were) fails here on every machine. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "os/seccomp.h"
#include "macro.h"

/* The PFC text of the filter. */
static char *export_pfc(bool allow_io_uring) {
        SandboxSeccompOptions o = { .allow_io_uring = allow_io_uring };
        int fd = memfd_create("test-seccomp", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(sandbox_seccomp_export(&o, fd), 0);
        off_t size = lseek(fd, 0, SEEK_END);
        assert_true(size > 0);
        char *text = calloc(1, (size_t) size + 1);
        assert_non_null(text);
        assert_int_equal(pread(fd, text, (size_t) size, 0), size);
        close(fd);
        return text;
}

/* The part of the PFC text that filters one ABI ("# filter for arch x86 ("),
 * up to the next ABI's part or the end; NUL-terminated in place. */
static char *arch_section(char *pfc, const char *arch) {
        char head[64];
        snprintf(head, sizeof(head), "# filter for arch %s (", arch);
        char *start = strstr(pfc, head);
        assert_non_null(start);
        char *end = strstr(start + 1, "# filter for arch ");
        if (!end)
                end = strstr(start, "# invalid architecture action");
        assert_non_null(end);
        *end = '\0';
        return start;
}

/* The rules of one system call in a section: "# filter for syscall "NAME" (NR)"
 * up to the next system call, copied. NULL if the call has none. */
static char *syscall_rules(const char *section, const char *name, int nr) {
        char head[96];
        snprintf(head, sizeof(head), "# filter for syscall \"%s\" (%d)", name, nr);
        const char *start = strstr(section, head);
        if (!start)
                return NULL;
        const char *end = strstr(start + 1, "# filter for syscall ");
        if (!end)
                end = strstr(start, "# default action");
        assert_non_null(end);
        return strndup(start, (size_t) (end - start));
}

static size_t count(const char *s, const char *needle) {
        size_t n = 0;
        for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/* The family rules on both ABIs (EAFNOSUPPORT is 97): the families the
 * battery tries, the catch-all at AF_MAX, and the four raw/packet EPERM rules.
 * (The 64-bit part compares argument halves, so the text differs by ABI.) */
static void test_socket_rules_on_both_abis(void **state) {
        static const int families[] = { AF_KEY, AF_PACKET, AF_BLUETOOTH, AF_ALG, AF_VSOCK };
        char *pfc = export_pfc(false);
        char *copy = strdup(pfc);
        assert_non_null(copy);
        char *native = syscall_rules(arch_section(pfc, "x86_64"), "socket", 41);
        char *i386 = syscall_rules(arch_section(copy, "x86"), "socket", 359);
        assert_non_null(native);
        assert_non_null(i386);
        for (size_t i = 0; i < ELEMENTSOF(families); i++) {
                char cmp[64];
                snprintf(cmp, sizeof(cmp), "if ($a0 == %d)\n      action ERRNO(97);", families[i]);
                if (!strstr(i386, cmp))
                        fail_msg("i386 socket(2) lacks the rule for family %d", families[i]);
                snprintf(cmp, sizeof(cmp), "if ($a0.lo32 == %d)", families[i]);
                if (!strstr(native, cmp))
                        fail_msg("x86_64 socket(2) lacks the rule for family %d", families[i]);
        }
        char catch_all[64];
        snprintf(catch_all, sizeof(catch_all), "if ($a0 >= %d)", AF_MAX);
        assert_non_null(strstr(i386, catch_all));
        snprintf(catch_all, sizeof(catch_all), "if ($a0.lo32 >= %d)", AF_MAX);
        assert_non_null(strstr(native, catch_all));
        assert_int_equal(count(i386, "action ERRNO(1)"), 4);
        assert_int_equal(count(native, "action ERRNO(1)"), 4);
        free(native);
        free(i386);
        free(copy);
        free(pfc);
}

/* socketcall(2) stays refused whole with ENOSYS (38), not narrowed to the
 * family rules that libseccomp derives from socket(2) on i386. */
static void test_socketcall_refused_whole(void **state) {
        char *pfc = export_pfc(false);
        char *rules = syscall_rules(arch_section(pfc, "x86"), "socketcall", 102);
        assert_non_null(rules);
        assert_non_null(strstr(rules, "action ERRNO(38)"));
        assert_null(strstr(rules, "$a0"));
        free(rules);
        free(pfc);
}

/* A call of the table on each ABI where it exists, by its own number there. */
static void test_table_on_both_abis(void **state) {
        static const struct {
                const char *name;
                int nr_x86_64, nr_i386;
        } calls[] = {
                { "mount", 165, 21 }, { "unshare", 272, 310 }, { "bpf", 321, 357 },
                { "io_uring_setup", 425, 425 }, { "personality", 135, 136 },
        };
        char *pfc = export_pfc(false);
        char *copy = strdup(pfc);
        assert_non_null(copy);
        const char *native = arch_section(pfc, "x86_64"), *i386 = arch_section(copy, "x86");
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                char *a = syscall_rules(native, calls[i].name, calls[i].nr_x86_64);
                char *b = syscall_rules(i386, calls[i].name, calls[i].nr_i386);
                if (!a || !b)
                        fail_msg("%s has no rules on %s", calls[i].name, a ? "x86" : "x86_64");
                free(a);
                free(b);
        }
        free(copy);
        free(pfc);
}

static void test_allow_io_uring(void **state) {
        char *pfc = export_pfc(true);
        assert_null(strstr(pfc, "\"io_uring_setup\""));
        assert_non_null(strstr(pfc, "\"mount\""));
        free(pfc);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_socket_rules_on_both_abis),
                cmocka_unit_test(test_socketcall_refused_whole),
                cmocka_unit_test(test_table_on_both_abis),
                cmocka_unit_test(test_allow_io_uring),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
