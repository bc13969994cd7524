/* Unit tests for proto/msg-json.c: protobuf-c replies to JSON through
 * field tables, as sandbox-mcp (U+FFFD repair) and sbxctl ('?' repair)
 * use it; the output is compared as compact JSON text, key order included. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "msg-json.h"
#include "wire.h"

static const MsgJsonMap pub_all = MSG_JSON_MAP_INIT(sbx__publication__descriptor,
        MSG_JSON_NAMES("published layer owner error conflicts"));

static const MsgJsonMap pub_omit = MSG_JSON_MAP_INIT(sbx__publication__descriptor,
        MSG_JSON_NAMES("published"),
        MSG_JSON_FIELD("error", "error", .flags = MSG_JSON_OMIT_EMPTY),
        MSG_JSON_FIELD("conflicts", "conflicts", .flags = MSG_JSON_OMIT_EMPTY));

/* exit_code: null unless has_exit_code (a bool has_X beside X) */
static const MsgJsonMap command_map = MSG_JSON_MAP_INIT(sbx__command_info__descriptor,
        MSG_JSON_NAMES("exit_code"),
        MSG_JSON_FIELD("signal", "signal", .flags = MSG_JSON_NULL_EMPTY),
        MSG_JSON_FIELD("raw_signal", "signal"),
        MSG_JSON_FIELD("end_reason", "end_reason", .flags = MSG_JSON_NULL_EMPTY),
        MSG_JSON_FIELD("started", "started_unix_usec", .flags = MSG_JSON_USEC_AS_SECONDS),
        MSG_JSON_FIELD("ended", "ended_unix_usec", .flags = MSG_JSON_USEC_AS_SECONDS | MSG_JSON_NULL_EMPTY),
        MSG_JSON_FIELD("ended_usec", "ended_unix_usec"));

static const MsgJsonMap finalize_map = MSG_JSON_MAP_INIT(sbx__session_finalize_reply__descriptor,
        MSG_JSON_NAMES("action"), MSG_JSON_FIELD("publication", "publication", .sub = &pub_omit));

static const MsgJsonMap finalize_omit_map = MSG_JSON_MAP_INIT(sbx__session_finalize_reply__descriptor,
        MSG_JSON_FIELD("publication", "publication", .flags = MSG_JSON_OMIT_EMPTY, .sub = &pub_omit));

static const MsgJsonMap range_map = MSG_JSON_MAP_INIT(sbx__blame_range__descriptor,
        MSG_JSON_FIELD("start", "start_line"), MSG_JSON_NAMES("owner"));

static const MsgJsonMap blame_map = MSG_JSON_MAP_INIT(sbx__file_blame_reply__descriptor,
        MSG_JSON_FIELD("ranges", "ranges", .sub = &range_map));

static const MsgJsonMap sandbox_map = MSG_JSON_MAP_INIT(sbx__sandbox_info__descriptor,
        MSG_JSON_FIELD("memory", "memory_bytes"), MSG_JSON_FIELD("created", "created_unix"),
        MSG_JSON_FIELD("image", "image", .fallback = "default"));

static const MsgJsonMap status_map = MSG_JSON_MAP_INIT(sbx__status_reply__descriptor,
        MSG_JSON_FIELD("uptime", "uptime_seconds"), MSG_JSON_NAMES("caller_only"));

static const MsgJsonMap diff_map = MSG_JSON_MAP_INIT(sbx__session_diff_reply__descriptor, MSG_JSON_NAMES("diff"));

/* j as compact JSON text (taking j), compared with want. */
static void assert_json(json_t *j, const char *want) {
        char *text;

        assert_non_null(j);
        text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(j);
        assert_non_null(text);
        assert_string_equal(text, want);
        free(text);
}

static void test_scalars_and_repeated_strings(void **state) {
        char *conflicts[] = { (char *) "a.txt", (char *) "b/c" };
        Sbx__Publication p = SBX__PUBLICATION__INIT;

        p.published = true;
        p.layer = 7;
        p.owner = (char *) "workspace_session:ws-1";
        assert_json(msg_json_object(&pub_all, &p, MSG_JSON_TEXT_REPLACE),
                    "{\"published\":true,\"layer\":7,\"owner\":\"workspace_session:ws-1\",\"error\":\"\",\"conflicts\":[]}");
        assert_json(msg_json_object(&pub_omit, &p, MSG_JSON_TEXT_REPLACE), "{\"published\":true}");
        p.published = false;
        p.error = (char *) "refused";
        p.n_conflicts = 2;
        p.conflicts = conflicts;
        assert_json(msg_json_object(&pub_omit, &p, MSG_JSON_TEXT_REPLACE),
                    "{\"published\":false,\"error\":\"refused\",\"conflicts\":[\"a.txt\",\"b/c\"]}");
}

static void test_null_present_and_seconds(void **state) {
        Sbx__CommandInfo c = SBX__COMMAND_INFO__INIT;

        c.exit_code = 3;                /* has_exit_code false: null */
        c.started_unix_usec = 1500000;
        assert_json(msg_json_object(&command_map, &c, MSG_JSON_TEXT_REPLACE),
                    "{\"exit_code\":null,\"signal\":null,\"raw_signal\":0,\"end_reason\":null,\"started\":1.5,"
                    "\"ended\":null,\"ended_usec\":0}");
        c.has_exit_code = true;
        c.signal = 9;
        c.end_reason = (char *) "signal";
        c.ended_unix_usec = 2250000;
        assert_json(msg_json_object(&command_map, &c, MSG_JSON_TEXT_REPLACE),
                    "{\"exit_code\":3,\"signal\":9,\"raw_signal\":9,\"end_reason\":\"signal\",\"started\":1.5,"
                    "\"ended\":2.25,\"ended_usec\":2250000}");
}

static void test_messages(void **state) {
        Sbx__SessionFinalizeReply f = SBX__SESSION_FINALIZE_REPLY__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__FileBlameReply b = SBX__FILE_BLAME_REPLY__INIT;
        Sbx__BlameRange r1 = SBX__BLAME_RANGE__INIT, r2 = SBX__BLAME_RANGE__INIT;
        Sbx__BlameRange *ranges[] = { &r1, &r2 };

        f.action = (char *) "discarded";
        assert_json(msg_json_object(&finalize_map, &f, MSG_JSON_TEXT_REPLACE),
                    "{\"action\":\"discarded\",\"publication\":null}");
        assert_json(msg_json_object(&finalize_omit_map, &f, MSG_JSON_TEXT_REPLACE), "{}");
        f.publication = &p;
        assert_json(msg_json_object(&finalize_map, &f, MSG_JSON_TEXT_REPLACE),
                    "{\"action\":\"discarded\",\"publication\":{\"published\":false}}");

        assert_json(msg_json_object(&blame_map, &b, MSG_JSON_TEXT_REPLACE), "{\"ranges\":[]}");
        r1.start_line = 1;
        r1.owner = (char *) "original";
        r2.start_line = 4;
        r2.owner = (char *) "operation:op-1";
        b.n_ranges = 2;
        b.ranges = ranges;
        assert_json(msg_json_object(&blame_map, &b, MSG_JSON_TEXT_REPLACE),
                    "{\"ranges\":[{\"start\":1,\"owner\":\"original\"},{\"start\":4,\"owner\":\"operation:op-1\"}]}");
        assert_json(msg_json_array(&range_map, (void *const *) ranges, 2, MSG_JSON_TEXT_ASCII),
                    "[{\"start\":1,\"owner\":\"original\"},{\"start\":4,\"owner\":\"operation:op-1\"}]");
}

static void test_integers_reals_fallback(void **state) {
        Sbx__SandboxInfo s = SBX__SANDBOX_INFO__INIT;
        Sbx__StatusReply st = SBX__STATUS_REPLY__INIT;
        json_t *o;

        s.memory_bytes = UINT64_MAX;    /* clamped to INT64_MAX */
        s.created_unix = -5;
        assert_json(msg_json_object(&sandbox_map, &s, MSG_JSON_TEXT_ASCII),
                    "{\"memory\":9223372036854775807,\"created\":-5,\"image\":\"default\"}");
        s.image = (char *) "custom";
        assert_json(msg_json_object(&sandbox_map, &s, MSG_JSON_TEXT_ASCII),
                    "{\"memory\":9223372036854775807,\"created\":-5,\"image\":\"custom\"}");

        st.uptime_seconds = NAN;        /* not finite: 0 */
        st.caller_only = true;
        assert_json(msg_json_object(&status_map, &st, MSG_JSON_TEXT_ASCII), "{\"uptime\":0.0,\"caller_only\":true}");

        /* msg_json_append: after what the object holds */
        o = json_pack("{s:s}", "first", "x");
        assert_int_equal(msg_json_append(o, &status_map, &st, MSG_JSON_TEXT_ASCII), 0);
        assert_json(o, "{\"first\":\"x\",\"uptime\":0.0,\"caller_only\":true}");
}

static void test_text_repair(void **state) {
        static const uint8_t bytes[] = { 'a', 0xff, 'b', 0, 'c', 0xc3, 0xa9 };     /* a, bad, b, NUL, c, é */
        static const uint8_t valid[] = { 'x', 0, 0xc3, 0xa9 };
        Sbx__SessionDiffReply d = SBX__SESSION_DIFF_REPLY__INIT;

        d.diff.data = (uint8_t *) bytes;
        d.diff.len = sizeof(bytes);
        /* sandbox-mcp: U+FFFD for the bad byte, NUL kept */
        assert_json(msg_json_object(&diff_map, &d, MSG_JSON_TEXT_REPLACE),
                    "{\"diff\":\"a\xef\xbf\xbd" "b\\u0000c\xc3\xa9\"}");
        /* sbxctl: NUL as '?', and, the rest not being UTF-8, every byte >= 0x80 */
        assert_json(msg_json_object(&diff_map, &d, MSG_JSON_TEXT_ASCII), "{\"diff\":\"a?b?c??\"}");
        d.diff.data = (uint8_t *) valid;
        d.diff.len = sizeof(valid);
        assert_json(msg_json_object(&diff_map, &d, MSG_JSON_TEXT_ASCII), "{\"diff\":\"x?\xc3\xa9\"}");
        d.diff.len = 0;
        assert_json(msg_json_object(&diff_map, &d, MSG_JSON_TEXT_ASCII), "{\"diff\":\"\"}");

        assert_json(msg_json_string(NULL, 0, MSG_JSON_TEXT_REPLACE), "\"\"");
        /* a surrogate (ED A0 80) is not UTF-8 for either */
        assert_json(msg_json_string("\xed\xa0\x80", 3, MSG_JSON_TEXT_REPLACE), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
        assert_json(msg_json_string("\xed\xa0\x80", 3, MSG_JSON_TEXT_ASCII), "\"???\"");
}

static void test_msg_set(void **state) {
        Sbx__Msg m;
        Sbx__Gc gc = SBX__GC__INIT;

        wire_msg_set(&m, SBX__MSG_TYPE__MSG_CLIENT_GC, &gc);
        assert_int_equal(m.type, SBX__MSG_TYPE__MSG_CLIENT_GC);
        assert_int_equal(m.body_case, SBX__MSG__BODY_GC);
        assert_ptr_equal(m.gc, &gc);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_scalars_and_repeated_strings),
                cmocka_unit_test(test_null_present_and_seconds),
                cmocka_unit_test(test_messages),
                cmocka_unit_test(test_integers_reals_fallback),
                cmocka_unit_test(test_text_repair),
                cmocka_unit_test(test_msg_set),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
