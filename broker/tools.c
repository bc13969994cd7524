#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"
#include "jsonwrite.h"
#include "schema.h"
#include "tool-set.h"
#include "utf8.h"

/* The sets, in tools/list order (tools.h: TOOL_SETS). */
static const ToolSetDef *const tool_sets[] = {
#define TOOL_SET_ENTRY_(name, NAME) [TOOL_SET_INDEX_##NAME] = &tool_set_##name,
        TOOL_SETS(TOOL_SET_ENTRY_)
#undef TOOL_SET_ENTRY_
};

/* ---- registry -------------------------------------------------------------- */

int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad) {
        unsigned sets = 0;
        const char *p = list;

        for (;;) {
                size_t n = strcspn(p, ",");
                bool found = false;

                for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                        if (n == strlen(tool_sets[i]->name) && strncmp(p, tool_sets[i]->name, n) == 0) {
                                sets |= 1u << i;
                                found = true;
                        }
                if (!found) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                if (p[n] == '\0')
                        break;
                p += n + 1;
        }
        *ret_sets = sets;
        return 0;
}

int tool_sets_conflict(unsigned sets, const char **ret_tool, const char **ret_a, const char **ret_b) {
        for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                for (size_t j = i + 1; (sets & (1u << i)) && j < ELEMENTSOF(tool_sets); j++) {
                        if (!(sets & (1u << j)))
                                continue;
                        for (size_t a = 0; a < tool_sets[i]->n_tools; a++)
                                for (size_t b = 0; b < tool_sets[j]->n_tools; b++)
                                        if (strcmp(tool_sets[i]->tools[a].name, tool_sets[j]->tools[b].name) == 0) {
                                                *ret_tool = tool_sets[i]->tools[a].name;
                                                *ret_a = tool_sets[i]->name;
                                                *ret_b = tool_sets[j]->name;
                                                return -ENOTUNIQ;
                                        }
                }
        return 0;
}

unsigned tool_sets_all(void) {
        unsigned sets = 0;
        const char *tool, *a, *b;

        for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                if (tool_sets_conflict(sets | 1u << i, &tool, &a, &b) == 0)
                        sets |= 1u << i;
        return sets;
}

Tools *tools_free(Tools *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n; i++) {
                json_decref(t->tools[i].input_schema);
                json_decref(t->tools[i].output_schema);
        }
        free(t->tools);
        json_decref(t->list);
        free(t);
        return NULL;
}

static json_t *load_schema(const char *text) {
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);

        /* Published schemas have an object root (MCP requires type "object"). */
        if (j && (!json_is_object(j) || !json_is_string(json_object_get(j, "type")) ||
                  strcmp(json_string_value(json_object_get(j, "type")), "object") != 0)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* Load d's schemas and append its tools/list entry to array. */
static int tool_add(Tools *t, const ToolDef *d, json_t *array) {
        Tool *tool = &t->tools[t->n++];
        json_t *entry, *annotations;

        tool->def = d;
        tool->input_schema = load_schema(d->input_schema);
        tool->output_schema = load_schema(d->output_schema);
        annotations = json_loads(d->annotations, 0, NULL);
        if (!tool->input_schema || !tool->output_schema || !annotations) {
                json_decref(annotations);
                return -EINVAL;
        }
        entry = json_pack("{s:s, s:s, s:s, s:O, s:O, s:o}",
                          "name", d->name, "title", d->title, "description", d->description,
                          "inputSchema", tool->input_schema, "outputSchema", tool->output_schema,
                          "annotations", annotations);
        if (!entry || json_array_append_new(array, entry) < 0)
                return -ENOMEM;
        return 0;
}

int tools_new(unsigned sets, Tools **ret_tools) {
        _cleanup_(tools_freep) Tools *t = NULL;
        size_t n_max = 0;
        json_t *array;
        int r;

        const char *tool, *a, *b;

        /* A tool name is one tool (--set refuses such a combination, sandbox-mcp(1)). */
        if (tool_sets_conflict(sets, &tool, &a, &b) < 0)
                return -ENOTUNIQ;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->sets = sets;
        for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                n_max += tool_sets[i]->n_tools;
        t->tools = calloc(n_max, sizeof(Tool));
        t->list = json_pack("{s:[]}", "tools");
        if (!t->tools || !t->list)
                return -ENOMEM;
        array = json_object_get(t->list, "tools");

        for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++) {
                if (!(sets & (1u << i)))
                        continue;
                for (size_t k = 0; k < tool_sets[i]->n_tools; k++) {
                        r = tool_add(t, &tool_sets[i]->tools[k], array);
                        if (r < 0)
                                return r;
                }
        }
        *ret_tools = TAKE_PTR(t);
        return 0;
}

unsigned tools_sets(const Tools *t) {
        return t->sets;
}

const json_t *tools_list_result(const Tools *t) {
        return t->list;
}

const Tool *tools_find(const Tools *t, const char *name, size_t len) {
        for (size_t i = 0; i < t->n; i++)
                if (strlen(t->tools[i].def->name) == len && memcmp(t->tools[i].def->name, name, len) == 0)
                        return &t->tools[i];
        return NULL;
}

const char *tool_name(const Tool *tool) {
        return tool->def->name;
}

size_t tool_result_max(const Tool *tool) {
        return tool->def->result_max ?: JSONRPC_OUT_MAX;
}

int tool_prepare(const Tool *tool, json_t *arguments, ToolRequest *ret_req, char **ret_error) {
        _cleanup_free_ char *why = NULL;
        int r;

        ret_req->fd = -EBADF;
        ret_req->n_more_fds = 0;
        ret_req->heap = NULL;
        r = schema_validate(tool->input_schema, arguments, &why);
        if (r == -EINVAL)
                return tool_arg_invalid(ret_error, "%s", why);
        if (r < 0)
                return r;
        r = tool->def->prepare(arguments, ret_req, ret_error);
        if (r < 0)
                tool_request_done(ret_req);
        return r;
}

/* ---- results ----------------------------------------------------------------- */

json_t *tool_error_result(const char *text) {
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1);
}

/* The content array for mode: the rendered text, the JSON, or nothing. */
static int result_content(const Tool *tool, const json_t *args, const Sbx__Reply *reply, ContentMode mode,
                          const json_t *sc, json_t **ret_content) {
        _cleanup_json_ json_t *content = json_array();
        _cleanup_free_ char *text = NULL;
        json_t *block;
        size_t len = 0;
        int r;

        if (!content)
                return -ENOMEM;
        if (mode == CONTENT_JSON) {
                r = json_write(sc, tool_result_max(tool), &text, &len);
                if (r < 0)
                        return r;
                /* Written from valid UTF-8 strings: no second check of a large reply. */
                block = json_stringn_nocheck(text, len);
        } else if (mode == CONTENT_TEXT) {
                FILE *f = open_memstream(&text, &len);

                if (!f)
                        return -ENOMEM;
                (tool->def->text ?: tool_text_generic)(f, reply, args, sc);
                if (fclose(f) != 0 || !text)
                        return -ENOMEM;
                block = msg_json_string(text, len, TOOL_TEXT);
        } else {
                *ret_content = TAKE_PTR(content);
                return 0;
        }
        if (!block || json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text", block)) < 0)
                return -ENOMEM;
        *ret_content = TAKE_PTR(content);
        return 0;
}

static int error_result(const char *text, json_t **ret_result) {
        *ret_result = tool_error_result(text);
        return *ret_result ? 0 : -ENOMEM;
}

int tool_result_from_reply(const Tool *tool, const json_t *args, const Sbx__Reply *reply, int fd, ContentMode mode,
                           JsonSplice *splice, json_t **ret_result) {
        _cleanup_json_ json_t *sc = NULL, *content = NULL;
        _cleanup_free_ char *why = NULL;
        int r;

        if (reply->err < 0) {
                _cleanup_free_ char *msg = NULL;
                size_t n;

                if (!reply->errmsg || !reply->errmsg[0])
                        return error_result(strerror(-reply->err), ret_result);
                r = utf8_sanitize(reply->errmsg, strlen(reply->errmsg), &msg, &n);
                if (r < 0)
                        return r;
                return error_result(msg, ret_result);
        }
        if (tool->def->render_fd)
                /* The JSON text block holds the content too: not from a splice. */
                r = fd >= 0 ? tool->def->render_fd(reply, args, fd, mode == CONTENT_JSON ? NULL : splice, &sc)
                            : -EBADMSG;
        else
                r = tool->def->render(reply, args, &sc);
        if (r == -EBADMSG)
                return error_result("sbxd sent an unexpected reply", ret_result);
        if (r == -EILSEQ)
                return error_result("invalid arguments: binary: the file is not UTF-8 text; call download_file "
                                    "again with binary true to get it as base64", ret_result);
        if (r < 0)
                return r;
        /* What we promise in outputSchema, clients check: never send a violation. */
        r = schema_validate(tool->output_schema, sc, &why);
        if (r == -EINVAL) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "sbxd sent an invalid reply: %s", why) < 0)
                        return -ENOMEM;
                return error_result(msg, ret_result);
        }
        if (r < 0)
                return r;

        r = result_content(tool, args, reply, mode, sc, &content);
        if (r >= 0 && tool->def->content)
                r = tool->def->content(sc, fd, content);
        if (r == -EMSGSIZE || r == -ELOOP)
                return error_result(r == -ELOOP ? "the reply nests too deep to send" : "the reply is too large to send",
                                    ret_result);
        if (r < 0)
                return r;
        *ret_result = json_pack("{s:O, s:O, s:b}", "content", content, "structuredContent", sc, "isError", 0);
        return *ret_result ? 0 : -ENOMEM;
}
