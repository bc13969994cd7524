/* runtime_execute's runtimes (the artifacts set, issue 19): the seed's 17
 * as a table, each an executable, how inline code is given to it and, for
 * compiled ones, the compile-then-run steps (the binary is removed with the
 * temporary directory). sbxd composes the /bin/sh command from the table and
 * enforces the runtime_* settings of sbxd.conf(5): a broker names a runtime,
 * never a command. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"

/* The first line a command composed here writes to stderr (exit status 127)
 * when its executable is not in the sandbox's image. */
#define RUNTIME_MISSING_MARK "sbx-runtime: "

/* sbxd.conf's runtime_allowed, runtime_allowed_executables,
 * runtime_env_allowlist (words separated by spaces or commas) and
 * runtime_artifact_ttl_hours (a decimal); 1 if key is none of them, else 0
 * or -EINVAL with err (CONFIG_ERROR_MAX bytes) saying why. */
int runtime_config_set(Config *cfg, const char *key, const char *value, char *err);

/* Whether word is one of the space- or comma-separated words of list. */
bool runtime_list_has(const char *list, const char *word);

typedef struct RuntimeCall {
        const char *runtime;
        const char *executable;         /* NULL or "": the runtime's own */
        char *const *args;
        size_t n_args;
        const char *code;               /* NULL or "": args only */
        bool has_stdin;                 /* node's code then goes in a temp .mjs, not on stdin */
} RuntimeCall;

/* The command that runs call under cfg's policy (malloc'd) and the
 * executable it runs (static or borrowed from call). -EPERM: a runtime not
 * in runtime_allowed, or an executable neither the runtime's nor in
 * runtime_allowed_executables; -EINVAL: an unknown runtime or a malformed
 * executable name; -E2BIG: the command would pass SBX_CMD_MAX. err says
 * which argument and what to do. */
int runtime_compose(const Config *cfg, const RuntimeCall *call, char **ret_cmd, const char **ret_executable,
                    char *err, size_t err_size);

/* Of runtime_env_allowlist, the variables sbxd's own environment has, as
 * KEY=VALUE (borrowed from environ), at most max of them. */
size_t runtime_env(const Config *cfg, const char **env, size_t max);

/* A JUnit XML report an argument names: borrowed from call's args. */
typedef struct RuntimeReportPath {
        const char *path;
        size_t len;
} RuntimeReportPath;

/* The reports call's args name (at most max, each once, in order): the value
 * of --junitxml, --junit-xml, --junitfile (as "--opt=P" or "--opt P"), the
 * mochaFile=P of --reporter-options, and without inline code an argument
 * ending in ".xml" that is not an option. */
size_t runtime_report_paths(const RuntimeCall *call, RuntimeReportPath *ret, size_t max);
