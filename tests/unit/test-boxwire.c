/* Unit tests for sandbox_wire's table in a box's /etc/hosts and the host and
 * port of externalBaseUrl (supervisor/core/boxwire.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/boxwire.h"
#include "sbx-limits.h"

static void url_ok(const char *url, const char *host, unsigned port) {
        char h[SBX_EGRESS_HOST_MAX + 1];
        uint16_t p = 0;

        assert_int_equal(box_url_target(url, h, &p), 0);
        assert_string_equal(h, host);
        assert_int_equal(p, port);
}

static void test_url_target(void **state) {
        url_ok("http://staging.example.com", "staging.example.com", 80);
        url_ok("https://Staging.Example.COM/v1/x?y#z", "staging.example.com", 443);
        url_ok("http://127.0.0.2:8099/", "127.0.0.2", 8099);
        url_ok("https://[2001:DB8::1]:9443/api", "2001:db8::1", 9443);
        url_ok("https://[::1]", "::1", 443);
        url_ok("http://h:1?q", "h", 1);
}

static void test_url_refused(void **state) {
        static const char *const bad[] = {
                "", "ftp://h/", "http://", "http:///x", "http://user@h/", "http://user:pw@h/", "http://h:0/",
                "http://h:65536/", "http://h:/", "http://h:12x/", "http://h_x/", "http://[::1/", "http://[]/",
                "http://[::1]x/", "https://h%2e/",
        };
        char h[SBX_EGRESS_HOST_MAX + 1];
        char longer[SBX_EGRESS_HOST_MAX + 16] = "http://";
        uint16_t p;

        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
                if (box_url_target(bad[i], h, &p) != -EINVAL)
                        fail_msg("'%s' was taken", bad[i]);
        memset(longer + 7, 'a', SBX_EGRESS_HOST_MAX + 1);
        assert_int_equal(box_url_target(longer, h, &p), -EINVAL);
}

static void test_hosts_wired(void **state) {
        static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n";
        char *a, *b, *c;

        assert_string_equal(box_wired_mode(hosts, "api"), "");
        a = box_hosts_wired(hosts, "api", "box");
        assert_non_null(a);
        assert_string_equal(a, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n127.0.0.1\tapi\t# sbx-wire box\n");
        assert_string_equal(box_wired_mode(a, "api"), "box");
        assert_string_equal(box_wired_mode(a, "ap"), "");
        /* Another service joins; the first one's line is replaced, not added. */
        b = box_hosts_wired(a, "web", "box");
        free(a);
        a = box_hosts_wired(b, "api", "external");
        assert_string_equal(a, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n127.0.0.1\tweb\t# sbx-wire box\n"
                               "#\tapi\t# sbx-wire external\n");
        assert_string_equal(box_wired_mode(a, "api"), "external");
        assert_string_equal(box_wired_mode(a, "web"), "box");
        c = box_hosts_wired(a, "api", "box");
        assert_string_equal(box_wired_mode(c, "api"), "box");
        assert_null(strstr(c, "external"));
        /* A line that only looks like one (another mode word) is no mode. */
        assert_string_equal(box_wired_mode("1.2.3.4\tapi\t# sbx-wire elsewhere\n", "api"), "");
        free(a);
        free(b);
        free(c);
}

/* no_proxy: the names wired box only (external ones go to sbx-egress, unwired ones resolve nowhere). */
static void test_no_proxy(void **state) {
        Sbx__BoxService web = SBX__BOX_SERVICE__INIT, api = SBX__BOX_SERVICE__INIT, db = SBX__BOX_SERVICE__INIT;
        Sbx__BoxService *services[] = { &web, &api, &db };
        Box box = { .services = services, .n_services = 3 };
        char *v;

        web.name = (char *) "web";
        api.name = (char *) "api";
        db.name = (char *) "db";
        v = box_no_proxy(&box, "127.0.0.1\tlocalhost\n");
        assert_string_equal(v, "localhost,127.0.0.1");
        free(v);
        v = box_no_proxy(&box, "127.0.0.1\tlocalhost\n127.0.0.1\tweb\t# sbx-wire box\n#\tapi\t# sbx-wire external\n"
                               "127.0.0.1\tdb\t# sbx-wire box\n");
        assert_string_equal(v, "localhost,127.0.0.1,web,db");
        free(v);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_url_target),
                cmocka_unit_test(test_url_refused),
                cmocka_unit_test(test_hosts_wired),
                cmocka_unit_test(test_no_proxy),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
