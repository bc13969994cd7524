#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "schema.h"

#define SCHEMA_MAX_ERRORS 8u
#define SCHEMA_PATH_MAX 160u     /* bytes of an argument path in a message */
#define SCHEMA_KEY_MAX 64u       /* bytes of one client-chosen key in a path */

typedef struct Errors {
        FILE *f;
        char *buf;
        size_t size;
        unsigned n;
} Errors;

static const char *const known_keywords[] = {
        "type", "properties", "required", "additionalProperties", "items",
        "enum", "minimum", "maximum", "default", "title", "description",
};

bool schema_keyword_known(const char *keyword) {
        for (size_t i = 0; i < ELEMENTSOF(known_keywords); i++)
                if (strcmp(keyword, known_keywords[i]) == 0)
                        return true;
        return false;
}

/* Shorten s to at most max bytes without splitting a UTF-8 sequence. */
static void utf8_cut(char *s, size_t max) {
        size_t len = strlen(s);

        if (len <= max)
                return;
        while (max > 0 && ((unsigned char) s[max] & 0xc0) == 0x80)
                max--;
        s[max] = '\0';
}

static void path_child_key(char *dst, const char *parent, const char *key) {
        char k[SCHEMA_KEY_MAX + sizeof("…")];
        bool cut;

        snprintf(k, SCHEMA_KEY_MAX + 1, "%s", key);
        cut = strlen(key) > SCHEMA_KEY_MAX;
        utf8_cut(k, SCHEMA_KEY_MAX);
        if (cut)
                strcat(k, "…");
        snprintf(dst, SCHEMA_PATH_MAX + 1, "%s%s%s", parent, parent[0] ? "." : "", k);
        utf8_cut(dst, SCHEMA_PATH_MAX);
}

static void path_child_index(char *dst, const char *parent, size_t i) {
        snprintf(dst, SCHEMA_PATH_MAX + 1, "%s[%zu]", parent[0] ? parent : "arguments", i);
        utf8_cut(dst, SCHEMA_PATH_MAX);
}

_printf_(3, 4)
static void error_add(Errors *e, const char *path, const char *fmt, ...) {
        va_list ap;

        e->n++;
        if (e->n > SCHEMA_MAX_ERRORS)
                return;
        if (e->n > 1)
                fputs("; ", e->f);
        fprintf(e->f, "%s: ", path[0] ? path : "arguments");
        va_start(ap, fmt);
        vfprintf(e->f, fmt, ap);
        va_end(ap);
}

static const char *type_phrase(const char *type) {
        static const struct {
                const char *name, *phrase;
        } phrases[] = {
                { "object", "an object" }, { "array", "an array" }, { "string", "a string" },
                { "integer", "an integer" }, { "number", "a number" }, { "boolean", "a boolean" },
                { "null", "null" },
        };
        for (size_t i = 0; i < ELEMENTSOF(phrases); i++)
                if (strcmp(type, phrases[i].name) == 0)
                        return phrases[i].phrase;
        return type;
}

/* An integral real that fits int64 (2^63 itself does not). */
static bool real_is_int64(double d) {
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
                return false;
        return (double) (long long) d == d;
}

/* Does v match the type name? *ret_int is set when v is an integral real to
 * be replaced by an integer. */
static bool type_matches(const char *type, const json_t *v, bool *ret_int) {
        if (strcmp(type, "object") == 0)
                return json_is_object(v);
        if (strcmp(type, "array") == 0)
                return json_is_array(v);
        if (strcmp(type, "string") == 0)
                return json_is_string(v);
        if (strcmp(type, "number") == 0)
                return json_is_number(v);
        if (strcmp(type, "boolean") == 0)
                return json_is_boolean(v);
        if (strcmp(type, "null") == 0)
                return json_is_null(v);
        if (strcmp(type, "integer") == 0) {
                if (json_is_integer(v))
                        return true;
                if (json_is_real(v) && real_is_int64(json_real_value(v))) {
                        *ret_int = true;
                        return true;
                }
                return false;
        }
        return false;           /* unknown type name: nothing matches */
}

static char *json_compact(const json_t *v) {
        return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* -1, 0, 1 comparing two JSON numbers, exactly when both are integers. */
static int number_cmp(const json_t *a, const json_t *b) {
        if (json_is_integer(a) && json_is_integer(b)) {
                json_int_t x = json_integer_value(a), y = json_integer_value(b);
                return x < y ? -1 : x > y;
        }
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x > y;
}

static int check_type(const json_t *schema, const json_t *v, const char *path, Errors *e, bool *ret_ok,
                      json_t **ret_repl) {
        const json_t *type = json_object_get(schema, "type");
        bool want_int = false, to_int = false, ok = false;
        size_t i;
        json_t *t;

        if (!type) {
                *ret_ok = true;
                return 0;
        }
        if (json_is_string(type)) {
                want_int = strcmp(json_string_value(type), "integer") == 0;
                ok = type_matches(json_string_value(type), v, &to_int);
        } else if (json_is_array(type)) {
                json_array_foreach(type, i, t)
                        if (json_is_string(t)) {
                                want_int |= strcmp(json_string_value(t), "integer") == 0;
                                if (!ok)
                                        ok = type_matches(json_string_value(t), v, &to_int);
                        }
        } else
                ok = true;      /* not a type keyword we understand: no constraint */

        if (ok && to_int) {
                *ret_repl = json_integer((json_int_t) json_real_value(v));
                if (!*ret_repl)
                        return -ENOMEM;
        }
        if (!ok) {
                if (want_int && json_is_real(v) &&
                    (json_real_value(v) >= 9223372036854775808.0 || json_real_value(v) < -9223372036854775808.0))
                        error_add(e, path, "is out of range for a 64-bit integer");
                else if (json_is_string(type))
                        error_add(e, path, "must be %s", type_phrase(json_string_value(type)));
                else {
                        _cleanup_free_ char *list = NULL;
                        size_t size = 0, n = json_array_size(type);
                        FILE *f = open_memstream(&list, &size);

                        if (!f)
                                return -ENOMEM;
                        json_array_foreach(type, i, t)
                                fprintf(f, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                        json_is_string(t) ? type_phrase(json_string_value(t)) : "?");
                        if (fclose(f) != 0)
                                return -ENOMEM;
                        error_add(e, path, "must be %s", list);
                }
        }
        *ret_ok = ok;
        return 0;
}

static int check_enum(const json_t *schema, const json_t *v, const char *path, Errors *e) {
        const json_t *values = json_object_get(schema, "enum");
        _cleanup_free_ char *list = NULL;
        size_t i;
        json_t *x;

        if (!json_is_array(values))
                return 0;
        json_array_foreach(values, i, x)
                if (json_equal(x, (json_t *) v))
                        return 0;
        list = json_compact(values);
        if (!list)
                return -ENOMEM;
        error_add(e, path, "must be one of %s", list);
        return 0;
}

static int check_bounds(const json_t *schema, const json_t *v, const char *path, Errors *e) {
        const json_t *min = json_object_get(schema, "minimum"), *max = json_object_get(schema, "maximum");

        if (!json_is_number(v))
                return 0;
        if (json_is_number(min) && number_cmp(v, min) < 0) {
                _cleanup_free_ char *s = json_compact(min);
                if (!s)
                        return -ENOMEM;
                error_add(e, path, "must be at least %s", s);
        }
        if (json_is_number(max) && number_cmp(v, max) > 0) {
                _cleanup_free_ char *s = json_compact(max);
                if (!s)
                        return -ENOMEM;
                error_add(e, path, "must be at most %s", s);
        }
        return 0;
}

static bool is_required(const json_t *required, const char *key) {
        size_t i;
        json_t *x;

        json_array_foreach(required, i, x)
                if (json_is_string(x) && strcmp(json_string_value(x), key) == 0)
                        return true;
        return false;
}

static int validate(const json_t *schema, json_t *v, const char *path, Errors *e, json_t **ret_repl);

static int unknown_property(const json_t *properties, const char *path, Errors *e) {
        _cleanup_free_ char *list = NULL;
        size_t size = 0;
        const char *key;
        json_t *x;
        bool first = true;
        FILE *f;

        f = open_memstream(&list, &size);
        if (!f)
                return -ENOMEM;
        json_object_foreach((json_t *) properties, key, x) {
                fprintf(f, "%s%s", first ? "" : ", ", key);
                first = false;
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        /* A top-level path has no "." or "[": it is a tool argument. */
        if (strpbrk(path, ".[") == NULL)
                error_add(e, path, "unknown argument (expected %s%s)", first ? "none" : "one of: ", list);
        else
                error_add(e, path, "unknown property (expected %s%s)", first ? "none" : "one of: ", list);
        return 0;
}

static int validate_object(const json_t *schema, json_t *v, const char *path, Errors *e) {
        const json_t *properties = json_object_get(schema, "properties");
        const json_t *required = json_object_get(schema, "required");
        const json_t *additional = json_object_get(schema, "additionalProperties");
        char child[SCHEMA_PATH_MAX + 1];
        const char *key;
        json_t *x;
        size_t i;
        int r;

        if (!json_is_object(properties))
                properties = NULL;
        if (!json_is_array(required))
                required = NULL;

        /* Defaults for absent optional properties. */
        json_object_foreach((json_t *) properties, key, x) {
                json_t *def = json_object_get(x, "default");
                if (def && !json_object_get(v, key) && !is_required(required, key))
                        if (json_object_set_new(v, key, json_deep_copy(def)) < 0)
                                return -ENOMEM;
        }

        json_array_foreach(required, i, x) {
                if (!json_is_string(x) || json_object_get(v, json_string_value(x)))
                        continue;
                path_child_key(child, path, json_string_value(x));
                error_add(e, child, "is required");
        }

        json_object_foreach(v, key, x) {
                const json_t *sub = properties ? json_object_get(properties, key) : NULL;
                json_t *repl = NULL;

                path_child_key(child, path, key);
                if (!sub) {
                        if (json_is_false(additional)) {
                                r = unknown_property(properties, child, e);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        if (!json_is_object(additional))
                                continue;
                        sub = additional;
                }
                r = validate(sub, x, child, e, &repl);
                if (r < 0)
                        return r;
                /* Replacing the value of an existing key keeps the iteration valid. */
                if (repl && json_object_set_new(v, key, repl) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int validate_array(const json_t *schema, json_t *v, const char *path, Errors *e) {
        const json_t *items = json_object_get(schema, "items");
        char child[SCHEMA_PATH_MAX + 1];
        size_t i;
        json_t *x;
        int r;

        if (!json_is_object(items) && !json_is_boolean(items))
                return 0;
        json_array_foreach(v, i, x) {
                json_t *repl = NULL;

                path_child_index(child, path, i);
                r = validate(items, x, child, e, &repl);
                if (r < 0)
                        return r;
                if (repl && json_array_set_new(v, i, repl) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int validate(const json_t *schema, json_t *v, const char *path, Errors *e, json_t **ret_repl) {
        json_t *repl = NULL;
        bool ok;
        int r;

        if (json_is_true(schema))
                return 0;
        if (json_is_false(schema)) {
                error_add(e, path, "is not allowed");
                return 0;
        }
        if (!json_is_object(schema))
                return 0;

        r = check_type(schema, v, path, e, &ok, &repl);
        if (r < 0)
                return r;
        if (!ok)
                return 0;
        if (repl)
                v = repl;

        r = check_enum(schema, v, path, e);
        if (r >= 0)
                r = check_bounds(schema, v, path, e);
        if (r >= 0 && json_is_object(v))
                r = validate_object(schema, v, path, e);
        if (r >= 0 && json_is_array(v))
                r = validate_array(schema, v, path, e);
        if (r < 0) {
                json_decref(repl);
                return r;
        }
        *ret_repl = repl;
        return 0;
}

int schema_validate(const json_t *schema, json_t *instance, char **ret_error) {
        Errors e = {};
        json_t *repl = NULL;
        int r;

        e.f = open_memstream(&e.buf, &e.size);
        if (!e.f)
                return -ENOMEM;
        r = validate(schema, instance, "", &e, &repl);
        /* The root is never replaced: only integers are, and the root is an object. */
        json_decref(repl);
        if (r >= 0 && e.n > SCHEMA_MAX_ERRORS)
                fprintf(e.f, "; and %u more", e.n - SCHEMA_MAX_ERRORS);
        if (fclose(e.f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(e.buf);
                return r;
        }
        if (e.n == 0) {
                free(e.buf);
                return 0;
        }
        *ret_error = e.buf;
        return -EINVAL;
}
