/* Unit tests for sbx-egress's request parser (egress/request.c) and its
 * address classes (egress/addr.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "../../egress/addr.h"
#include "../../egress/request.h"
#include "macro.h"

static int parse(const char *text, EgressRequest *req) {
        return egress_request_parse(text, strlen(text), req);
}

static void test_connect(void **state) {
        static const char head[] = "CONNECT Pypi.Example.com:443 HTTP/1.1\r\nHost: pypi.example.com:443\r\n\r\nTLS";
        EgressRequest req;

        assert_int_equal(parse(head, &req), 0);
        assert_true(req.connect);
        assert_string_equal(req.host, "pypi.example.com");
        assert_int_equal(req.port, 443);
        assert_int_equal(req.head_len, strlen(head) - 3);
        assert_null(req.forward);
        egress_request_done(&req);
}

static void test_absolute_uri(void **state) {
        EgressRequest req;

        assert_int_equal(parse("GET http://mirror.example.org/debian/x?y=1 HTTP/1.1\r\nHost: elsewhere\r\n"
                               "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n"
                               "Accept: */*\r\n\r\n", &req), 0);
        assert_false(req.connect);
        assert_string_equal(req.host, "mirror.example.org");
        assert_int_equal(req.port, 80);
        assert_string_equal(req.forward, "GET /debian/x?y=1 HTTP/1.1\r\nHost: mirror.example.org\r\n"
                                         "Accept: */*\r\nConnection: close\r\n\r\n");
        egress_request_done(&req);
        assert_int_equal(parse("HEAD http://[fd00::1]:3142 HTTP/1.0\r\n\r\n", &req), 0);
        assert_string_equal(req.host, "fd00::1");
        assert_int_equal(req.port, 3142);
        assert_string_equal(req.forward, "HEAD / HTTP/1.0\r\nHost: [fd00::1]:3142\r\nConnection: close\r\n\r\n");
        egress_request_done(&req);
}

static void test_incomplete_and_too_large(void **state) {
        char big[SBX_EGRESS_HEADER_MAX + 64];
        EgressRequest req;

        assert_int_equal(parse("CONNECT a.example:443 HTTP/1.1\r\n", &req), -EAGAIN);
        assert_int_equal(parse("CONNECT a.example:443 HTTP/1.1\r", &req), -EAGAIN);
        assert_int_equal(parse("", &req), -EAGAIN);
        memset(big, 'a', sizeof(big));
        memcpy(big, "CONNECT a.example:443 HTTP/1.1\r\nX: ", 35);
        assert_int_equal(egress_request_parse(big, sizeof(big), &req), -E2BIG);
}

static void test_strict(void **state) {
        static const char *const bad[] = {
                "CONNECT a.example HTTP/1.1\r\n\r\n",                  /* no port */
                "CONNECT a.example:0 HTTP/1.1\r\n\r\n",
                "CONNECT user@a.example:443 HTTP/1.1\r\n\r\n",
                "GET /relative HTTP/1.1\r\nHost: a\r\n\r\n",          /* origin form: not a proxy request */
                "GET https://a.example/ HTTP/1.1\r\n\r\n",            /* https goes by CONNECT */
                "GET http://u:p@a.example/ HTTP/1.1\r\n\r\n",
                "GET http://a.example?x HTTP/1.1\r\n\r\n",
                "get http://a.example/ HTTP/1.1\r\n\r\n",
                "GET  http://a.example/ HTTP/1.1\r\n\r\n",
                "GET http://a.example/ HTTP/2.0\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\n\r\n",              /* bare LF */
                "GET http://a.example/ HTTP/1.1\r\nX: y\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\nX: y\rz\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\n folded\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\nBad Name: y\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\n: y\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\nX: \x01\r\n\r\n",
                "GET http://a.example/\x7f HTTP/1.1\r\n\r\n",
                "GET http://-a.example/ HTTP/1.1\r\n\r\n",
                "ABCDEFGHIJKLMNOPQ http://a.example/ HTTP/1.1\r\n\r\n",
        };
        EgressRequest req;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                print_message("%zu\n", i);
                assert_int_equal(parse(bad[i], &req), -EINVAL);
        }
}

static void test_header_count(void **state) {
        char head[SBX_EGRESS_HEADER_MAX];
        size_t n = (size_t) snprintf(head, sizeof(head), "CONNECT a.example:443 HTTP/1.1\r\n");
        EgressRequest req;

        for (unsigned i = 0; i <= SBX_EGRESS_HEADERS_MAX; i++)
                n += (size_t) snprintf(head + n, sizeof(head) - n, "X%u: y\r\n", i);
        n += (size_t) snprintf(head + n, sizeof(head) - n, "\r\n");
        assert_int_equal(egress_request_parse(head, n, &req), -EINVAL);
}

static AddrClass class_of(const char *text) {
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
        struct sockaddr_in sa4 = { .sin_family = AF_INET };

        if (inet_pton(AF_INET, text, &sa4.sin_addr) == 1)
                return egress_addr_class((struct sockaddr *) &sa4);
        assert_int_equal(inet_pton(AF_INET6, text, &sa6.sin6_addr), 1);
        return egress_addr_class((struct sockaddr *) &sa6);
}

static void test_addr_classes(void **state) {
        static const char *const public[] = { "1.1.1.1", "8.8.8.8", "151.101.0.223", "2a04:4e42::223",
                                              "2606:4700::1111", "172.32.0.1", "100.128.0.1" };
        static const char *const private[] = { "127.0.0.1", "127.255.0.2", "10.0.0.1", "172.16.5.4", "172.31.255.255",
                                               "192.168.1.1", "169.254.169.254", "100.64.0.1", "::1", "fe80::1",
                                               "fd00::1", "fc00::5", "::ffff:10.0.0.1", "::ffff:127.0.0.1",
                                               "64:ff9b::a9fe:a9fe", "2002:c0a8:0101::1" };
        static const char *const never[] = { "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255",
                                             "240.0.0.1", "192.0.2.1", "::", "ff02::1", "2001:db8::1", "::1.2.3.4" };

        for (size_t i = 0; i < ELEMENTSOF(public); i++) {
                print_message("%s\n", public[i]);
                assert_int_equal(class_of(public[i]), ADDR_PUBLIC);
        }
        for (size_t i = 0; i < ELEMENTSOF(private); i++) {
                print_message("%s\n", private[i]);
                assert_int_equal(class_of(private[i]), ADDR_PRIVATE);
        }
        for (size_t i = 0; i < ELEMENTSOF(never); i++) {
                print_message("%s\n", never[i]);
                assert_int_equal(class_of(never[i]), ADDR_NEVER);
        }
}

static void test_addr_allowed(void **state) {
        struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct sockaddr_in any = { .sin_family = AF_INET };
        struct sockaddr_in pub = { .sin_family = AF_INET };

        inet_pton(AF_INET, "1.1.1.1", &pub.sin_addr);
        assert_false(egress_addr_allowed((struct sockaddr *) &lo, false));
        assert_true(egress_addr_allowed((struct sockaddr *) &lo, true));
        assert_false(egress_addr_allowed((struct sockaddr *) &any, true));
        assert_true(egress_addr_allowed((struct sockaddr *) &pub, false));
        /* the host's own addresses: loopback at least is one */
        assert_true(egress_addr_is_local((struct sockaddr *) &lo));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_connect),
                cmocka_unit_test(test_absolute_uri),
                cmocka_unit_test(test_incomplete_and_too_large),
                cmocka_unit_test(test_strict),
                cmocka_unit_test(test_header_count),
                cmocka_unit_test(test_addr_classes),
                cmocka_unit_test(test_addr_allowed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
