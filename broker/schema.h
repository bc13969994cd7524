/* A small JSON Schema validator for the schemas sandbox-mcp publishes.
 *
 * Keywords: type (a name or a list of names: object, array, string, integer,
 * number, boolean, null), properties, required, additionalProperties (false,
 * true or a schema), items (one schema), enum, minimum, maximum, default.
 * Annotations (title, description, ...) and unknown keywords are ignored.
 *
 * Integers are JSON numbers with an integral value that fits in int64; an
 * integral real such as 5.0 is accepted and replaced by the integer 5 in the
 * instance. Absent optional properties whose schema has a default get a copy
 * of it. Non-logging. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* Validate instance (modified: defaults, integral reals) against schema.
 * Returns 0; -EINVAL with *ret_error set to "<argument>: <why>" (several
 * joined by "; ", the argument named by its path such as "edits[0].old_string"
 * or "arguments" for the root); -ENOMEM. */
int schema_validate(const json_t *schema, json_t *instance, char **ret_error);

/* The keywords this validator understands, for checking published schemas. */
bool schema_keyword_known(const char *keyword);
