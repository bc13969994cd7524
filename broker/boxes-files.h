/* The boxes set's sandbox_sync, sandbox_get and sandbox_shot (issue 21 part
 * D, docs/boxes.md): their schemas and how their calls become requests and
 * their replies results. Rows of set-boxes.c name them. Non-logging. */
#pragma once

#include "tool-set.h"

extern const char box_sync_input[];
extern const char box_sync_output[];
extern const char box_get_input[];
extern const char box_get_output[];
extern const char box_shot_input[];
extern const char box_shot_output[];
extern const char box_annotations_sync[];
extern const char box_annotations_get[];
extern const char box_annotations_shot[];
/* The "wiring" property of sandbox_wire's and sandbox_status's results. */
#define BOX_WIRING_SCHEMA                                                                                        \
        "\"wiring\": {\"type\": \"array\", \"description\": \"Every service of the box (sandbox_wire).\", "          \
        "\"items\": {\"type\": \"object\", \"properties\": {\"service\": {\"type\": \"string\"}, "                 \
        "\"port\": {\"type\": \"integer\", \"minimum\": 0}, "                                                        \
        "\"mode\": {\"type\": [\"string\", \"null\"], \"enum\": [\"box\", \"external\", null]}, "                     \
        "\"target\": {\"type\": [\"string\", \"null\"], \"description\": \"host:port the name reaches; null: not "  \
        "wired.\"}}, \"required\": [\"service\", \"port\", \"mode\", \"target\"]}}"
extern const char box_wire_input[];
extern const char box_wire_output[];
extern const char box_annotations_wire[];

int box_prepare_sync(json_t *args, ToolRequest *req, char **ret_error);
int box_render_sync(const Sbx__Reply *reply, const json_t *args, json_t **ret);
int box_prepare_get(json_t *args, ToolRequest *req, char **ret_error);
int box_prepare_shot(json_t *args, ToolRequest *req, char **ret_error);
/* sandbox_get's and sandbox_shot's result: the placed file. */
int box_render_placed(const Sbx__Reply *reply, const json_t *args, json_t **ret);
int box_prepare_wire(json_t *args, ToolRequest *req, char **ret_error);
int box_render_wire(const Sbx__Reply *reply, const json_t *args, json_t **ret);
/* The wiring rows as the results show them (a new array), or NULL. */
json_t *box_wiring_json(Sbx__BoxWiring *const *rows, size_t n);
/* sandbox_shot's PNG as MCP image content, read from fd: the placed file, which
 * sbxd sends open with the reply (sbx-gateway cannot open the caller's files). */
int box_shot_content(const json_t *sc, int fd, json_t *content);
