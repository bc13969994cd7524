/* Unit tests for broker/schema.c (the JSON Schema validator) and
 * broker/tools.c (the tool table, argument checks, requests to sbxd and
 * results from its replies). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/schema.h"
#include "../../broker/tools.h"
#include "memfd-util.h"
#include "utf8.h"
#include "macro.h"
#include "sbx-limits.h"

/* ---- helpers ------------------------------------------------------------------ */

static json_t *load(const char *text) {
        json_error_t err;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);

        if (!j)
                fail_msg("bad test JSON '%s': %s", text, err.text);
        return j;
}

/* Validate; return NULL when valid, else the message (caller frees). */
static char *check(const char *schema_text, json_t *instance) {
        json_t *schema = load(schema_text);
        char *error = NULL;
        int r = schema_validate(schema, instance, &error);

        json_decref(schema);
        if (r == 0) {
                assert_null(error);
                return NULL;
        }
        assert_int_equal(r, -EINVAL);
        assert_non_null(error);
        return error;
}

static void expect_valid(const char *schema_text, const char *instance_text) {
        json_t *instance = load(instance_text);
        char *error = check(schema_text, instance);

        if (error)
                fail_msg("'%s' rejected: %s", instance_text, error);
        json_decref(instance);
}

static void expect_error(const char *schema_text, const char *instance_text, const char *message) {
        json_t *instance = load(instance_text);
        _cleanup_free_ char *error = check(schema_text, instance);

        if (!error)
                fail_msg("'%s' accepted, expected '%s'", instance_text, message);
        if (strcmp(error, message) != 0)
                fail_msg("'%s': got '%s', expected '%s'", instance_text, error, message);
        json_decref(instance);
}

#define OBJ(props) "{\"type\":\"object\",\"properties\":{" props "},\"additionalProperties\":false}"

/* ---- keywords ----------------------------------------------------------------- */

static void test_type_string(void **state) {
        const char *s = OBJ("\"a\":{\"type\":\"string\"}");

        expect_valid(s, "{\"a\":\"x\"}");
        expect_valid(s, "{\"a\":\"\"}");
        expect_error(s, "{\"a\":1}", "a: must be a string");
        expect_error(s, "{\"a\":null}", "a: must be a string");
        expect_error(s, "{\"a\":[\"x\"]}", "a: must be a string");
}

static void test_type_integer(void **state) {
        const char *s = OBJ("\"n\":{\"type\":\"integer\"}");
        json_t *v;

        expect_valid(s, "{\"n\":0}");
        expect_valid(s, "{\"n\":-9223372036854775808}");
        expect_valid(s, "{\"n\":9223372036854775807}");
        expect_error(s, "{\"n\":1.5}", "n: must be an integer");
        expect_error(s, "{\"n\":\"5\"}", "n: must be an integer");
        expect_error(s, "{\"n\":true}", "n: must be an integer");
        expect_error(s, "{\"n\":1e30}", "n: is out of range for a 64-bit integer");
        expect_error(s, "{\"n\":-1e30}", "n: is out of range for a 64-bit integer");
        expect_error(s, "{\"n\":9223372036854775808.0}", "n: is out of range for a 64-bit integer");

        /* An integral real is an integer (JSON Schema), and becomes one. */
        v = load("{\"n\":5.0}");
        assert_null(check(s, v));
        assert_true(json_is_integer(json_object_get(v, "n")));
        assert_int_equal(json_integer_value(json_object_get(v, "n")), 5);
        json_decref(v);
}

static void test_type_number_boolean_null(void **state) {
        const char *s = OBJ("\"x\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},\"z\":{\"type\":\"null\"}");

        expect_valid(s, "{\"x\":1,\"b\":true,\"z\":null}");
        expect_valid(s, "{\"x\":1.25,\"b\":false}");
        expect_error(s, "{\"x\":\"1\"}", "x: must be a number");
        expect_error(s, "{\"b\":0}", "b: must be a boolean");
        expect_error(s, "{\"z\":0}", "z: must be null");
}

static void test_type_list(void **state) {
        const char *s = OBJ("\"e\":{\"type\":[\"integer\",\"null\"]},\"p\":{\"type\":[\"object\",\"array\",\"null\"]}");

        expect_valid(s, "{\"e\":3,\"p\":null}");
        expect_valid(s, "{\"e\":null,\"p\":{}}");
        expect_valid(s, "{\"p\":[]}");
        expect_error(s, "{\"e\":\"3\"}", "e: must be an integer or null");
        expect_error(s, "{\"p\":1}", "p: must be an object, an array or null");
}

static void test_type_object_and_array(void **state) {
        const char *s = "{\"type\":\"object\",\"properties\":{"
                        "\"o\":{\"type\":\"object\"},"
                        "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}";

        expect_valid(s, "{\"o\":{\"anything\":1},\"l\":[\"a\",\"b\"]}");
        expect_error(s, "{\"o\":[]}", "o: must be an object");
        expect_error(s, "{\"l\":{}}", "l: must be an array");
        expect_error(s, "{\"l\":[\"a\",2]}", "l[1]: must be a string");
}

static void test_root_must_be_object(void **state) {
        const char *s = OBJ("\"a\":{\"type\":\"string\"}");

        expect_error(s, "[]", "arguments: must be an object");
        expect_error(s, "null", "arguments: must be an object");
        expect_error(s, "\"x\"", "arguments: must be an object");
}

static void test_required(void **state) {
        const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"string\"}},"
                        "\"required\":[\"a\",\"b\"]}";

        expect_valid(s, "{\"a\":\"\",\"b\":\"\"}");
        expect_error(s, "{\"a\":\"x\"}", "b: is required");
        expect_error(s, "{}", "a: is required; b: is required");
}

static void test_additional_properties(void **state) {
        const char *s = OBJ("\"a\":{\"type\":\"string\"},\"b\":{}");
        const char *open = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}";
        const char *typed = "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}";

        expect_error(s, "{\"c\":1}", "c: unknown argument (expected one of: a, b)");
        expect_valid(open, "{\"c\":1}");
        expect_valid(typed, "{\"x\":1}");
        expect_error(typed, "{\"x\":\"1\"}", "x: must be an integer");
        expect_error("{\"type\":\"object\",\"additionalProperties\":false}", "{\"x\":1}",
                     "x: unknown argument (expected none)");
}

static void test_nested_paths(void **state) {
        const char *s = "{\"type\":\"object\",\"properties\":{\"edits\":{\"type\":\"array\",\"items\":{"
                        "\"type\":\"object\",\"properties\":{\"old_string\":{\"type\":\"string\"},"
                        "\"replace_all\":{\"type\":\"boolean\",\"default\":false}},"
                        "\"required\":[\"old_string\"],\"additionalProperties\":false}}}}";
        json_t *v;

        expect_error(s, "{\"edits\":[{\"old_string\":\"a\"},{\"old_string\":1}]}", "edits[1].old_string: must be a string");
        expect_error(s, "{\"edits\":[{}]}", "edits[0].old_string: is required");
        expect_error(s, "{\"edits\":[{\"old_string\":\"a\",\"x\":1}]}",
                     "edits[0].x: unknown property (expected one of: old_string, replace_all)");
        v = load("{\"edits\":[{\"old_string\":\"a\"}]}");
        assert_null(check(s, v));
        assert_true(json_is_false(json_object_get(json_array_get(json_object_get(v, "edits"), 0), "replace_all")));
        json_decref(v);
}

static void test_minimum_maximum(void **state) {
        const char *s = OBJ("\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10},"
                            "\"x\":{\"type\":\"number\",\"minimum\":0.5,\"maximum\":1.5}");

        expect_valid(s, "{\"n\":0,\"x\":0.5}");
        expect_valid(s, "{\"n\":10,\"x\":1.5}");
        expect_error(s, "{\"n\":-1}", "n: must be at least 0");
        expect_error(s, "{\"n\":11}", "n: must be at most 10");
        expect_error(s, "{\"n\":-9223372036854775808}", "n: must be at least 0");
        expect_error(s, "{\"x\":0.25}", "x: must be at least 0.5");
        expect_error(s, "{\"x\":2}", "x: must be at most 1.5");
}

static void test_enum(void **state) {
        const char *s = OBJ("\"s\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\"]},"
                            "\"r\":{\"type\":[\"string\",\"null\"],\"enum\":[\"exit\",null]}");

        expect_valid(s, "{\"s\":\"ok\",\"r\":null}");
        expect_valid(s, "{\"r\":\"exit\"}");
        expect_error(s, "{\"s\":\"OK\"}", "s: must be one of [\"ok\",\"error\"]");
        expect_error(s, "{\"r\":\"other\"}", "r: must be one of [\"exit\",null]");
}

static void test_defaults(void **state) {
        const char *s = "{\"type\":\"object\",\"properties\":{"
                        "\"a\":{\"type\":\"integer\",\"default\":200},"
                        "\"b\":{\"type\":\"integer\",\"default\":0},"
                        "\"c\":{\"type\":\"string\",\"default\":\"req\"}},"
                        "\"required\":[\"c\"]}";
        json_t *v = load("{\"b\":7}");
        _cleanup_free_ char *error = check(s, v);

        /* Optional a gets its default, given b keeps its value, required c gets none. */
        assert_string_equal(error, "c: is required");
        assert_int_equal(json_integer_value(json_object_get(v, "a")), 200);
        assert_int_equal(json_integer_value(json_object_get(v, "b")), 7);
        assert_null(json_object_get(v, "c"));
        json_decref(v);
}

static void test_many_errors(void **state) {
        const char *s = OBJ("\"a\":{\"type\":\"string\"}");
        json_t *v = load("{\"k1\":1,\"k2\":1,\"k3\":1,\"k4\":1,\"k5\":1,\"k6\":1,\"k7\":1,\"k8\":1,\"k9\":1,\"k10\":1}");
        _cleanup_free_ char *error = check(s, v);

        assert_non_null(strstr(error, "k1: unknown argument"));
        assert_non_null(strstr(error, "k8: unknown argument"));
        assert_null(strstr(error, "k9:"));
        assert_non_null(strstr(error, "; and 2 more"));
        json_decref(v);
}

static void test_long_key_shortened(void **state) {
        const char *s = OBJ("\"a\":{\"type\":\"string\"}");
        char key[1000], text[1100];
        json_t *v;
        _cleanup_free_ char *error = NULL;

        memset(key, 'k', sizeof(key) - 1);
        key[sizeof(key) - 1] = '\0';
        snprintf(text, sizeof(text), "{\"%s\":1}", key);
        v = load(text);
        error = check(s, v);
        assert_true(strlen(error) < 300);
        assert_non_null(strstr(error, "…: unknown argument"));
        json_decref(v);
}

/* ---- the real tools --------------------------------------------------------------- */

/* The published input schemas of shared/seeds/000 and its example
 * arguments, copied verbatim (compact JSON, key order as in the seed). */
static const struct {
        const char *name, *schema, *example;
} seed[] = {
        { "exec_command",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"workspace_session_id\":{\"type\":\"string\",\"description\":\"Existing workspace session id to run inside. Omit to create a session with finalize policy publish_then_destroy.\"},\"cmd\":{\"type\":\"string\",\"description\":\"Shell command text.\"},\"timeout_ms\":{\"type\":\"integer\",\"description\":\"Command timeout in milliseconds.\",\"minimum\":0},\"yield_time_ms\":{\"type\":\"integer\",\"description\":\"Initial output wait in milliseconds.\",\"minimum\":0}},\"required\":[\"sandbox_id\",\"cmd\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"cmd\":\"cargo check\",\"yield_time_ms\":1000}" },
        { "write_command_stdin",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"command_session_id\":{\"type\":\"string\",\"description\":\"Command session id returned by exec_command.\"},\"stdin\":{\"type\":\"string\",\"description\":\"Text to write to stdin.\"},\"yield_time_ms\":{\"type\":\"integer\",\"description\":\"Output wait after writing stdin.\",\"minimum\":0}},\"required\":[\"sandbox_id\",\"command_session_id\",\"stdin\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"command_session_id\":\"namespace_execution_42\",\"stdin\":\"yes\\n\",\"yield_time_ms\":1000}" },
        { "read_command_lines",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"command_session_id\":{\"type\":\"string\",\"description\":\"Command session id returned by exec_command.\"},\"start_offset\":{\"type\":\"integer\",\"description\":\"First transcript line offset. Defaults to 0.\",\"minimum\":0,\"default\":0},\"limit\":{\"type\":\"integer\",\"description\":\"Maximum transcript rows to return. Defaults to 200; maximum 1000.\",\"minimum\":0,\"default\":200}},\"required\":[\"sandbox_id\",\"command_session_id\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"command_session_id\":\"namespace_execution_42\",\"start_offset\":2,\"limit\":200}" },
        { "file_read",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"path\":{\"type\":\"string\",\"description\":\"Repository-relative or workspace-root-absolute path to read.\"},\"offset\":{\"type\":\"integer\",\"description\":\"1-indexed line number to start reading from. Defaults to 1.\",\"minimum\":0,\"default\":1},\"limit\":{\"type\":\"integer\",\"description\":\"Maximum number of lines to read. Defaults to 2000; must be 1..=2000.\",\"minimum\":0,\"default\":2000},\"workspace_session_id\":{\"type\":\"string\",\"description\":\"Existing workspace session id to read inside. Omit to read the snapshot.\"}},\"required\":[\"sandbox_id\",\"path\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"path\":\"README.md\",\"offset\":1,\"limit\":40}" },
        { "file_write",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"path\":{\"type\":\"string\",\"description\":\"Repository-relative or workspace-root-absolute path to write.\"},\"content\":{\"type\":\"string\",\"description\":\"File content to write.\"},\"workspace_session_id\":{\"type\":\"string\",\"description\":\"Existing workspace session id to write inside. Omit to publish a layer.\"}},\"required\":[\"sandbox_id\",\"path\",\"content\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"path\":\"notes.txt\",\"content\":\"new content\\n\"}" },
        { "file_edit",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"path\":{\"type\":\"string\",\"description\":\"Repository-relative or workspace-root-absolute path to edit.\"},\"edits\":{\"type\":\"array\",\"description\":\"JSON array of { old_string, new_string, replace_all? } edits, applied in order.\"},\"workspace_session_id\":{\"type\":\"string\",\"description\":\"Existing workspace session id to edit inside. Omit to publish a layer.\"}},\"required\":[\"sandbox_id\",\"path\",\"edits\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"path\":\"notes.txt\",\"edits\":[{\"old_string\":\"draft\",\"new_string\":\"ready\",\"replace_all\":true}]}" },
        { "file_blame",
          "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"description\":\"Target sandbox id (selects the daemon to query).\"},\"path\":{\"type\":\"string\",\"description\":\"Repository-relative path to blame.\"}},\"required\":[\"sandbox_id\",\"path\"],\"additionalProperties\":false}",
          "{\"sandbox_id\":\"sbox-example\",\"path\":\"notes.txt\"}" },
};

static Tools *tools;

static int setup(void **state) {
        return tools_new(TOOL_SET_RUNTIME | TOOL_SET_SESSIONS, &tools) < 0 ? -1 : 0;
}

static int teardown(void **state) {
        tools = tools_free(tools);
        return 0;
}

static const Tool *tool(const char *name) {
        const Tool *t = tools_find(tools, name, strlen(name));
        assert_non_null(t);
        return t;
}

/* Prepare a call; returns 0 or -EINVAL with the message in *ret_error. */
static int prepare(const char *name, json_t *args, ToolRequest *req, char **ret_error) {
        int r = tool_prepare(tool(name), args, req, ret_error);

        assert_true(r == 0 || r == -EINVAL);
        return r;
}

static void expect_rejected(const char *name, const char *args_text, const char *message) {
        json_t *args = load(args_text);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        if (prepare(name, args, &req, &error) == 0)
                fail_msg("%s %s accepted, expected '%s'", name, args_text, message);
        if (strcmp(error, message) != 0)
                fail_msg("%s %s: got '%s', expected '%s'", name, args_text, error, message);
        json_decref(args);
}

static void test_tools_list(void **state) {
        const json_t *list = json_object_get(tools_list_result(tools), "tools");

        /* The seven runtime tools in the seed's order, then the sessions set. */
        assert_int_equal(json_array_size(list), 14);
        assert_int_equal(ELEMENTSOF(seed), 7);
        for (size_t i = 0; i < ELEMENTSOF(seed); i++) {
                json_t *t = json_array_get(list, i);
                json_t *out = json_object_get(t, "outputSchema");
                _cleanup_free_ char *in = json_dumps(json_object_get(t, "inputSchema"), JSON_COMPACT);

                assert_string_equal(json_string_value(json_object_get(t, "name")), seed[i].name);
                assert_true(json_is_string(json_object_get(t, "title")));
                assert_true(strlen(json_string_value(json_object_get(t, "description"))) > 40);
                /* Byte for byte, key order included. */
                assert_string_equal(in, seed[i].schema);
                assert_string_equal(json_string_value(json_object_get(out, "type")), "object");
                assert_true(json_is_object(json_object_get(t, "annotations")));
        }
}

static void test_annotations(void **state) {
        const json_t *list = json_object_get(tools_list_result(tools), "tools");
        json_t *exec = json_object_get(json_array_get(list, 0), "annotations");
        json_t *in = json_object_get(json_array_get(list, 1), "annotations");
        json_t *read = json_object_get(json_array_get(list, 2), "annotations");
        json_t *mutating = load("{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
                                "\"openWorldHint\":false}");
        json_t *read_only = load("{\"readOnlyHint\":true,\"openWorldHint\":false}");

        assert_true(json_equal(exec, mutating));
        assert_true(json_equal(in, mutating));
        assert_true(json_equal(read, read_only));
        json_decref(mutating);
        json_decref(read_only);
}

/* Every keyword in a published schema is one this validator knows, and one
 * that draft-07 and 2020-12 share. */
static void check_keywords(const json_t *schema, const char *where) {
        const char *key;
        json_t *v;

        assert_true(json_is_object(schema));
        json_object_foreach((json_t *) schema, key, v) {
                if (!schema_keyword_known(key))
                        fail_msg("%s: keyword '%s' unknown", where, key);
                if (strcmp(key, "properties") == 0) {
                        const char *name;
                        json_t *sub;
                        json_object_foreach(v, name, sub)
                                check_keywords(sub, name);
                } else if (strcmp(key, "items") == 0 || strcmp(key, "additionalProperties") == 0) {
                        if (json_is_object(v))
                                check_keywords(v, key);
                }
        }
}

static void test_schema_keywords(void **state) {
        const json_t *list = json_object_get(tools_list_result(tools), "tools");
        size_t i;
        json_t *t;

        json_array_foreach(list, i, t) {
                check_keywords(json_object_get(t, "inputSchema"), "inputSchema");
                check_keywords(json_object_get(t, "outputSchema"), "outputSchema");
        }
}

static void test_unknown_tool(void **state) {
        assert_null(tools_find(tools, "nope", 4));
        assert_null(tools_find(tools, "exec_command\0x", 14));
        assert_null(tools_find(tools, "exec_comman", 11));
        assert_non_null(tools_find(tools, "exec_command", 12));
}

static void test_tool_sets(void **state) {
        unsigned sets = 0;
        const char *bad = NULL;

        assert_int_equal(tool_sets_parse("runtime", &sets, &bad), 0);
        assert_int_equal(sets, TOOL_SET_RUNTIME);
        assert_int_equal(tool_sets_parse("runtime,runtime", &sets, &bad), 0);
        assert_int_equal(tool_sets_parse("sessions", &sets, &bad), 0);
        assert_int_equal(sets, TOOL_SET_SESSIONS);
        assert_int_equal(tool_sets_parse("runtime,sessions", &sets, &bad), 0);
        assert_int_equal(sets, TOOL_SET_RUNTIME | TOOL_SET_SESSIONS);
        assert_int_equal(tool_sets_parse("runtime,files", &sets, &bad), -EINVAL);
        assert_string_equal(bad, "files");
        assert_int_equal(tool_sets_parse("", &sets, &bad), -EINVAL);
        assert_int_equal(tool_sets_parse("runtime,", &sets, &bad), -EINVAL);
        assert_int_equal(tool_sets_parse("Runtime", &sets, &bad), -EINVAL);
}

static void test_seed_examples(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(seed); i++) {
                json_t *args = load(seed[i].example);
                _cleanup_free_ char *error = NULL;
                ToolRequest req;

                if (prepare(seed[i].name, args, &req, &error) != 0)
                        fail_msg("%s example rejected: %s", seed[i].name, error);
                assert_true(sbx__msg__get_packed_size(&req.msg) > 0);
                tool_request_done(&req);
                json_decref(args);
        }
}

static void test_exec_request(void **state) {
        json_t *args = load(seed[0].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_int_equal(prepare("exec_command", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_EXEC);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_EXEC);
        assert_string_equal(req.msg.exec->sandbox, "sbox-example");
        assert_string_equal(req.msg.exec->workspace_session, "");
        assert_string_equal(req.msg.exec->cmd, "cargo check");
        assert_false(req.msg.exec->has_timeout);
        assert_true(req.msg.exec->has_yield);
        assert_int_equal(req.msg.exec->yield_ms, 1000);
        /* It packs as a frame. */
        assert_true(sbx__msg__get_packed_size(&req.msg) > 0);
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"w1\",\"cmd\":\"true\","
                    "\"timeout_ms\":5000,\"yield_time_ms\":99999999}");
        assert_int_equal(prepare("exec_command", args, &req, &error), 0);
        assert_string_equal(req.msg.exec->workspace_session, "w1");
        assert_true(req.msg.exec->has_timeout);
        assert_int_equal(req.msg.exec->timeout_ms, 5000);
        assert_int_equal(req.msg.exec->yield_ms, SBX_YIELD_MAX_MS);     /* clamped */
        json_decref(args);

        /* timeout_ms 0 means the default; "" as session means none. */
        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"\",\"cmd\":\"true\",\"timeout_ms\":0,"
                    "\"yield_time_ms\":0}");
        assert_int_equal(prepare("exec_command", args, &req, &error), 0);
        assert_false(req.msg.exec->has_timeout);
        assert_string_equal(req.msg.exec->workspace_session, "");
        assert_true(req.msg.exec->has_yield);
        assert_int_equal(req.msg.exec->yield_ms, 0);
        json_decref(args);
}

static void test_exec_rejects(void **state) {
        char *big = malloc(SBX_CMD_MAX + 64);
        char *text = malloc(SBX_CMD_MAX + 128);

        expect_rejected("exec_command", "{\"sandbox_id\":\"s\"}", "invalid arguments: cmd: is required");
        expect_rejected("exec_command", "{\"cmd\":\"ls\"}", "invalid arguments: sandbox_id: is required");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"\"}", "invalid arguments: cmd: must not be empty");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":7}", "invalid arguments: cmd: must be a string");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"a\\u0000b\"}",
                        "invalid arguments: cmd: must not contain NUL characters");
        expect_rejected("exec_command", "{\"sandbox_id\":\"\",\"cmd\":\"ls\"}",
                        "invalid arguments: sandbox_id: must not be empty");
        expect_rejected("exec_command",
                        "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"workspace_session_id\":"
                        "\"wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\"}",
                        "invalid arguments: workspace_session_id: must be at most 64 bytes");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"timeout_ms\":-1}",
                        "invalid arguments: timeout_ms: must be at least 0");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"timeout_ms\":1.5}",
                        "invalid arguments: timeout_ms: must be an integer");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"timeout_ms\":86400001}",
                        "invalid arguments: timeout_ms: must be at most 86400000 (24 hours)");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"yield_time_ms\":\"1000\"}",
                        "invalid arguments: yield_time_ms: must be an integer");
        expect_rejected("exec_command", "{\"sandbox_id\":\"s\",\"cmd\":\"ls\",\"command\":\"ls\"}",
                        "invalid arguments: command: unknown argument (expected one of: sandbox_id, "
                        "workspace_session_id, cmd, timeout_ms, yield_time_ms)");

        assert_non_null(big);
        assert_non_null(text);
        memset(big, 'x', SBX_CMD_MAX + 1);
        big[SBX_CMD_MAX + 1] = '\0';
        snprintf(text, SBX_CMD_MAX + 128, "{\"sandbox_id\":\"s\",\"cmd\":\"%s\"}", big);
        expect_rejected("exec_command", text, "invalid arguments: cmd: must be at most 65536 bytes");
        big[SBX_CMD_MAX] = '\0';        /* exactly the limit is fine */
        snprintf(text, SBX_CMD_MAX + 128, "{\"sandbox_id\":\"s\",\"cmd\":\"%s\"}", big);
        {
                json_t *args = load(text);
                _cleanup_free_ char *error = NULL;
                ToolRequest req;

                assert_int_equal(prepare("exec_command", args, &req, &error), 0);
                assert_true(sbx__msg__get_packed_size(&req.msg) <= SBX_FRAME_MAX);
                json_decref(args);
        }
        free(big);
        free(text);
}

static void test_stdin_request(void **state) {
        json_t *args = load(seed[1].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_int_equal(prepare("write_command_stdin", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_STDIN);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_STDIN);
        assert_string_equal(req.msg.stdin->command_session, "namespace_execution_42");
        assert_int_equal(req.msg.stdin->data.len, 4);
        assert_memory_equal(req.msg.stdin->data.data, "yes\n", 4);
        assert_false(req.msg.stdin->close);
        assert_int_equal(req.msg.stdin->yield_ms, 1000);
        json_decref(args);

        /* A trailing U+0004 closes stdin after the text before it. */
        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"last line\\n\\u0004\"}");
        assert_int_equal(prepare("write_command_stdin", args, &req, &error), 0);
        assert_true(req.msg.stdin->close);
        assert_int_equal(req.msg.stdin->data.len, 10);
        assert_memory_equal(req.msg.stdin->data.data, "last line\n", 10);
        assert_false(req.msg.stdin->has_yield);
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"\\u0004\"}");
        assert_int_equal(prepare("write_command_stdin", args, &req, &error), 0);
        assert_true(req.msg.stdin->close);
        assert_int_equal(req.msg.stdin->data.len, 0);
        json_decref(args);

        /* Only a trailing one counts; NUL bytes are data; "" writes nothing. */
        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"a\\u0004b\\u0000\"}");
        assert_int_equal(prepare("write_command_stdin", args, &req, &error), 0);
        assert_false(req.msg.stdin->close);
        assert_int_equal(req.msg.stdin->data.len, 4);
        assert_memory_equal(req.msg.stdin->data.data, "a\x04" "b\0", 4);
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"\",\"yield_time_ms\":40000}");
        assert_int_equal(prepare("write_command_stdin", args, &req, &error), 0);
        assert_false(req.msg.stdin->close);
        assert_int_equal(req.msg.stdin->data.len, 0);
        assert_int_equal(req.msg.stdin->yield_ms, SBX_YIELD_MAX_MS);
        json_decref(args);
}

static void test_stdin_rejects(void **state) {
        char *big = malloc(SBX_STDIN_MAX + 2);
        char *text = malloc(SBX_STDIN_MAX + 128);

        expect_rejected("write_command_stdin", "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\"}",
                        "invalid arguments: stdin: is required");
        expect_rejected("write_command_stdin", "{\"sandbox_id\":\"s\",\"stdin\":\"x\"}",
                        "invalid arguments: command_session_id: is required");
        expect_rejected("write_command_stdin", "{\"sandbox_id\":\"s\",\"command_session_id\":\"\",\"stdin\":\"x\"}",
                        "invalid arguments: command_session_id: must not be empty");
        expect_rejected("write_command_stdin",
                        "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":[\"x\"]}",
                        "invalid arguments: stdin: must be a string");
        expect_rejected("write_command_stdin",
                        "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"x\",\"yield_time_ms\":-5}",
                        "invalid arguments: yield_time_ms: must be at least 0");

        memset(big, 'x', SBX_STDIN_MAX + 1);
        big[SBX_STDIN_MAX + 1] = '\0';
        snprintf(text, SBX_STDIN_MAX + 128, "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"stdin\":\"%s\"}", big);
        expect_rejected("write_command_stdin", text, "invalid arguments: stdin: must be at most 65536 bytes per call");
        free(big);
        free(text);
}

static void test_read_lines_request(void **state) {
        json_t *args = load(seed[2].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_int_equal(prepare("read_command_lines", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_READ_LINES);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_READ_LINES);
        assert_string_equal(req.msg.read_lines->sandbox, "sbox-example");
        assert_int_equal(req.msg.read_lines->start_offset, 2);
        assert_true(req.msg.read_lines->has_limit);
        assert_int_equal(req.msg.read_lines->limit, 200);
        json_decref(args);

        /* Defaults: start_offset 0, limit 200, visible in the arguments too. */
        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\"}");
        assert_int_equal(prepare("read_command_lines", args, &req, &error), 0);
        assert_int_equal(req.msg.read_lines->start_offset, 0);
        assert_int_equal(req.msg.read_lines->limit, SBX_READ_DEFAULT_LINES);
        assert_int_equal(json_integer_value(json_object_get(args, "limit")), 200);
        assert_int_equal(json_integer_value(json_object_get(args, "start_offset")), 0);
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"limit\":1000,\"start_offset\":123456789012}");
        assert_int_equal(prepare("read_command_lines", args, &req, &error), 0);
        assert_int_equal(req.msg.read_lines->limit, 1000);
        assert_int_equal(req.msg.read_lines->start_offset, 123456789012ull);
        json_decref(args);
}

static void test_read_lines_rejects(void **state) {
        expect_rejected("read_command_lines", "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"limit\":1001}",
                        "invalid arguments: limit: must be at most 1000");
        expect_rejected("read_command_lines", "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"limit\":-1}",
                        "invalid arguments: limit: must be at least 0");
        expect_rejected("read_command_lines",
                        "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"start_offset\":-1}",
                        "invalid arguments: start_offset: must be at least 0");
        expect_rejected("read_command_lines",
                        "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"start_offset\":\"2\"}",
                        "invalid arguments: start_offset: must be an integer");
        expect_rejected("read_command_lines", "{\"sandbox_id\":\"s\",\"command_session_id\":\"c\",\"offset\":1}",
                        "invalid arguments: offset: unknown argument (expected one of: sandbox_id, "
                        "command_session_id, start_offset, limit)");
        expect_rejected("read_command_lines", "[]", "invalid arguments: arguments: must be an object");
        expect_rejected("read_command_lines", "{}",
                        "invalid arguments: sandbox_id: is required; command_session_id: is required");
}

/* ---- results -------------------------------------------------------------------- */

static json_t *result_for(const char *name, const Sbx__Reply *reply, ContentMode mode) {
        json_t *r = NULL;

        assert_int_equal(tool_result_from_reply(tool(name), NULL, reply, -EBADF, mode, NULL, &r), 0);
        assert_non_null(r);
        return r;
}

/* A publication of layer, owned by owner, changing changed paths. */
static void published(Sbx__Publication *p, uint32_t layer, const char *owner, uint32_t changed) {
        p->published = true;
        p->layer = layer;
        p->owner = (char *) owner;
        p->changed_paths = changed;
}

/* A file_read reply of n lines from start. */
static void file_window(Sbx__FileReadReply *f, const char *path, const char *content, uint64_t start, uint64_t n,
                        uint64_t total_lines, uint64_t total_bytes) {
        f->path = (char *) path;
        f->content.data = (uint8_t *) content;
        f->content.len = strlen(content);
        f->start_line = start;
        f->num_lines = n;
        f->total_lines = total_lines;
        f->bytes_read = f->content.len;
        f->total_bytes = total_bytes;
}

/* A running command that has written two lines, as the seed's example. */
static void running_command(Sbx__CommandOutput *c, Sbx__Reply *reply, const char *id, const char *ws, double seconds,
                            const char *output) {
        c->command_session = (char *) id;
        c->workspace_session = (char *) ws;
        c->status = (char *) "running";
        c->wall_time_seconds = seconds;
        c->command_total_time_seconds = seconds;
        c->end_offset = 2;
        c->total_lines = 2;
        c->original_token_count = 4;
        c->output.data = (uint8_t *) output;
        c->output.len = strlen(output);
        reply->body_case = SBX__REPLY__BODY_COMMAND;
        reply->command = c;
}

static void test_result_running(void **state) {
        Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *sc, *content, *again;

        running_command(&c, &reply, "namespace_execution_42", "workspace_17", 0.25, "building\xe2\x80\xa6\n");

        r = result_for("exec_command", &reply, CONTENT_JSON);
        assert_true(json_is_false(json_object_get(r, "isError")));
        sc = json_object_get(r, "structuredContent");
        assert_string_equal(json_string_value(json_object_get(sc, "command_session_id")), "namespace_execution_42");
        assert_string_equal(json_string_value(json_object_get(sc, "workspace_session_id")), "workspace_17");
        assert_string_equal(json_string_value(json_object_get(sc, "status")), "running");
        assert_true(json_is_null(json_object_get(sc, "exit_code")));
        assert_true(json_is_null(json_object_get(sc, "signal")));
        assert_true(json_is_null(json_object_get(sc, "end_reason")));
        assert_true(json_is_null(json_object_get(sc, "publication")));
        assert_true(json_real_value(json_object_get(sc, "wall_time_seconds")) == 0.25);
        assert_int_equal(json_integer_value(json_object_get(sc, "start_offset")), 0);
        assert_int_equal(json_integer_value(json_object_get(sc, "end_offset")), 2);
        assert_int_equal(json_integer_value(json_object_get(sc, "total_lines")), 2);
        assert_int_equal(json_integer_value(json_object_get(sc, "original_token_count")), 4);
        assert_string_equal(json_string_value(json_object_get(sc, "output")), "building\xe2\x80\xa6\n");

        /* --content=json: the text block carries the same JSON. */
        content = json_object_get(r, "content");
        assert_int_equal(json_array_size(content), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(content, 0), "type")), "text");
        again = load(json_string_value(json_object_get(json_array_get(content, 0), "text")));
        assert_true(json_equal(again, sc));
        json_decref(again);
        json_decref(r);

        /* --content=none: the seed's empty content array. */
        r = result_for("exec_command", &reply, CONTENT_NONE);
        assert_int_equal(json_array_size(json_object_get(r, "content")), 0);
        assert_non_null(json_object_get(r, "structuredContent"));
        json_decref(r);
}

static void test_result_terminal(void **state) {
        Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *sc, *pub, *schema_out;
        _cleanup_free_ char *error = NULL;

        c.command_session = (char *) "c1";
        c.workspace_session = (char *) "w1";
        c.status = (char *) "error";
        c.has_exit_code = true;
        c.exit_code = 0;
        c.signal = 9;
        c.end_reason = (char *) "signal";
        c.output.data = (uint8_t *) "bad \xff\xfe utf8 \xc3\n";
        c.output.len = strlen("bad \xff\xfe utf8 \xc3\n");
        published(&p, 7, "workspace_session:w1", 3);
        c.publication = &p;
        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &c;

        r = result_for("exec_command", &reply, CONTENT_JSON);
        sc = json_object_get(r, "structuredContent");
        assert_int_equal(json_integer_value(json_object_get(sc, "exit_code")), 0);
        assert_int_equal(json_integer_value(json_object_get(sc, "signal")), 9);
        assert_string_equal(json_string_value(json_object_get(sc, "end_reason")), "signal");
        assert_string_equal(json_string_value(json_object_get(sc, "output")),
                            "bad \xef\xbf\xbd\xef\xbf\xbd utf8 \xef\xbf\xbd\n");
        pub = json_object_get(sc, "publication");
        assert_true(json_is_true(json_object_get(pub, "published")));
        assert_int_equal(json_integer_value(json_object_get(pub, "layer")), 7);
        assert_string_equal(json_string_value(json_object_get(pub, "owner")), "workspace_session:w1");
        assert_int_equal(json_integer_value(json_object_get(pub, "changed_paths")), 3);
        assert_null(json_object_get(pub, "error"));

        /* It validates against the published outputSchema. */
        schema_out = json_object_get(json_array_get(json_object_get(tools_list_result(tools), "tools"), 0),
                                     "outputSchema");
        assert_int_equal(schema_validate(schema_out, sc, &error), 0);
        json_decref(r);

        p.published = false;
        p.error = (char *) "conflict: src/a.c changed since the session started";
        r = result_for("exec_command", &reply, CONTENT_JSON);
        pub = json_object_get(json_object_get(r, "structuredContent"), "publication");
        assert_true(json_is_false(json_object_get(pub, "published")));
        assert_string_equal(json_string_value(json_object_get(pub, "error")),
                            "conflict: src/a.c changed since the session started");
        json_decref(r);
}

static void test_result_errors(void **state) {
        Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r;

        reply.err = -ENOENT;
        reply.errmsg = (char *) "unknown sandbox 'x'";
        r = result_for("read_command_lines", &reply, CONTENT_JSON);
        assert_true(json_is_true(json_object_get(r, "isError")));
        assert_null(json_object_get(r, "structuredContent"));
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")),
                            "unknown sandbox 'x'");
        json_decref(r);

        reply.errmsg = (char *) "";
        r = result_for("read_command_lines", &reply, CONTENT_JSON);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")),
                            strerror(ENOENT));
        json_decref(r);

        /* A reply without a command body. */
        reply.err = 0;
        r = result_for("read_command_lines", &reply, CONTENT_JSON);
        assert_true(json_is_true(json_object_get(r, "isError")));
        json_decref(r);

        /* A status outside the promised enum is never passed on as structuredContent. */
        c.status = (char *) "exploded";
        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &c;
        r = result_for("read_command_lines", &reply, CONTENT_JSON);
        assert_true(json_is_true(json_object_get(r, "isError")));
        assert_null(json_object_get(r, "structuredContent"));
        assert_non_null(strstr(json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0),
                                                                 "text")),
                               "status: must be one of"));
        json_decref(r);
}

/* The seed's file_blame example: notes.txt, lines 1-4 original, 5-6 operation:request-id. */
static void seed_blame(Sbx__BlameRange *a, Sbx__BlameRange *b, Sbx__BlameRange **ranges, Sbx__FileBlameReply *f,
                       Sbx__Reply *reply) {
        a->start_line = 1;
        a->line_count = 4;
        a->owner = (char *) "original";
        b->start_line = 5;
        b->line_count = 2;
        b->owner = (char *) "operation:request-id";
        ranges[0] = a;
        ranges[1] = b;
        f->path = (char *) "notes.txt";
        f->n_ranges = 2;
        f->ranges = ranges;
        reply->body_case = SBX__REPLY__BODY_FILE_BLAME;
        reply->file_blame = f;
}

/* ---- the rendered text block (--content=text) ------------------------------------ */

/* The text block of the result of reply for name (args as JSON text or NULL). */
static char *text_for(const char *name, const char *args_text, const Sbx__Reply *reply) {
        json_t *args = args_text ? load(args_text) : NULL, *r = NULL, *content;
        char *text;

        assert_int_equal(tool_result_from_reply(tool(name), args, reply, -EBADF, CONTENT_TEXT, NULL, &r), 0);
        assert_true(json_is_false(json_object_get(r, "isError")));
        assert_non_null(json_object_get(r, "structuredContent"));
        content = json_object_get(r, "content");
        assert_int_equal(json_array_size(content), 1);
        text = strdup(json_string_value(json_object_get(json_array_get(content, 0), "text")));
        json_decref(r);
        json_decref(args);
        return text;
}

static void test_text_command(void **state) {
        Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        _cleanup_free_ char *running = NULL, *ok = NULL, *cut = NULL, *killed = NULL, *refused = NULL;

        running_command(&c, &reply, "cmd-1", "ws-1", 10.000431, "a \"b\"\n\tc\n");
        running = text_for("exec_command", NULL, &reply);
        assert_string_equal(running, "running, 10.0 s so far; 2 lines; command_session_id cmd-1 "
                                     "(write_command_stdin, read_command_lines); workspace_session_id ws-1\n"
                                     "a \"b\"\n\tc\n");

        /* Ended, published: no ids, no token count, the time rounded. */
        c.status = (char *) "ok";
        c.has_exit_code = true;
        c.end_reason = (char *) "exit";
        c.command_total_time_seconds = 0.034567;
        published(&p, 7, "workspace_session:ws-1", 1);
        c.publication = &p;
        ok = text_for("exec_command", NULL, &reply);
        assert_string_equal(ok, "ok, exit 0, 0.03 s; 2 lines; published layer 7 (1 changed path, owner "
                                "workspace_session:ws-1)\na \"b\"\n\tc\n");

        /* A window of lines 40-240 of 300: both cuts say how to page, in words. */
        c.start_offset = 40;
        c.end_offset = 240;
        c.total_lines = 300;
        c.original_token_count = 12345;
        p.published = false;
        p.changed_paths = 0;
        c.output.len = 0;
        cut = text_for("read_command_lines", NULL, &reply);
        assert_string_equal(cut, "ok, exit 0, 0.03 s; lines 40-240 of 300 shown; 40 earlier lines not shown; "
                                 "read_command_lines start_offset=0; 60 later lines not shown; read_command_lines "
                                 "start_offset=240; whole output ~12345 tokens; nothing to publish (nothing "
                                 "changed); command_session_id cmd-1\n");

        /* A signal and an end reason; a managed session (no publication) keeps its id. */
        c.start_offset = 0;
        c.end_offset = c.total_lines = 0;
        c.status = (char *) "timed_out";
        c.has_exit_code = false;
        c.signal = 9;
        c.end_reason = (char *) "timeout";
        c.command_total_time_seconds = 123.4;
        c.publication = NULL;
        killed = text_for("exec_command", NULL, &reply);
        assert_string_equal(killed, "timed_out, signal 9 (SIGKILL), timeout, 123 s; no output; "
                                    "workspace_session_id ws-1\n");

        /* A refused publication keeps the session: its id and the paths. */
        c.publication = &p;
        p.error = (char *) "not published: 2 path(s) changed";
        p.n_conflicts = 2;
        p.conflicts = (char *[]) { (char *) "a.c", (char *) "b.c" };
        refused = text_for("exec_command", NULL, &reply);
        assert_string_equal(refused, "timed_out, signal 9 (SIGKILL), timeout, 123 s; no output; not published: 2 "
                                     "path(s) changed (conflicting: a.c, b.c); workspace_session_id ws-1\n");
}

static void test_text_files(void **state) {
        Sbx__FileReadReply f = SBX__FILE_READ_REPLY__INIT;
        Sbx__FileChangeReply ch = SBX__FILE_CHANGE_REPLY__INIT;
        Sbx__FileBlameReply b = SBX__FILE_BLAME_REPLY__INIT;
        Sbx__BlameRange r1 = SBX__BLAME_RANGE__INIT, r2 = SBX__BLAME_RANGE__INIT, *ranges[2];
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        _cleanup_free_ char *read = NULL, *head = NULL, *edit = NULL, *same = NULL, *session = NULL, *blame = NULL;

        file_window(&f, "src/a.py", "x = \"1\"\ny = 2\n", 5, 2, 9, 100);
        f.has_next_offset = true;
        f.next_offset = 7;
        f.truncated = true;
        reply.body_case = SBX__REPLY__BODY_FILE_READ;
        reply.file_read = &f;
        read = text_for("file_read", NULL, &reply);
        assert_string_equal(read, "src/a.py: lines 5-6 of 9; more: file_read offset=7\nx = \"1\"\ny = 2\n");
        f.content.len = 3;
        f.num_lines = 1;
        f.next_offset = 6;
        head = text_for("file_read", NULL, &reply);
        assert_string_equal(head, "src/a.py: line 5 of 9; line 5 is longer than a window: its first 3 bytes; "
                                  "more: file_read offset=6\nx =");

        ch.type = (char *) "edit";
        ch.path = (char *) "a.txt";
        ch.bytes_written = 26;
        ch.edits_applied = 1;
        ch.replacements = 2;
        ch.diff.data = (uint8_t *) "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-draft\n+ready\n";
        ch.diff.len = strlen((char *) ch.diff.data);
        published(&p, 3, "operation:op-1", 1);
        ch.publication = &p;
        reply.body_case = SBX__REPLY__BODY_FILE_CHANGE;
        reply.file_change = &ch;
        edit = text_for("file_edit", NULL, &reply);
        assert_string_equal(edit, "edited a.txt: 1 edit, 2 replacements, 26 bytes now; published layer 3 (1 changed "
                                  "path, owner operation:op-1)\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-draft\n+ready\n");

        /* Nothing changed on disk: nothing published, and it says so. */
        ch.unchanged = true;
        ch.diff.len = 0;
        p.published = false;
        p.owner = (char *) "";
        same = text_for("file_edit", NULL, &reply);
        assert_string_equal(same, "a.txt unchanged: the edits leave its content as it was (26 bytes); nothing written, "
                                  "nothing published\n");

        ch.unchanged = false;
        ch.type = (char *) "create";
        ch.publication = NULL;
        session = text_for("file_write", "{\"workspace_session_id\":\"ws-9\"}", &reply);
        assert_string_equal(session, "created a.txt (26 bytes); in workspace session ws-9, private until it is finalized\n");

        seed_blame(&r1, &r2, ranges, &b, &reply);
        r2.line_count = 1;
        blame = text_for("file_blame", NULL, &reply);
        assert_string_equal(blame, "notes.txt: 2 ranges (lines, owner)\n1-4 original\n5 operation:request-id\n");
}

static void test_text_generic(void **state) {
        Sbx__SandboxInfo a = SBX__SANDBOX_INFO__INIT, *list[] = { &a };
        Sbx__SandboxListReply l = SBX__SANDBOX_LIST_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        _cleanup_free_ char *text = NULL;

        a.name = (char *) "repo";
        a.source_dir = (char *) "/src/repo";
        a.image = (char *) "default";
        a.layer_count = 3;
        l.n_sandboxes = 1;
        l.sandboxes = list;
        reply.body_case = SBX__REPLY__BODY_SANDBOX_LIST;
        reply.sandbox_list = &l;
        text = text_for("list_sandboxes", NULL, &reply);
        assert_string_equal(text, "sandboxes: 1\n- sandbox_id=repo source=/src/repo image=default layers=3 live_sessions=0\n");
}

/* ---- file tools and the sessions set ---------------------------------------------- */

#define FILE_ARGS "\"sandbox_id\":\"s\",\"path\":\"a.txt\""

static json_t *output_schema(const char *name) {
        return tool(name)->output_schema;
}

/* The bytes of a sealed memfd, checking its seals and size. */
static void *memfd_contents(int fd, size_t size) {
        struct stat st;
        uint8_t *buf = malloc(size + 1);
        ssize_t n;

        assert_true(fd >= 0);
        assert_non_null(buf);
        assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal((size_t) st.st_size, size);
        n = pread(fd, buf, size + 1, 0);
        assert_int_equal(n, (ssize_t) size);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        return buf;
}

static void test_sealed_memfd(void **state) {
        int fd = -EBADF;
        void *data;

        assert_int_equal(sealed_memfd_new("t", "hello", 5, &fd), 0);
        data = memfd_contents(fd, 5);
        assert_memory_equal(data, "hello", 5);
        free(data);
        /* Sealed: no writes, no growing, no shrinking, no further seals. */
        assert_int_equal(pwrite(fd, "x", 1, 0), -1);
        assert_int_equal(errno, EPERM);
        assert_int_equal(ftruncate(fd, 100), -1);
        assert_int_equal(ftruncate(fd, 1), -1);
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
        close(fd);

        assert_int_equal(sealed_memfd_new("empty", "", 0, &fd), 0);
        free(memfd_contents(fd, 0));
        close(fd);
}

static void test_file_read_request(void **state) {
        json_t *args = load(seed[3].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_int_equal(prepare("file_read", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_FILE_READ);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_FILE_READ);
        assert_int_equal(req.fd, -EBADF);
        assert_string_equal(req.msg.file_read->sandbox, "sbox-example");
        assert_string_equal(req.msg.file_read->path, "README.md");
        assert_string_equal(req.msg.file_read->workspace_session, "");
        assert_true(req.msg.file_read->has_offset);
        assert_int_equal(req.msg.file_read->offset, 1);
        assert_true(req.msg.file_read->has_limit);
        assert_int_equal(req.msg.file_read->limit, 40);
        json_decref(args);

        /* Defaults offset 1, limit 2000, visible in the arguments; 0 is taken as 1. */
        args = load("{" FILE_ARGS ",\"workspace_session_id\":\"ws-1\"}");
        assert_int_equal(prepare("file_read", args, &req, &error), 0);
        assert_int_equal(req.msg.file_read->offset, 1);
        assert_int_equal(req.msg.file_read->limit, 2000);
        assert_string_equal(req.msg.file_read->workspace_session, "ws-1");
        assert_int_equal(json_integer_value(json_object_get(args, "offset")), 1);
        assert_int_equal(json_integer_value(json_object_get(args, "limit")), 2000);
        json_decref(args);

        args = load("{" FILE_ARGS ",\"offset\":0,\"limit\":2000}");
        assert_int_equal(prepare("file_read", args, &req, &error), 0);
        assert_int_equal(req.msg.file_read->offset, 1);
        assert_int_equal(req.msg.file_read->limit, 2000);
        json_decref(args);

        args = load("{" FILE_ARGS ",\"offset\":123456789,\"limit\":1}");
        assert_int_equal(prepare("file_read", args, &req, &error), 0);
        assert_int_equal(req.msg.file_read->offset, 123456789);
        assert_int_equal(req.msg.file_read->limit, 1);
        json_decref(args);
}

static void test_file_path_rejects(void **state) {
        static const char *const tools_with_path[] = { "file_read", "file_write", "file_edit", "file_blame" };
        char *long_path = malloc(SBX_PATH_MAX + 2), *text = malloc(SBX_PATH_MAX + 256);

        assert_non_null(long_path);
        assert_non_null(text);
        memset(long_path, 'p', SBX_PATH_MAX + 1);
        long_path[SBX_PATH_MAX + 1] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(tools_with_path); i++) {
                const char *t = tools_with_path[i];
                const char *extra = strcmp(t, "file_write") == 0 ? ",\"content\":\"x\"" :
                                    strcmp(t, "file_edit") == 0 ? ",\"edits\":[{\"old_string\":\"a\",\"new_string\":\"b\"}]" : "";

                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\",\"path\":\"\"%s}", extra);
                expect_rejected(t, text, "invalid arguments: path: must not be empty");
                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\",\"path\":\"a\\u0000b\"%s}", extra);
                expect_rejected(t, text, "invalid arguments: path: must not contain NUL characters");
                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\",\"path\":\"%s\"%s}", long_path, extra);
                expect_rejected(t, text, "invalid arguments: path: must be at most 4096 bytes");
                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\",\"path\":7%s}", extra);
                expect_rejected(t, text, "invalid arguments: path: must be a string");
                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\"%s}", extra);
                expect_rejected(t, text, "invalid arguments: path: is required");
                snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"\",\"path\":\"a\"%s}", extra);
                expect_rejected(t, text, "invalid arguments: sandbox_id: must not be empty");
        }
        /* Exactly SBX_PATH_MAX bytes is fine. */
        long_path[SBX_PATH_MAX] = '\0';
        snprintf(text, SBX_PATH_MAX + 256, "{\"sandbox_id\":\"s\",\"path\":\"%s\"}", long_path);
        {
                json_t *args = load(text);
                _cleanup_free_ char *error = NULL;
                ToolRequest req;

                assert_int_equal(prepare("file_blame", args, &req, &error), 0);
                assert_true(sbx__msg__get_packed_size(&req.msg) <= SBX_FRAME_MAX);
                json_decref(args);
        }
        free(long_path);
        free(text);
}

static void test_file_read_rejects(void **state) {
        expect_rejected("file_read", "{" FILE_ARGS ",\"limit\":0}", "invalid arguments: limit: must be 1..=2000");
        expect_rejected("file_read", "{" FILE_ARGS ",\"limit\":2001}", "invalid arguments: limit: must be 1..=2000");
        expect_rejected("file_read", "{" FILE_ARGS ",\"limit\":-1}", "invalid arguments: limit: must be at least 0");
        expect_rejected("file_read", "{" FILE_ARGS ",\"offset\":-1}", "invalid arguments: offset: must be at least 0");
        expect_rejected("file_read", "{" FILE_ARGS ",\"offset\":\"1\"}", "invalid arguments: offset: must be an integer");
        expect_rejected("file_read", "{" FILE_ARGS ",\"workspace_session_id\":5}",
                        "invalid arguments: workspace_session_id: must be a string");
        expect_rejected("file_read", "{" FILE_ARGS ",\"start_offset\":1}",
                        "invalid arguments: start_offset: unknown argument (expected one of: sandbox_id, path, "
                        "offset, limit, workspace_session_id)");
}

static void test_file_write_request(void **state) {
        json_t *args = load(seed[4].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;
        void *data;

        assert_int_equal(prepare("file_write", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_FILE_WRITE);
        assert_string_equal(req.msg.file_write->path, "notes.txt");
        assert_string_equal(req.msg.file_write->workspace_session, "");
        assert_int_equal(req.msg.file_write->content_size, 12);
        data = memfd_contents(req.fd, 12);
        assert_memory_equal(data, "new content\n", 12);
        free(data);
        tool_request_done(&req);
        assert_int_equal(req.fd, -EBADF);
        json_decref(args);

        /* Raw UTF-8 bytes, NUL included; empty content is a valid (empty) file. */
        args = load("{" FILE_ARGS ",\"content\":\"\\u00e9\\u0000x\",\"workspace_session_id\":\"ws-2\"}");
        assert_int_equal(prepare("file_write", args, &req, &error), 0);
        assert_string_equal(req.msg.file_write->workspace_session, "ws-2");
        assert_int_equal(req.msg.file_write->content_size, 4);
        data = memfd_contents(req.fd, 4);
        assert_memory_equal(data, "\xc3\xa9\0x", 4);
        free(data);
        tool_request_done(&req);
        json_decref(args);

        args = load("{" FILE_ARGS ",\"content\":\"\"}");
        assert_int_equal(prepare("file_write", args, &req, &error), 0);
        assert_int_equal(req.msg.file_write->content_size, 0);
        free(memfd_contents(req.fd, 0));
        tool_request_done(&req);
        json_decref(args);

        expect_rejected("file_write", "{" FILE_ARGS "}", "invalid arguments: content: is required");
        expect_rejected("file_write", "{" FILE_ARGS ",\"content\":null}", "invalid arguments: content: must be a string");
}

static void test_file_write_too_big(void **state) {
        json_t *args = load("{" FILE_ARGS "}");
        char *big = malloc(SBX_FILE_MAX + 1);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_non_null(big);
        memset(big, 'x', SBX_FILE_MAX + 1);
        assert_int_equal(json_object_set_new(args, "content", json_stringn(big, SBX_FILE_MAX + 1)), 0);
        assert_int_equal(prepare("file_write", args, &req, &error), -EINVAL);
        assert_string_equal(error, "invalid arguments: content: must be at most 16777216 bytes (16 MiB)");
        assert_int_equal(req.fd, -EBADF);
        json_decref(args);

        args = load("{" FILE_ARGS "}");
        assert_int_equal(json_object_set_new(args, "content", json_stringn(big, SBX_FILE_MAX)), 0);
        free(error);
        error = NULL;
        assert_int_equal(prepare("file_write", args, &req, &error), 0);
        assert_int_equal(req.msg.file_write->content_size, SBX_FILE_MAX);
        tool_request_done(&req);
        json_decref(args);
        free(big);
}

static Sbx__EditList *edit_list_of(const ToolRequest *req) {
        uint8_t *data = memfd_contents(req->fd, req->msg.file_edit->edits_size);
        Sbx__EditList *l = sbx__edit_list__unpack(NULL, req->msg.file_edit->edits_size, data);

        free(data);
        assert_non_null(l);
        return l;
}

static void test_file_edit_request(void **state) {
        json_t *args = load(seed[5].example);
        _cleanup_free_ char *error = NULL;
        Sbx__EditList *l;
        ToolRequest req;

        assert_int_equal(prepare("file_edit", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_FILE_EDIT);
        assert_string_equal(req.msg.file_edit->path, "notes.txt");
        l = edit_list_of(&req);
        assert_int_equal(l->n_edits, 1);
        assert_int_equal(l->edits[0]->old_string.len, 5);
        assert_memory_equal(l->edits[0]->old_string.data, "draft", 5);
        assert_memory_equal(l->edits[0]->new_string.data, "ready", 5);
        assert_true(l->edits[0]->replace_all);
        sbx__edit_list__free_unpacked(l, NULL);
        tool_request_done(&req);
        json_decref(args);

        /* Order kept, replace_all defaults to false, "" new_string deletes, NUL is data. */
        args = load("{" FILE_ARGS ",\"workspace_session_id\":\"ws-3\",\"edits\":["
                    "{\"old_string\":\"a\\u0000\",\"new_string\":\"\"},"
                    "{\"new_string\":\"z\",\"old_string\":\"b\",\"replace_all\":false},"
                    "{\"old_string\":\"c\",\"new_string\":\"\\u00e9\",\"replace_all\":true}]}");
        assert_int_equal(prepare("file_edit", args, &req, &error), 0);
        assert_string_equal(req.msg.file_edit->workspace_session, "ws-3");
        l = edit_list_of(&req);
        assert_int_equal(l->n_edits, 3);
        assert_int_equal(l->edits[0]->old_string.len, 2);
        assert_memory_equal(l->edits[0]->old_string.data, "a\0", 2);
        assert_int_equal(l->edits[0]->new_string.len, 0);
        assert_false(l->edits[0]->replace_all);
        assert_memory_equal(l->edits[1]->old_string.data, "b", 1);
        assert_memory_equal(l->edits[1]->new_string.data, "z", 1);
        assert_false(l->edits[1]->replace_all);
        assert_int_equal(l->edits[2]->new_string.len, 2);
        assert_true(l->edits[2]->replace_all);
        sbx__edit_list__free_unpacked(l, NULL);
        assert_true(json_is_false(json_object_get(json_array_get(json_object_get(args, "edits"), 0), "replace_all")));
        tool_request_done(&req);
        json_decref(args);
}

static void test_file_edit_rejects(void **state) {
        expect_rejected("file_edit", "{" FILE_ARGS "}", "invalid arguments: edits: is required");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":{}}", "invalid arguments: edits: must be an array");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":\"[]\"}", "invalid arguments: edits: must be an array");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[]}", "invalid arguments: edits: must not be empty");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[\"a\"]}", "invalid arguments: edits[0]: must be an object");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\",\"new_string\":\"b\"},null]}",
                        "invalid arguments: edits[1]: must be an object");
        expect_rejected("file_edit",
                        "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\",\"new_string\":\"b\"},"
                        "{\"old_string\":\"a\",\"new_string\":\"b\"},{\"old_string\":1,\"new_string\":\"b\"}]}",
                        "invalid arguments: edits[2].old_string: must be a string");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\"}]}",
                        "invalid arguments: edits[0].new_string: is required");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[{\"new_string\":\"a\"}]}",
                        "invalid arguments: edits[0].old_string: is required");
        expect_rejected("file_edit", "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\",\"new_string\":[]}]}",
                        "invalid arguments: edits[0].new_string: must be a string");
        expect_rejected("file_edit",
                        "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\",\"new_string\":\"b\",\"replace_all\":\"yes\"}]}",
                        "invalid arguments: edits[0].replace_all: must be a boolean");
        expect_rejected("file_edit",
                        "{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\",\"new_string\":\"b\",\"oldText\":\"a\"}]}",
                        "invalid arguments: edits[0].oldText: unknown property (expected one of: old_string, "
                        "new_string, replace_all)");
}

static void test_file_edit_too_big(void **state) {
        json_t *args = load("{" FILE_ARGS ",\"edits\":[{\"old_string\":\"a\"}]}");
        json_t *edit = json_array_get(json_object_get(args, "edits"), 0);
        char *big = malloc(SBX_FILE_MAX);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_non_null(big);
        memset(big, 'x', SBX_FILE_MAX);
        assert_int_equal(json_object_set_new(edit, "new_string", json_stringn(big, SBX_FILE_MAX)), 0);
        assert_int_equal(prepare("file_edit", args, &req, &error), -EINVAL);
        assert_string_equal(error, "invalid arguments: edits: must total at most 16777216 bytes (16 MiB)");
        assert_int_equal(req.fd, -EBADF);
        json_decref(args);
        free(big);
}

static void test_file_blame_request(void **state) {
        json_t *args = load(seed[6].example);
        _cleanup_free_ char *error = NULL;
        ToolRequest req;

        assert_int_equal(prepare("file_blame", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_FILE_BLAME);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_FILE_BLAME);
        assert_string_equal(req.msg.file_blame->sandbox, "sbox-example");
        assert_string_equal(req.msg.file_blame->path, "notes.txt");
        json_decref(args);
        expect_rejected("file_blame", "{" FILE_ARGS ",\"workspace_session_id\":\"w\"}",
                        "invalid arguments: workspace_session_id: unknown argument (expected one of: sandbox_id, path)");
}

static void test_file_annotations(void **state) {
        static const struct {
                const char *name, *annotations;
        } cases[] = {
                { "file_read", "{\"readOnlyHint\":true,\"openWorldHint\":false}" },
                { "file_blame", "{\"readOnlyHint\":true,\"openWorldHint\":false}" },
                { "file_write", "{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}" },
                { "file_edit", "{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,\"openWorldHint\":false}" },
                { "create_workspace_session", "{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":false,\"openWorldHint\":false}" },
                { "finalize_workspace_session", "{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,\"openWorldHint\":false}" },
                { "list_workspace_sessions", "{\"readOnlyHint\":true,\"openWorldHint\":false}" },
                { "diff_workspace_session", "{\"readOnlyHint\":true,\"openWorldHint\":false}" },
                { "list_command_sessions", "{\"readOnlyHint\":true,\"openWorldHint\":false}" },
                { "cancel_command", "{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,\"openWorldHint\":false}" },
        };
        const json_t *list = json_object_get(tools_list_result(tools), "tools");

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *want = load(cases[i].annotations), *t;
                bool found = false;
                size_t k;

                json_array_foreach(list, k, t)
                        if (strcmp(json_string_value(json_object_get(t, "name")), cases[i].name) == 0) {
                                found = true;
                                if (!json_equal(json_object_get(t, "annotations"), want))
                                        fail_msg("%s: annotations differ", cases[i].name);
                                assert_true(strlen(json_string_value(json_object_get(t, "description"))) > 40);
                                assert_true(json_is_string(json_object_get(t, "title")));
                        }
                assert_true(found);
                json_decref(want);
        }
}

static void test_sessions_set_alone(void **state) {
        Tools *t = NULL;
        const json_t *list;

        assert_int_equal(tools_new(TOOL_SET_SESSIONS, &t), 0);
        list = json_object_get(tools_list_result(t), "tools");
        assert_int_equal(json_array_size(list), 7);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")),
                            "create_workspace_session");
        assert_non_null(tools_find(t, "list_sandboxes", 14));
        assert_null(tools_find(t, "exec_command", 12));
        assert_non_null(tools_find(t, "cancel_command", 14));
        tools_free(t);

        /* The runtime set alone has no sessions tools. */
        assert_int_equal(tools_new(TOOL_SET_RUNTIME, &t), 0);
        assert_int_equal(json_array_size(json_object_get(tools_list_result(t), "tools")), 7);
        assert_null(tools_find(t, "cancel_command", 14));
        tools_free(t);
}

static void test_sessions_requests(void **state) {
        _cleanup_free_ char *error = NULL;
        ToolRequest req;
        json_t *args;

        args = load("{\"sandbox_id\":\"s\"}");
        assert_int_equal(prepare("create_workspace_session", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_SESSION_CREATE);
        assert_string_equal(req.msg.session_create->sandbox, "s");
        assert_string_equal(req.msg.session_create->finalize_policy, "publish_then_destroy");
        assert_string_equal(json_string_value(json_object_get(args, "finalize_policy")), "publish_then_destroy");
        json_decref(args);
        args = load("{\"sandbox_id\":\"s\",\"finalize_policy\":\"destroy\"}");
        assert_int_equal(prepare("create_workspace_session", args, &req, &error), 0);
        assert_string_equal(req.msg.session_create->finalize_policy, "destroy");
        json_decref(args);

        /* action absent: "" (the session's policy); overwrite defaults to false. */
        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-1\"}");
        assert_int_equal(prepare("finalize_workspace_session", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_SESSION_FINALIZE);
        assert_string_equal(req.msg.session_finalize->workspace_session, "ws-1");
        assert_string_equal(req.msg.session_finalize->action, "");
        assert_false(req.msg.session_finalize->overwrite);
        assert_true(json_is_false(json_object_get(args, "overwrite")));
        assert_null(json_object_get(args, "action"));
        json_decref(args);
        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-1\",\"action\":\"publish\",\"overwrite\":true}");
        assert_int_equal(prepare("finalize_workspace_session", args, &req, &error), 0);
        assert_string_equal(req.msg.session_finalize->action, "publish");
        assert_true(req.msg.session_finalize->overwrite);
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\"}");
        assert_int_equal(prepare("list_workspace_sessions", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_SESSION_LIST);
        assert_string_equal(req.msg.session_list->sandbox, "s");
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-1\"}");
        assert_int_equal(prepare("diff_workspace_session", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_SESSION_DIFF);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_SESSION_DIFF);
        assert_string_equal(req.msg.session_diff->workspace_session, "ws-1");
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\"}");
        assert_int_equal(prepare("list_command_sessions", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_COMMAND_LIST);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_COMMAND_LIST);
        assert_string_equal(req.msg.command_list->workspace_session, "");
        json_decref(args);
        args = load("{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-9\"}");
        assert_int_equal(prepare("list_command_sessions", args, &req, &error), 0);
        assert_string_equal(req.msg.command_list->workspace_session, "ws-9");
        json_decref(args);

        args = load("{\"sandbox_id\":\"s\",\"command_session_id\":\"cmd-1\"}");
        assert_int_equal(prepare("cancel_command", args, &req, &error), 0);
        assert_int_equal(req.msg.type, SBX__MSG_TYPE__MSG_CLIENT_COMMAND_CANCEL);
        assert_int_equal(req.msg.body_case, SBX__MSG__BODY_COMMAND_CANCEL);
        assert_string_equal(req.msg.command_cancel->command_session, "cmd-1");
        assert_int_equal(req.fd, -EBADF);
        json_decref(args);
}

static void test_sessions_rejects(void **state) {
        expect_rejected("create_workspace_session", "{\"sandbox_id\":\"s\",\"finalize_policy\":\"publish\"}",
                        "invalid arguments: finalize_policy: must be one of [\"publish_then_destroy\",\"destroy\"]");
        expect_rejected("create_workspace_session", "{}", "invalid arguments: sandbox_id: is required");
        expect_rejected("finalize_workspace_session", "{\"sandbox_id\":\"s\"}",
                        "invalid arguments: workspace_session_id: is required");
        expect_rejected("finalize_workspace_session", "{\"sandbox_id\":\"s\",\"workspace_session_id\":\"\"}",
                        "invalid arguments: workspace_session_id: must not be empty");
        expect_rejected("finalize_workspace_session",
                        "{\"sandbox_id\":\"s\",\"workspace_session_id\":\"w\",\"action\":\"published\"}",
                        "invalid arguments: action: must be one of [\"publish\",\"discard\"]");
        expect_rejected("finalize_workspace_session",
                        "{\"sandbox_id\":\"s\",\"workspace_session_id\":\"w\",\"overwrite\":1}",
                        "invalid arguments: overwrite: must be a boolean");
        expect_rejected("list_workspace_sessions", "{\"sandbox_id\":\"s\",\"state\":\"live\"}",
                        "invalid arguments: state: unknown argument (expected one of: sandbox_id)");
        expect_rejected("diff_workspace_session", "{\"sandbox_id\":\"s\"}",
                        "invalid arguments: workspace_session_id: is required");
        expect_rejected("list_command_sessions", "{\"sandbox_id\":\"s\",\"workspace_session_id\":[]}",
                        "invalid arguments: workspace_session_id: must be a string");
        expect_rejected("cancel_command", "{\"sandbox_id\":\"s\"}", "invalid arguments: command_session_id: is required");
}

/* The result of a reply for tool name, with args (JSON text or NULL), checked
 * to be a success whose structuredContent validates against outputSchema. */
static json_t *ok_result(const char *name, const char *args_text, const Sbx__Reply *reply) {
        json_t *args = args_text ? load(args_text) : NULL, *r = NULL, *sc;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(tool_result_from_reply(tool(name), args, reply, -EBADF, CONTENT_NONE, NULL, &r), 0);
        json_decref(args);
        if (!json_is_false(json_object_get(r, "isError")))
                fail_msg("%s: error result: %s", name,
                         json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")));
        sc = json_object_get(r, "structuredContent");
        assert_int_equal(schema_validate(output_schema(name), sc, &error), 0);
        assert_int_equal(json_array_size(json_object_get(r, "content")), 0);
        return r;
}

#define SC(r) json_object_get((r), "structuredContent")
#define STR(o, k) json_string_value(json_object_get((o), (k)))
#define INT(o, k) json_integer_value(json_object_get((o), (k)))

static void test_result_file_read(void **state) {
        Sbx__FileReadReply f = SBX__FILE_READ_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r;

        file_window(&f, "README.md", "# Example\n\nProject overview\xe2\x80\xa6\n", 1, 3, 3, 31);
        reply.body_case = SBX__REPLY__BODY_FILE_READ;
        reply.file_read = &f;
        r = ok_result("file_read", NULL, &reply);
        assert_string_equal(STR(SC(r), "path"), "README.md");
        assert_string_equal(STR(SC(r), "content"), "# Example\n\nProject overview\xe2\x80\xa6\n");
        assert_int_equal(INT(SC(r), "start_line"), 1);
        assert_int_equal(INT(SC(r), "num_lines"), 3);
        assert_int_equal(INT(SC(r), "total_lines"), 3);
        assert_int_equal(INT(SC(r), "bytes_read"), 31);
        assert_int_equal(INT(SC(r), "total_bytes"), 31);
        assert_true(json_is_null(json_object_get(SC(r), "next_offset")));
        assert_true(json_is_false(json_object_get(SC(r), "truncated")));
        assert_int_equal(json_object_size(SC(r)), 9);
        json_decref(r);

        f.has_next_offset = true;
        f.next_offset = 4;
        f.truncated = true;
        r = ok_result("file_read", NULL, &reply);
        assert_int_equal(INT(SC(r), "next_offset"), 4);
        assert_true(json_is_true(json_object_get(SC(r), "truncated")));
        json_decref(r);

        /* A command body for file_read is refused. */
        {
                Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
                reply.body_case = SBX__REPLY__BODY_COMMAND;
                reply.command = &c;
                r = result_for("file_read", &reply, CONTENT_JSON);
                assert_true(json_is_true(json_object_get(r, "isError")));
                assert_null(json_object_get(r, "structuredContent"));
                json_decref(r);
        }
}

static void test_result_file_change(void **state) {
        Sbx__FileChangeReply f = SBX__FILE_CHANGE_REPLY__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *pub;

        f.type = (char *) "update";
        f.path = (char *) "notes.txt";
        f.bytes_written = 12;
        reply.body_case = SBX__REPLY__BODY_FILE_CHANGE;
        reply.file_change = &f;
        /* In a session: exactly the seed's three fields. */
        r = ok_result("file_write", NULL, &reply);
        assert_string_equal(STR(SC(r), "type"), "update");
        assert_string_equal(STR(SC(r), "path"), "notes.txt");
        assert_int_equal(INT(SC(r), "bytes_written"), 12);
        assert_int_equal(json_object_size(SC(r)), 3);
        json_decref(r);

        published(&p, 9, "operation:op-1", 1);
        f.publication = &p;
        f.type = (char *) "create";
        r = ok_result("file_write", NULL, &reply);
        pub = json_object_get(SC(r), "publication");
        assert_string_equal(STR(SC(r), "type"), "create");
        assert_true(json_is_true(json_object_get(pub, "published")));
        assert_int_equal(INT(pub, "layer"), 9);
        assert_string_equal(STR(pub, "owner"), "operation:op-1");
        assert_null(json_object_get(pub, "conflicts"));
        json_decref(r);

        f.type = (char *) "edit";
        f.edits_applied = 1;
        f.replacements = 2;
        f.bytes_written = 26;
        f.publication = NULL;
        r = ok_result("file_edit", NULL, &reply);
        assert_string_equal(STR(SC(r), "type"), "edit");
        assert_int_equal(INT(SC(r), "edits_applied"), 1);
        assert_int_equal(INT(SC(r), "replacements"), 2);
        assert_int_equal(INT(SC(r), "bytes_written"), 26);
        assert_int_equal(json_object_size(SC(r)), 5);
        json_decref(r);

        /* A type outside the promise is not passed on. */
        f.type = (char *) "edit";
        r = result_for("file_write", &reply, CONTENT_JSON);
        assert_true(json_is_true(json_object_get(r, "isError")));
        json_decref(r);
}

static void test_result_file_blame(void **state) {
        Sbx__BlameRange a = SBX__BLAME_RANGE__INIT, b = SBX__BLAME_RANGE__INIT;
        Sbx__BlameRange *ranges[2];
        Sbx__FileBlameReply f = SBX__FILE_BLAME_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *x;

        seed_blame(&a, &b, ranges, &f, &reply);
        r = ok_result("file_blame", NULL, &reply);
        assert_string_equal(STR(SC(r), "path"), "notes.txt");
        assert_int_equal(json_array_size(json_object_get(SC(r), "ranges")), 2);
        x = json_array_get(json_object_get(SC(r), "ranges"), 1);
        assert_int_equal(INT(x, "start_line"), 5);
        assert_int_equal(INT(x, "line_count"), 2);
        assert_string_equal(STR(x, "owner"), "operation:request-id");
        json_decref(r);

        /* An empty file has no ranges. */
        f.n_ranges = 0;
        r = ok_result("file_blame", NULL, &reply);
        assert_int_equal(json_array_size(json_object_get(SC(r), "ranges")), 0);
        json_decref(r);
}

static void fill_session(Sbx__SessionInfo *s, const char *id) {
        s->workspace_session = (char *) id;
        s->sandbox = (char *) "s";
        s->finalize_policy = (char *) "publish_then_destroy";
        s->state = (char *) "live";
        s->base_layer = 3;
        s->created_unix = 1764400000;
        s->running_commands = 1;
}

static void test_result_sessions(void **state) {
        Sbx__SessionInfo s1 = SBX__SESSION_INFO__INIT, s2 = SBX__SESSION_INFO__INIT;
        Sbx__SessionInfo *list[] = { &s1, &s2 };
        Sbx__SessionListReply l = SBX__SESSION_LIST_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *x;

        fill_session(&s1, "ws-1");
        fill_session(&s2, "ws-2");
        s2.automatic = true;
        s2.finalize_policy = (char *) "destroy";
        s2.state = (char *) "conflicted";
        reply.body_case = SBX__REPLY__BODY_SESSION;
        reply.session = &s1;
        r = ok_result("create_workspace_session", NULL, &reply);
        assert_string_equal(STR(SC(r), "workspace_session_id"), "ws-1");
        assert_string_equal(STR(SC(r), "sandbox_id"), "s");
        assert_string_equal(STR(SC(r), "finalize_policy"), "publish_then_destroy");
        assert_true(json_is_false(json_object_get(SC(r), "automatic")));
        assert_string_equal(STR(SC(r), "state"), "live");
        assert_int_equal(INT(SC(r), "base_layer"), 3);
        assert_int_equal(INT(SC(r), "created_unix"), 1764400000);
        assert_int_equal(INT(SC(r), "running_commands"), 1);
        json_decref(r);

        l.n_sessions = 2;
        l.sessions = list;
        reply.body_case = SBX__REPLY__BODY_SESSION_LIST;
        reply.session_list = &l;
        r = ok_result("list_workspace_sessions", NULL, &reply);
        x = json_array_get(json_object_get(SC(r), "sessions"), 1);
        assert_string_equal(STR(x, "workspace_session_id"), "ws-2");
        assert_true(json_is_true(json_object_get(x, "automatic")));
        assert_string_equal(STR(x, "state"), "conflicted");
        json_decref(r);

        l.n_sessions = 0;
        r = ok_result("list_workspace_sessions", NULL, &reply);
        assert_int_equal(json_array_size(json_object_get(SC(r), "sessions")), 0);
        json_decref(r);
}

static void test_result_finalize(void **state) {
        Sbx__SessionFinalizeReply f = SBX__SESSION_FINALIZE_REPLY__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__SessionInfo s = SBX__SESSION_INFO__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        char *conflicts[] = { (char *) "src/a.c", (char *) "README.md" };
        json_t *r, *pub;

        fill_session(&s, "ws-7");
        f.session = &s;
        f.action = (char *) "published";
        published(&p, 12, "workspace_session:ws-7", 4);
        f.publication = &p;
        reply.body_case = SBX__REPLY__BODY_SESSION_FINALIZE;
        reply.session_finalize = &f;
        r = ok_result("finalize_workspace_session", NULL, &reply);
        assert_string_equal(STR(SC(r), "workspace_session_id"), "ws-7");
        assert_string_equal(STR(SC(r), "action"), "published");
        assert_int_equal(INT(json_object_get(SC(r), "publication"), "layer"), 12);
        json_decref(r);

        /* A conflict is a normal result that lists the paths. */
        p.published = false;
        p.layer = 0;
        p.error = (char *) "2 paths changed since the session started";
        p.n_conflicts = 2;
        p.conflicts = conflicts;
        f.action = (char *) "conflict";
        r = ok_result("finalize_workspace_session", NULL, &reply);
        assert_string_equal(STR(SC(r), "action"), "conflict");
        pub = json_object_get(SC(r), "publication");
        assert_true(json_is_false(json_object_get(pub, "published")));
        assert_int_equal(json_array_size(json_object_get(pub, "conflicts")), 2);
        assert_string_equal(json_string_value(json_array_get(json_object_get(pub, "conflicts"), 0)), "src/a.c");
        json_decref(r);

        /* Discarded, without session info: the id comes from the arguments. */
        f.session = NULL;
        f.publication = NULL;
        f.action = (char *) "discarded";
        r = ok_result("finalize_workspace_session", "{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-8\"}", &reply);
        assert_string_equal(STR(SC(r), "workspace_session_id"), "ws-8");
        assert_true(json_is_null(json_object_get(SC(r), "publication")));
        json_decref(r);
}

static void test_result_exec_conflicts(void **state) {
        Sbx__CommandOutput c = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        char *conflicts[] = { (char *) "x.txt" };
        json_t *r, *pub;

        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &c;
        c.command_session = (char *) "cmd-1";
        c.workspace_session = (char *) "ws-1";
        c.status = (char *) "ok";
        c.has_exit_code = true;
        c.end_reason = (char *) "exit";
        p.error = (char *) "conflict";
        p.n_conflicts = 1;
        p.conflicts = conflicts;
        c.publication = &p;
        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &c;
        r = ok_result("exec_command", NULL, &reply);
        pub = json_object_get(SC(r), "publication");
        assert_string_equal(json_string_value(json_array_get(json_object_get(pub, "conflicts"), 0)), "x.txt");
        json_decref(r);

        /* cancel_command renders the same shape. */
        c.publication = NULL;
        c.status = (char *) "running";
        c.has_exit_code = false;
        c.end_reason = NULL;
        r = ok_result("cancel_command", NULL, &reply);
        assert_string_equal(STR(SC(r), "status"), "running");
        assert_true(json_is_null(json_object_get(SC(r), "publication")));
        json_decref(r);
}

static void test_result_diff(void **state) {
        Sbx__ChangedPath a = SBX__CHANGED_PATH__INIT, d = SBX__CHANGED_PATH__INIT;
        Sbx__ChangedPath *changes[] = { &a, &d };
        Sbx__SessionDiffReply f = SBX__SESSION_DIFF_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *x;

        a.path = (char *) "new.txt";
        a.change = (char *) "added";
        d.path = (char *) "old.txt";
        d.change = (char *) "deleted";
        f.n_changes = 2;
        f.changes = changes;
        f.diff.data = (uint8_t *) "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n";
        f.diff.len = strlen((char *) f.diff.data);
        reply.body_case = SBX__REPLY__BODY_SESSION_DIFF;
        reply.session_diff = &f;
        r = ok_result("diff_workspace_session", "{\"sandbox_id\":\"s\",\"workspace_session_id\":\"ws-4\"}", &reply);
        assert_string_equal(STR(SC(r), "workspace_session_id"), "ws-4");
        x = json_array_get(json_object_get(SC(r), "changes"), 1);
        assert_string_equal(STR(x, "path"), "old.txt");
        assert_string_equal(STR(x, "change"), "deleted");
        assert_string_equal(STR(SC(r), "diff"), (char *) f.diff.data);
        assert_true(json_is_false(json_object_get(SC(r), "truncated")));
        json_decref(r);

        d.change = (char *) "renamed";
        r = result_for("diff_workspace_session", &reply, CONTENT_JSON);
        assert_true(json_is_true(json_object_get(r, "isError")));
        json_decref(r);
}

static void test_result_command_list(void **state) {
        Sbx__CommandInfo a = SBX__COMMAND_INFO__INIT, b = SBX__COMMAND_INFO__INIT;
        Sbx__CommandInfo *cmds[] = { &a, &b };
        Sbx__CommandListReply l = SBX__COMMAND_LIST_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        json_t *r, *x;

        a.command_session = (char *) "cmd-a";
        a.workspace_session = (char *) "ws-1";
        a.status = (char *) "running";
        a.started_unix_usec = 1764400000500000;
        a.cmd = (char *) "sleep 100";
        b.command_session = (char *) "cmd-b";
        b.workspace_session = (char *) "ws-1";
        b.status = (char *) "cancelled";
        b.signal = 9;
        b.end_reason = (char *) "cancelled";
        b.started_unix_usec = 1764400000000000;
        b.ended_unix_usec = 1764400002250000;
        b.cmd = (char *) "make";
        l.n_commands = 2;
        l.commands = cmds;
        reply.body_case = SBX__REPLY__BODY_COMMAND_LIST;
        reply.command_list = &l;
        r = ok_result("list_command_sessions", NULL, &reply);
        x = json_array_get(json_object_get(SC(r), "commands"), 0);
        assert_string_equal(STR(x, "command_session_id"), "cmd-a");
        assert_true(json_is_null(json_object_get(x, "exit_code")));
        assert_true(json_is_null(json_object_get(x, "signal")));
        assert_true(json_is_null(json_object_get(x, "end_reason")));
        assert_true(json_is_null(json_object_get(x, "ended_unix")));
        assert_true(json_real_value(json_object_get(x, "started_unix")) == 1764400000.5);
        assert_string_equal(STR(x, "cmd"), "sleep 100");
        x = json_array_get(json_object_get(SC(r), "commands"), 1);
        assert_int_equal(INT(x, "signal"), 9);
        assert_string_equal(STR(x, "end_reason"), "cancelled");
        assert_true(json_real_value(json_object_get(x, "ended_unix")) == 1764400002.25);
        json_decref(r);
}

static void test_utf8_sanitize(void **state) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "plain", "plain" },
                { "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" },
                { "\x80", "\xef\xbf\xbd" },
                { "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },                     /* overlong */
                { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },     /* surrogate */
                { "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
                { "a\xe2\x82", "a\xef\xbf\xbd\xef\xbf\xbd" },                   /* truncated */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *out = NULL;
                size_t len;

                assert_int_equal(utf8_sanitize(cases[i].in, strlen(cases[i].in), &out, &len), 0);
                assert_string_equal(out, cases[i].out);
                assert_int_equal(len, strlen(cases[i].out));
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_type_string),
                cmocka_unit_test(test_type_integer),
                cmocka_unit_test(test_type_number_boolean_null),
                cmocka_unit_test(test_type_list),
                cmocka_unit_test(test_type_object_and_array),
                cmocka_unit_test(test_root_must_be_object),
                cmocka_unit_test(test_required),
                cmocka_unit_test(test_additional_properties),
                cmocka_unit_test(test_nested_paths),
                cmocka_unit_test(test_minimum_maximum),
                cmocka_unit_test(test_enum),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_many_errors),
                cmocka_unit_test(test_long_key_shortened),
                cmocka_unit_test(test_tools_list),
                cmocka_unit_test(test_annotations),
                cmocka_unit_test(test_schema_keywords),
                cmocka_unit_test(test_unknown_tool),
                cmocka_unit_test(test_tool_sets),
                cmocka_unit_test(test_seed_examples),
                cmocka_unit_test(test_exec_request),
                cmocka_unit_test(test_exec_rejects),
                cmocka_unit_test(test_stdin_request),
                cmocka_unit_test(test_stdin_rejects),
                cmocka_unit_test(test_read_lines_request),
                cmocka_unit_test(test_read_lines_rejects),
                cmocka_unit_test(test_result_running),
                cmocka_unit_test(test_text_command),
                cmocka_unit_test(test_text_files),
                cmocka_unit_test(test_text_generic),
                cmocka_unit_test(test_result_terminal),
                cmocka_unit_test(test_result_errors),
                cmocka_unit_test(test_sealed_memfd),
                cmocka_unit_test(test_file_read_request),
                cmocka_unit_test(test_file_path_rejects),
                cmocka_unit_test(test_file_read_rejects),
                cmocka_unit_test(test_file_write_request),
                cmocka_unit_test(test_file_write_too_big),
                cmocka_unit_test(test_file_edit_request),
                cmocka_unit_test(test_file_edit_rejects),
                cmocka_unit_test(test_file_edit_too_big),
                cmocka_unit_test(test_file_blame_request),
                cmocka_unit_test(test_file_annotations),
                cmocka_unit_test(test_sessions_set_alone),
                cmocka_unit_test(test_sessions_requests),
                cmocka_unit_test(test_sessions_rejects),
                cmocka_unit_test(test_result_file_read),
                cmocka_unit_test(test_result_file_change),
                cmocka_unit_test(test_result_file_blame),
                cmocka_unit_test(test_result_sessions),
                cmocka_unit_test(test_result_finalize),
                cmocka_unit_test(test_result_exec_conflicts),
                cmocka_unit_test(test_result_diff),
                cmocka_unit_test(test_result_command_list),
                cmocka_unit_test(test_utf8_sanitize),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
