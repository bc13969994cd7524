#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "boxes-files.h"
#include "boxsync.h"
#include "fd-util.h"
#include "sbx-limits.h"

_Static_assert(SBX_BOX_FILE_TTL_S == 3600, "sandbox_get's description says one hour");

#define S_STR(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define S_INT(n, d) "\"" n "\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"" d "\"}"
#define S_OBJ(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "]}"
#define S_IN(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "], \"additionalProperties\": false}"
#define S_ID S_STR("id", "The box, as sandbox_start returned it.")
#define S_PLACED                                                                                                  \
        S_STR("url", "file:// URL of the file on this host, readable by you only; through sbx-gateway, its URL "   \
              "of the file (GET it with your bearer token). Valid one hour.") ", "                                 \
        S_STR("path", "The file as a path on the sbx host.") ", " S_INT("bytes", "Its size.") ", "               \
        S_STR("expiresAt", "When it is removed (ISO 8601, UTC).")

const char box_sync_input[] = S_IN(
        S_ID ", "
        S_STR("localPath", "Directory (or file) on your side, relative to the agent's working directory (or absolute). "
              "node_modules, .git, dist, build, .next, .nuxt, .svelte-kit, .turbo, .parcel-cache, .cache, __pycache__, "
              ".venv, venv, .tox, .mypy_cache, .pytest_cache, coverage and .DS_Store are left out at every depth; "
              "symlinks are copied as symlinks, never followed.") ", "
        "\"dest\": {\"type\": \"string\", \"description\": \"Where it is unpacked, relative to /work.\", \"default\": \"\"}",
        "\"id\", \"localPath\"");
const char box_sync_output[] = S_OBJ(
        "\"ok\": {\"type\": \"boolean\", \"enum\": [true]}, " S_STR("dest", "Where it was unpacked in the box.") ", "
        S_INT("bytes", "Bytes of the tar sent.") ", " S_INT("entries", "Files, directories and symlinks sent.") ", "
        S_INT("excluded", "Entries left out by name.") ", " S_INT("special", "Fifos, sockets and devices left out."),
        "\"ok\"");
const char box_get_input[] = S_IN(S_ID ", " S_STR("path", "File or directory under /work (relative to it, or absolute)."),
                                  "\"id\", \"path\"");
const char box_get_output[] = S_OBJ(
        S_PLACED ", " "\"kind\": {\"type\": \"string\", \"enum\": [\"file\", \"tar.gz\"]}, "
        S_STR("boxPath", "What it is in the box."),
        "\"url\", \"path\", \"bytes\", \"expiresAt\", \"kind\"");
const char box_shot_input[] = S_IN(
        S_ID ", "
        "\"target\": {\"type\": \"string\", \"enum\": [\"screen\", \"url\"], \"default\": \"screen\", \"description\": "
        "\"screen: the box's display :99; url: the url opened in a fresh headless Chromium in the box.\"}, "
        S_STR("url", "For target url: http://, https:// or file:// (inside the box).") ", "
        "\"record\": {\"type\": \"string\", \"enum\": [\"start\", \"stop\"], \"description\": "
        "\"start: record display :99 to mp4 (ffmpeg); stop: end it and return the mp4. Without it: a PNG.\"}",
        "\"id\"");
const char box_shot_output[] = S_OBJ(
        S_PLACED ", " "\"kind\": {\"type\": \"string\", \"enum\": [\"png\", \"mp4\", \"recording\"]}, "
        "\"recording\": {\"type\": \"boolean\", \"description\": \"record start: a recording runs.\"}",
        "\"kind\"");

const char box_annotations_sync[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";
const char box_annotations_get[] =
        "{\"readOnlyHint\": true, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": false}";
const char box_annotations_shot[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": true}";

const char box_wire_input[] = S_IN(
        S_ID ", " S_STR("service", "A service named in sandbox_start's services.") ", "
        "\"mode\": {\"type\": \"string\", \"enum\": [\"box\", \"external\"], \"description\": "
        "\"box: the name resolves inside the box to the box itself (127.0.0.1, on the service's port); external: to "
        "externalBaseUrl.\"}",
        "\"id\", \"service\", \"mode\"");
const char box_wire_output[] = S_OBJ(BOX_WIRING_SCHEMA, "\"wiring\"");
const char box_annotations_wire[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": true, \"openWorldHint\": false}";

static const char *arg_or(const json_t *args, const char *key, const char *dflt) {
        const char *v = tool_arg_str(args, key);
        return v[0] ? v : dflt;
}

int box_prepare_sync(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxSync *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_SYNC, &sbx__box_sync__descriptor);
        const char *id, *local, *dest;
        char err[600] = "";
        BoxSyncTar tar;
        int r;

        r = tool_arg_id(args, "id", &id, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "localPath", 1, SBX_PATH_MAX, &local, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "dest", 0, SBX_PATH_MAX, &dest, NULL, ret_error);
        if (r < 0)
                return r;
        r = box_sync_tar(AT_FDCWD, local, &tar, err, sizeof(err));
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_arg_invalid(ret_error, "%s", err[0] ? err : strerror(-r));
        m->box = (char *) id;
        m->dest = (char *) (dest ?: "");
        m->tar_size = tar.size;
        m->entries = tar.entries;
        m->excluded = tar.excluded;
        m->special = tar.special;
        req->fd = tar.fd;
        return 0;
}

static const Sbx__BoxFileReply *file_reply(const Sbx__Reply *reply) {
        return reply->body_case == SBX__REPLY__BODY_BOX_FILE ? reply->box_file : NULL;
}

int box_render_sync(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__BoxFileReply *o = file_reply(reply);

        if (!o)
                return -EBADMSG;
        *ret = json_pack("{s:b, s:s, s:I, s:I, s:I, s:I}", "ok", 1, "dest", o->box_path, "bytes", (json_int_t) o->bytes,
                         "entries", (json_int_t) o->entries, "excluded", (json_int_t) o->excluded, "special",
                         (json_int_t) o->special);
        return *ret ? 0 : -ENOMEM;
}

int box_prepare_get(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxGet *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_GET, &sbx__box_get__descriptor);
        const char *id, *path;
        int r = tool_arg_id(args, "id", &id, ret_error);

        if (r >= 0)
                r = tool_arg_path(args, &path, ret_error);
        if (r < 0)
                return r;
        m->box = (char *) id;
        m->path = (char *) path;
        return 0;
}

int box_prepare_shot(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxShot *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_SHOT, &sbx__box_shot__descriptor);
        const char *id, *url;
        int r = tool_arg_id(args, "id", &id, ret_error);

        if (r >= 0)
                r = tool_arg_string(args, "url", 0, SBX_PATH_MAX, &url, NULL, ret_error);
        if (r < 0)
                return r;
        m->box = (char *) id;
        m->target = (char *) arg_or(args, "target", "screen");
        m->url = (char *) (url ?: "");
        m->record = (char *) tool_arg_str(args, "record");
        if (strcmp(m->target, "url") == 0 && !m->record[0] && !url)
                return tool_arg_invalid(ret_error, "url: target url needs the url to open");
        return 0;
}

int box_render_placed(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__BoxFileReply *o = file_reply(reply);
        _cleanup_json_ json_t *sc = NULL;
        time_t t;
        struct tm tm;
        char when[32];

        if (!o)
                return -EBADMSG;
        if (!o->path[0])        /* record start: nothing placed yet */
                sc = json_pack("{s:s, s:b}", "kind", o->kind, "recording", o->recording);
        else {
                t = (time_t) o->expires_unix;
                if (!gmtime_r(&t, &tm) || strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                        return -EBADMSG;
                sc = json_pack("{s:s, s:s, s:I, s:s, s:s}", "url", o->url, "path", o->path, "bytes",
                               (json_int_t) o->bytes, "expiresAt", when, "kind", o->kind);
                if (sc && o->box_path[0] && json_object_set_new(sc, "boxPath", json_string(o->box_path)) < 0)
                        return -ENOMEM;
        }
        if (!sc)
                return -ENOMEM;
        *ret = TAKE_PTR(sc);
        return 0;
}

int box_shot_content(const json_t *sc, int fd, json_t *content) {
        _cleanup_free_ char *b64 = NULL;
        struct stat st;
        uint8_t *map;
        size_t n;

        if (strcmp(tool_sc_str(sc, "kind"), "png") != 0 || fd < 0 || fstat(fd, &st) < 0)
                return 0;       /* the file's fields say where it is */
        if (!S_ISREG(st.st_mode) || st.st_size == 0 || (uint64_t) st.st_size > SBX_BOX_SHOT_IMAGE_MAX)
                return 0;
        map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
                return 0;
        n = 4 * (((size_t) st.st_size + 2) / 3);
        b64 = malloc(n);
        if (b64)
                (void) base64_encode(map, (size_t) st.st_size, b64);
        munmap(map, (size_t) st.st_size);
        if (!b64)
                return -ENOMEM;
        return json_array_append_new(content, json_pack("{s:s, s:s%, s:s}", "type", "image", "data", b64, n,
                                                        "mimeType", "image/png")) < 0 ? -ENOMEM : 0;
}

int box_prepare_wire(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxWire *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_WIRE, &sbx__box_wire__descriptor);
        const char *id, *service;
        int r = tool_arg_id(args, "id", &id, ret_error);

        if (r >= 0)
                r = tool_arg_id(args, "service", &service, ret_error);
        if (r < 0)
                return r;
        m->box = (char *) id;
        m->service = (char *) service;
        m->mode = (char *) tool_arg_str(args, "mode");
        return 0;
}

json_t *box_wiring_json(Sbx__BoxWiring *const *rows, size_t n) {
        _cleanup_json_ json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++) {
                const Sbx__BoxWiring *w = rows[i];

                if (json_array_append_new(a, json_pack("{s:s, s:I, s:o, s:o}", "service", w->service, "port",
                                                       (json_int_t) w->port, "mode",
                                                       w->mode[0] ? json_string(w->mode) : json_null(), "target",
                                                       w->target[0] ? json_string(w->target) : json_null())) < 0)
                        return NULL;
        }
        return TAKE_PTR(a);
}

int box_render_wire(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__BoxWireReply *o = reply->body_case == SBX__REPLY__BODY_BOX_WIRE ? reply->box_wire : NULL;
        json_t *rows;

        if (!o)
                return -EBADMSG;
        rows = box_wiring_json(o->wiring, o->n_wiring);
        *ret = rows ? json_pack("{s:o}", "wiring", rows) : NULL;
        return *ret ? 0 : -ENOMEM;
}
