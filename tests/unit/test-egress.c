/* Unit tests for core/egress.c: the policy names, egress_package_hosts and
 * the "auto" discovery over fixture apt, npm and pip files
 * (tests/unit/egress-root, fake hosts only). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/egress.h"
#include "macro.h"

static void test_policy_names(void **state) {
        char msg[EGRESS_ERROR_MAX];
        EgressPolicy p;

        for (EgressPolicy q = 0; q < _EGRESS_POLICY_MAX; q++) {
                assert_int_equal(egress_policy_from_string(egress_policy_to_string(q), &p), 0);
                assert_int_equal(p, q);
        }
        assert_string_equal(egress_policy_to_string(EGRESS_PACKAGE_MANAGERS), "package-managers");
        assert_int_equal(egress_policy_from_string("Open", &p), -EINVAL);
        assert_int_equal(egress_policy_from_string("", &p), -EINVAL);
        assert_null(egress_policy_to_string(_EGRESS_POLICY_MAX));
        egress_policy_error("all", msg);
        assert_string_equal(msg, "egress mode \"all\" is not in the allowlist (none, package-managers, open)");
}

static void test_hosts_parse(void **state) {
        char why[EGRESS_ERROR_MAX];
        EgressHosts h;

        assert_int_equal(egress_hosts_parse("  Reg.Example.org:8080 auto\tother.example.org [::1]:99 ", &h, why), 0);
        assert_true(h.discover);
        assert_int_equal(h.n, 3);
        assert_string_equal(h.hosts[0].name, "reg.example.org");
        assert_int_equal(h.hosts[0].port, 8080);
        assert_string_equal(h.hosts[2].name, "::1");
        assert_true(egress_hosts_allow(&h, "REG.example.org", 8080));
        assert_false(egress_hosts_allow(&h, "reg.example.org", 443));
        /* a host without port: 80 and 443 */
        assert_true(egress_hosts_allow(&h, "other.example.org", 443));
        assert_true(egress_hosts_allow(&h, "other.example.org", 80));
        assert_false(egress_hosts_allow(&h, "other.example.org", 22));
        assert_false(egress_hosts_allow(&h, "sub.other.example.org", 443));
        egress_hosts_done(&h);

        assert_int_equal(egress_hosts_parse("", &h, why), 0);
        assert_false(h.discover);
        assert_int_equal(h.n, 0);
        egress_hosts_done(&h);

        static const char *const bad[] = { "a.example.org:0", "a.example.org:65536", "a.example.org:x", "-a.org",
                                           "http://a.org", "a.org/path", "[::1", "[::g]:80", "a..org:", ":80" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(egress_hosts_parse(bad[i], &h, why), -EINVAL);
                assert_non_null(strstr(why, "is not host, host:port or auto"));
        }
}

static void test_hosts_limit(void **state) {
        char value[SBX_EGRESS_HOSTS_MAX * 16 + 32] = "", why[EGRESS_ERROR_MAX];
        size_t n = 0;
        EgressHosts h;

        for (unsigned i = 0; i <= SBX_EGRESS_HOSTS_MAX; i++)
                n += (size_t) snprintf(value + n, sizeof(value) - n, "h%u.example ", i);
        assert_int_equal(egress_hosts_parse(value, &h, why), -E2BIG);
}

static void test_discover(void **state) {
        static const struct {
                const char *name;
                uint16_t port;
        } want[] = {
                { "mirror.example.org", 0 },         { "secure.example.net", 8443 },
                { "mirrorlist.example.org", 0 },     { "npm.example.com", 0 },
                { "npm.corp.example.com", 4873 },    { "pypi.example.com", 0 },
                { "extra1.example.com", 0 },         { "extra2.example.com", 8081 },
                { "xdg.example.com", 0 },            { "deb822.example.org", 0 },
                { "continued.example.org", 0 },      { "second-stanza.example.org", 8080 },
                { "fd00::1", 3142 },
        };
        _cleanup_close_ int rootfd = open("tests/unit/egress-root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char empty[] = "/tmp/sbx-test-egress-XXXXXX";
        _cleanup_close_ int emptyfd = -EBADF;
        EgressHosts h = { .discover = true };

        assert_true(rootfd >= 0);
        assert_int_equal(egress_hosts_discover(&h, rootfd), 0);
        for (size_t i = 0; i < h.n; i++)
                print_message("found %s:%u\n", h.hosts[i].name, h.hosts[i].port);
        assert_int_equal(h.n, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                bool found = false;

                for (size_t j = 0; j < h.n; j++)
                        found |= strcmp(h.hosts[j].name, want[i].name) == 0 && h.hosts[j].port == want[i].port;
                assert_true(found);
        }
        assert_false(egress_hosts_allow(&h, "commented.example.org", 80));
        assert_false(egress_hosts_allow(&h, "disabled.example.org", 80));
        assert_false(egress_hosts_allow(&h, "not-a-registry.example.com", 80));
        assert_false(egress_hosts_allow(&h, "trusted.example.com", 443));
        egress_hosts_done(&h);

        /* No configuration at all: nothing found, no error. */
        assert_non_null(mkdtemp(empty));
        emptyfd = open(empty, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(emptyfd >= 0);
        assert_int_equal(egress_hosts_discover(&h, emptyfd), 0);
        assert_int_equal(h.n, 0);
        egress_hosts_done(&h);
        assert_int_equal(rmdir(empty), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_policy_names),
                cmocka_unit_test(test_hosts_parse),
                cmocka_unit_test(test_hosts_limit),
                cmocka_unit_test(test_discover),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
