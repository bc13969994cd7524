/* libFuzzer target over what sandbox-mcp accepts from its MCP client: the
 * JSON-RPC line parser (broker/jsonrpc.c), the bounded line reader, and for
 * tools/call requests the argument validation and request building of every
 * tool (broker/schema.c, broker/tools.c), memfds and packing included. Input
 * starting with the byte 0xff is instead taken as a packed sbx.Reply and
 * rendered for every tool, as a reply from sbxd would be, and its JSON text
 * must be what jansson's json_dumps writes (broker/jsonwrite.c).
 *
 * Build (not part of make):
 *   make build/lib/libsbx.a
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *         -iquote common -iquote proto -Ibuild/gen \
 *         tests/fuzz/fuzz-jsonrpc.c broker/jsonrpc.c broker/jsonwrite.c broker/schema.c broker/tools.c \
 *         proto/wire.c build/gen/sbx.pb-c.c -ljansson -lprotobuf-c -o build/fuzz-jsonrpc
 *   build/fuzz-jsonrpc -max_len=65536 tests/fuzz/corpus/jsonrpc
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/jsonrpc.h"
#include "../../broker/tools.h"
#include "macro.h"
#include "sbx-limits.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static Tools *tools;

static int count_line(const char *line, size_t len, bool oversize, void *userdata) {
        (*(size_t *) userdata)++;
        return 0;
}

static void fuzz_reply(const uint8_t *data, size_t size) {
        Sbx__Reply *reply = sbx__reply__unpack(NULL, size, data);
        json_t *args = json_pack("{s:s, s:s}", "sandbox_id", "s", "workspace_session_id", "w");

        if (reply && args) {
                const json_t *list = json_object_get(tools_list_result(tools), "tools");
                size_t i;
                json_t *t;

                json_array_foreach(list, i, t) {
                        const char *name = json_string_value(json_object_get(t, "name"));
                        const Tool *tool = tools_find(tools, name, strlen(name));
                        json_t *result = NULL;

                        if (tool_result_from_reply(tool, args, reply, -EBADF, true, NULL, &result) == 0) {
                                char *line = NULL;
                                size_t len;

                                char *dumped = json_dumps(result, JSON_COMPACT | JSON_REAL_PRECISION(16));

                                /* Whatever it is, it serializes, as jansson would write it. */
                                if (jsonrpc_serialize(result, JSONRPC_OUT_MAX, &line, &len) < 0 || !dumped ||
                                    len != strlen(dumped) + 1 || memcmp(line, dumped, len - 1) != 0)
                                        abort();
                                free(dumped);
                                free(line);
                                json_decref(result);
                        }
                }
        }
        json_decref(args);
        if (reply)
                sbx__reply__free_unpacked(reply, NULL);
}

static void fuzz_call(const JsonRpcMessage *m) {
        json_t *name, *args;
        const Tool *tool;
        ToolRequest req;
        char *error = NULL;
        int r;

        if (!json_is_object(m->params))
                return;
        name = json_object_get(m->params, "name");
        if (!json_is_string(name))
                return;
        tool = tools_find(tools, json_string_value(name), json_string_length(name));
        if (!tool)
                return;
        args = json_object_get(m->params, "arguments");
        args = args ? json_deep_copy(args) : json_object();
        if (!args)
                return;

        r = tool_prepare(tool, args, &req, &error);
        if (r == 0) {
                static uint8_t buf[SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX];
                ssize_t n = wire_pack(&req.msg, 1, req.fd >= 0 ? 1 : 0, buf, sizeof(buf));

                /* A valid call packs, unless it is too large for a frame. */
                if (n < 0 && n != -EMSGSIZE)
                        abort();
                if (n > 0) {
                        Sbx__Msg *back = NULL;
                        uint32_t seq;

                        if (wire_parse(buf, (size_t) n, req.fd >= 0 ? 1 : 0, &back, &seq) < 0)
                                abort();
                        sbx__msg__free_unpacked(back, NULL);
                }
                tool_request_done(&req);
        } else {
                if (req.fd >= 0)
                        abort();        /* no fd leaks on failure */
                if (r == -EINVAL && (!error || strncmp(error, "invalid arguments: ", 19) != 0))
                        abort();
        }
        free(error);
        json_decref(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        JsonRpcMessage *m = NULL;
        LineReader lr;
        size_t lines = 0;

        if (!tools && tools_new(TOOL_SET_RUNTIME | TOOL_SET_SESSIONS, &tools) < 0)
                abort();

        if (size > 0 && data[0] == 0xff) {
                fuzz_reply(data + 1, size - 1);
                return 0;
        }

        /* The line reader, in uneven chunks, with a small limit. */
        line_reader_init(&lr, 256);
        for (size_t off = 0; off < size;) {
                size_t n = MIN(size - off, (size_t) 1 + (data[off] % 97));
                if (line_reader_feed(&lr, (const char *) data + off, n, count_line, &lines) < 0)
                        break;
                off += n;
        }
        (void) line_reader_finish(&lr, count_line, &lines);
        line_reader_done(&lr);

        /* The parser on the whole input as one line. */
        if (jsonrpc_parse((const char *) data, size, &m) < 0)
                return 0;
        if (m->kind == JSONRPC_INVALID) {
                json_t *e = jsonrpc_error(m->id, m->error_code, m->error_message);
                char *line = NULL;
                size_t len;

                if (e && jsonrpc_serialize(e, JSONRPC_OUT_MAX, &line, &len) == -EINVAL)
                        abort();
                free(line);
                json_decref(e);
        } else if (m->kind == JSONRPC_REQUEST && strcmp(m->method, "tools/call") == 0)
                fuzz_call(m);
        jsonrpc_message_free(m);
        return 0;
}
