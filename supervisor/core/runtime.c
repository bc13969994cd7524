/* runtime_execute's runtime table and its policy (see runtime.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

/* One runtime. In run, "$x" is the executable and "$d" the temporary
 * directory holding the code as file; the arguments follow run. */
typedef struct RuntimeDef {
        const char *name;
        const char *exe;                /* the runtime's own executable */
        const char *alternates;         /* more of its own (args-only use), allowed without the allowlist */
        const char *file;               /* the code's file in "$d" */
        const char *run;                /* runs the code (compiled: compile, then run the binary) */
        const char *run_stdin;          /* the same when stdin is given too, if it differs */
        const char *where;              /* which image has the executable */
} RuntimeDef;

#define DEBIAN_ONLY(pkg) "no image shipped with sbx has it: add an image definition with the Debian package " pkg \
        " (sbx-images(7))"

static const RuntimeDef runtimes[] = {
        /* node: the code always as ESM, piped on its stdin, or a temp .mjs when stdin is the caller's. */
        { "node", "node", "npm npx", "main.mjs", "\"$x\" --input-type=module - <\"$d/main.mjs\"",
          "\"$x\" \"$d/main.mjs\"", "the images 'node' and 'browser' have it (Debian package nodejs)" },
        { "typescript", "tsx", "ts-node tsc", "main.ts", "\"$x\" \"$d/main.ts\"", NULL,
          "no image shipped with sbx has it: add npm = tsx to an image definition (sbx-images(7))" },
        { "python", "python3", "python pytest", "main.py", "\"$x\" \"$d/main.py\"", NULL,
          "the images 'python' and 'anaconda' have it (Debian package python3)" },
        { "shell", "bash", "sh", "main.sh", "\"$x\" \"$d/main.sh\"", NULL, "every Debian image has it (bash)" },
        { "powershell", "pwsh", "", "main.ps1", "\"$x\" -NoProfile -NonInteractive -File \"$d/main.ps1\"", NULL,
          "Debian 12 has no PowerShell package, so no image built from it has pwsh" },
        { "ruby", "ruby", "bundle rake", "main.rb", "\"$x\" \"$d/main.rb\"", NULL, DEBIAN_ONLY("ruby") },
        { "php", "php", "composer", "main.php", "\"$x\" \"$d/main.php\"", NULL, DEBIAN_ONLY("php-cli") },
        { "perl", "perl", "prove", "main.pl", "\"$x\" \"$d/main.pl\"", NULL, DEBIAN_ONLY("perl") },
        { "r", "Rscript", "R", "main.R", "\"$x\" \"$d/main.R\"", NULL, DEBIAN_ONLY("r-base-core") },
        { "elixir", "elixir", "mix", "main.exs", "\"$x\" \"$d/main.exs\"", NULL, DEBIAN_ONLY("elixir") },
        { "go", "go", "gofmt", "main.go", "\"$x\" run \"$d/main.go\"", NULL,
          "the image 'go' has it (Debian package golang-go)" },
        { "java", "javac", "java mvn gradle", "Main.java", "\"$x\" -d \"$d\" \"$d/Main.java\" && java -cp \"$d\" Main",
          NULL, DEBIAN_ONLY("default-jdk") },
        { "kotlin", "kotlinc", "kotlin", "main.kt",
          "\"$x\" \"$d/main.kt\" -include-runtime -d \"$d/main.jar\" && java -jar \"$d/main.jar\"", NULL,
          DEBIAN_ONLY("kotlin") },
        { "rust", "rustc", "cargo", "main.rs", "\"$x\" -o \"$d/main\" \"$d/main.rs\" && \"$d/main\"", NULL,
          DEBIAN_ONLY("rustc (cargo: cargo)") },
        { "c", "gcc", "cc clang make", "main.c", "\"$x\" -o \"$d/main\" \"$d/main.c\" && \"$d/main\"", NULL,
          "the image 'go' has it (build-essential); else the Debian package gcc" },
        { "cpp", "g++", "c++ clang++ make", "main.cpp", "\"$x\" -o \"$d/main\" \"$d/main.cpp\" && \"$d/main\"", NULL,
          "the image 'go' has it (build-essential); else the Debian package g++" },
        { "csharp", "dotnet-script", "dotnet", "main.csx", "\"$x\" \"$d/main.csx\"", NULL,
          "Debian 12 has neither dotnet nor dotnet-script, so no image built from it has them" },
};

static const RuntimeDef *runtime_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (strcmp(runtimes[i].name, name) == 0)
                        return &runtimes[i];
        return NULL;
}

#define LIST_SEPARATORS " \t,"

bool runtime_list_has(const char *list, const char *word) {
        size_t n = strlen(word);

        for (const char *p = list + strspn(list, LIST_SEPARATORS); *p; p += strspn(p, LIST_SEPARATORS)) {
                size_t k = strcspn(p, LIST_SEPARATORS);
                if (k == n && strncmp(p, word, n) == 0)
                        return true;
                p += k;
        }
        return false;
}

static bool exe_name_valid(const char *s) {
        size_t n = strlen(s);

        return n > 0 && n <= SBX_RUNTIME_EXE_MAX && s[0] != '-' && s[0] != '.' &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == n;
}

static bool env_name_valid(const char *s, size_t n) {
        return n > 0 && !(s[0] >= '0' && s[0] <= '9') &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") >= n;
}

/* Every word of list passes valid (runtimes: known ones). */
static int check_list(const char *key, const char *value, int kind, char *err) {
        unsigned n = 0;

        for (const char *p = value + strspn(value, LIST_SEPARATORS); *p; p += strspn(p, LIST_SEPARATORS)) {
                size_t k = strcspn(p, LIST_SEPARATORS);
                char word[SBX_RUNTIME_LIST_MAX];
                bool ok;

                memcpy(word, p, k);
                word[k] = '\0';
                ok = kind == 0 ? runtime_find(word) != NULL : kind == 1 ? exe_name_valid(word) : env_name_valid(word, k);
                if (!ok) {
                        snprintf(err, CONFIG_ERROR_MAX, "%s: '%.40s' is not %s", key, word,
                                 kind == 0 ? "a runtime (node, typescript, python, shell, powershell, ruby, php, "
                                             "perl, r, elixir, go, java, kotlin, rust, c, cpp, csharp)"
                                 : kind == 1 ? "an executable name (letters, digits, . _ + -)"
                                             : "a variable name");
                        return -EINVAL;
                }
                if (kind == 2 && ++n > SBX_RUNTIME_ENV_MAX) {
                        snprintf(err, CONFIG_ERROR_MAX, "%s: at most %u variables", key, SBX_RUNTIME_ENV_MAX);
                        return -EINVAL;
                }
                p += k;
        }
        return 0;
}

/* runtime_artifact_ttl_hours: a decimal > 0 (0.001 is 3.6 seconds). */
static int parse_ttl(const char *value, uint64_t *ret, char *err) {
        char *end;
        double h;

        errno = 0;
        h = strtod(value, &end);
        if (errno || end == value || *end || !(h > 0) || h * 3600e3 > (double) SBX_RUNTIME_TTL_MAX_MS || h * 3600e3 < 1) {
                snprintf(err, CONFIG_ERROR_MAX,
                         "runtime_artifact_ttl_hours: '%.40s' is not a number of hours from 0.000001 to 8784", value);
                return -EINVAL;
        }
        *ret = (uint64_t) (h * 3600e3);
        return 0;
}

int runtime_config_set(Config *cfg, const char *key, const char *value, char *err) {
        static const struct {
                const char *key;
                size_t offset;
        } lists[] = {
                { "runtime_allowed", offsetof(Config, runtime_allowed) },
                { "runtime_allowed_executables", offsetof(Config, runtime_allowed_executables) },
                { "runtime_env_allowlist", offsetof(Config, runtime_env_allowlist) },
        };
        int r;

        if (strcmp(key, "runtime_artifact_ttl_hours") == 0)
                return parse_ttl(value, &cfg->runtime_artifact_ttl_ms, err);
        for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
                if (strcmp(key, lists[i].key) != 0)
                        continue;
                if (strlen(value) >= SBX_RUNTIME_LIST_MAX) {
                        snprintf(err, CONFIG_ERROR_MAX, "%s: at most %u bytes", key, SBX_RUNTIME_LIST_MAX - 1);
                        return -EINVAL;
                }
                r = check_list(key, value, (int) i, err);
                if (r < 0)
                        return r;
                strlcpy((char *) cfg + lists[i].offset, value, SBX_RUNTIME_LIST_MAX);
                return 0;
        }
        return 1;
}

/* s as one single-quoted word of sh. */
static void put_quoted(FILE *f, const char *s) {
        fputc('\'', f);
        for (; *s; s++)
                if (*s == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*s, f);
        fputc('\'', f);
}

static int compose_text(const RuntimeDef *d, const RuntimeCall *call, const char *exe, char **ret_cmd) {
        _cleanup_free_ char *buf = NULL, *missing = NULL;
        size_t len = 0;
        FILE *f;

        if (asprintf(&missing, RUNTIME_MISSING_MARK "runtime %s: executable '%s' not found in this sandbox's image; %s",
                     d->name, exe, d->where) < 0)
                return -ENOMEM;
        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        fputs("x=", f);
        put_quoted(f, exe);
        fputs("; command -v \"$x\" >/dev/null 2>&1 || { printf '%s\\n' ", f);
        put_quoted(f, missing);
        fputs(" >&2; exit 127; }\n", f);
        if (call->code && call->code[0]) {
                fputs("d=$(mktemp -d \"${TMPDIR:-/tmp}/sbx-runtime.XXXXXX\") || exit 125\n"
                      "trap 'rm -rf \"$d\"' EXIT\nprintf '%s' ", f);
                put_quoted(f, call->code);
                fprintf(f, " >\"$d/%s\" || exit 125\n", d->file);
                fputs(call->has_stdin && d->run_stdin ? d->run_stdin : d->run, f);
        } else
                fputs("exec \"$x\"", f);
        for (size_t i = 0; i < call->n_args; i++) {
                fputc(' ', f);
                put_quoted(f, call->args[i]);
        }
        fputc('\n', f);
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret_cmd = TAKE_PTR(buf);
        return 0;
}

int runtime_compose(const Config *cfg, const RuntimeCall *call, char **ret_cmd, const char **ret_executable,
                    char *err, size_t err_size) {
        const RuntimeDef *d = runtime_find(call->runtime);
        const char *exe;
        _cleanup_free_ char *cmd = NULL;
        int r;

        if (!d) {
                snprintf(err, err_size, "runtime: unknown runtime '%.40s'; use one of node, typescript, python, shell, "
                         "powershell, ruby, php, perl, r, elixir, go, java, kotlin, rust, c, cpp, csharp", call->runtime);
                return -EINVAL;
        }
        if (!runtime_list_has(cfg->runtime_allowed, d->name)) {
                snprintf(err, err_size, "runtime: '%s' is not allowed here; allowed: %.200s (an administrator adds it "
                         "to runtime_allowed in sbxd.conf(5))", d->name, cfg->runtime_allowed);
                return -EPERM;
        }
        exe = call->executable && call->executable[0] ? call->executable : d->exe;
        if (!exe_name_valid(exe)) {
                snprintf(err, err_size, "executable: '%.40s' is not an executable's name (letters, digits, . _ + -; no "
                         "path)", exe);
                return -EINVAL;
        }
        if (strcmp(exe, d->exe) != 0 && !runtime_list_has(d->alternates, exe) &&
            !runtime_list_has(cfg->runtime_allowed_executables, exe)) {
                char own[SBX_RUNTIME_LIST_MAX];
                size_t n = strlcpy(own, d->exe, sizeof(own));

                /* "python3, python, pytest": the runtime's own, as a list */
                for (const char *p = d->alternates; *p && n + 3 < sizeof(own); p++) {
                        if (p == d->alternates || *p == ' ') {
                                own[n++] = ',';
                                own[n++] = ' ';
                                if (*p == ' ')
                                        continue;
                        }
                        own[n++] = *p;
                }
                own[n] = '\0';
                snprintf(err, err_size, "executable: '%s' is not allowed for runtime %s; use %s, or ask an "
                         "administrator to add it to runtime_allowed_executables in sbxd.conf(5)", exe, d->name, own);
                return -EPERM;
        }
        r = compose_text(d, call, exe, &cmd);
        if (r < 0)
                return r;
        if (strlen(cmd) > SBX_CMD_MAX) {
                snprintf(err, err_size, "code: with args, the command is over %u bytes; put the program in a file of "
                         "the workspace (file_write) and pass it in args", SBX_CMD_MAX);
                return -E2BIG;
        }
        *ret_cmd = TAKE_PTR(cmd);
        *ret_executable = exe;
        return 0;
}

size_t runtime_env(const Config *cfg, const char **env, size_t max) {
        extern char **environ;
        size_t n = 0;

        for (char **e = environ; e && *e && n < max; e++) {
                size_t k = strcspn(*e, "=");
                char name[SBX_RUNTIME_LIST_MAX];

                if ((*e)[k] != '=' || k >= sizeof(name))
                        continue;
                memcpy(name, *e, k);
                name[k] = '\0';
                if (runtime_list_has(cfg->runtime_env_allowlist, name))
                        env[n++] = *e;
        }
        return n;
}

/* The options that name a JUnit XML report: "--opt=P" or "--opt P", or with
 * key, "--opt key=P" among comma-separated options. */
static const struct {
        const char *option;
        const char *key;                /* NULL: the value is the path */
} report_options[] = {
        { "--junitxml", NULL },         /* pytest */
        { "--junit-xml", NULL },        /* pytest's older spelling, others */
        { "--junitfile", NULL },        /* gotestsum */
        { "--reporter-options", "mochaFile" },  /* mocha-junit-reporter */
};

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);

        return n > k && strcmp(s + n - k, suffix) == 0;
}

/* The path of key in the comma-separated options value (borrowed up to
 * ret_len), or NULL. */
static const char *option_key(const char *value, const char *key, size_t *ret_len) {
        size_t k = strlen(key);

        for (const char *p = value; *p; p += strcspn(p, ","), p += *p == ',') {
                size_t n = strcspn(p, ",");

                if (n > k + 1 && strncmp(p, key, k) == 0 && p[k] == '=') {
                        *ret_len = n - k - 1;
                        return p + k + 1;
                }
        }
        return NULL;
}

/* The report a value of report_options[o] names into ret (if room), its count. */
static size_t report_add(size_t o, const char *value, RuntimeReportPath *ret, size_t n, size_t max) {
        size_t len = strlen(value);
        const char *p = report_options[o].key ? option_key(value, report_options[o].key, &len) : value;

        if (!p || len == 0 || len > SBX_PATH_MAX || n >= max)
                return n;
        for (size_t i = 0; i < n; i++)
                if (ret[i].len == len && memcmp(ret[i].path, p, len) == 0)
                        return n;
        ret[n] = (RuntimeReportPath) { p, len };
        return n + 1;
}

size_t runtime_report_paths(const RuntimeCall *call, RuntimeReportPath *ret, size_t max) {
        bool code = call->code && call->code[0];
        size_t n = 0;

        for (size_t i = 0; i < call->n_args; i++) {
                const char *a = call->args[i];
                bool option = false;

                for (size_t o = 0; o < ELEMENTSOF(report_options) && !option; o++) {
                        size_t k = strlen(report_options[o].option);

                        if (strncmp(a, report_options[o].option, k) != 0 || (a[k] != '=' && a[k] != '\0'))
                                continue;
                        option = true;
                        if (a[k] == '=')
                                n = report_add(o, a + k + 1, ret, n, max);
                        else if (i + 1 < call->n_args)
                                n = report_add(o, call->args[++i], ret, n, max);
                }
                /* Without code, an argument that is a .xml file (not an option) may be the report a tool writes. */
                if (!option && !code && a[0] != '-' && ends_with(a, ".xml"))
                        n = report_add(0, a, ret, n, max);
        }
        return n;
}
