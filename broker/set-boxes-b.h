/* The boxes set's secrets and versions tools (issue 21 part B): their
 * schemas, requests and results, for rows of boxes_tools[] (set-boxes.c). */
#pragma once

#include "tool-set.h"

extern const char boxes_secrets_input[], boxes_secrets_output[];
extern const char boxes_publish_input[], boxes_publish_output[];
extern const char boxes_versions_output[];

/* sandbox_start's version property, for its schema (a literal: schemas are built by concatenation). */
#define BOXES_VERSION_INPUT_PROPERTY                                                                            \
        "\"version\": {\"type\": \"string\", \"description\": \"A versionId from sandbox_versions: the box's "   \
        "/work starts as that version's copy (startedFrom: snapshot); boxes started from one version diverge.\"}"

int boxes_prepare_secrets(json_t *args, ToolRequest *req, char **ret_error);
int boxes_render_secrets(const Sbx__Reply *reply, const json_t *args, json_t **ret);
int boxes_prepare_publish(json_t *args, ToolRequest *req, char **ret_error);
int boxes_render_publish(const Sbx__Reply *reply, const json_t *args, json_t **ret);
int boxes_prepare_versions(json_t *args, ToolRequest *req, char **ret_error);
int boxes_render_versions(const Sbx__Reply *reply, const json_t *args, json_t **ret);
/* sandbox_start's version argument into m (NULL: none). */
int boxes_prepare_start_version(json_t *args, Sbx__BoxStart *m, char **ret_error);
