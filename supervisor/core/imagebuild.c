/* See imagebuild.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <ini.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "core/imagebuild.h"
#include "core/sandbox.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "os/image.h"
#include "os/ns.h"
#include "sbx-limits.h"

#define IMAGE_SPEC_VERSION "1"          /* bump when sbx-image-build makes other roots of the same spec */
#define IMAGE_ERROR_MAX 900

static void *mfree(void *p) {
        free(p);
        return NULL;
}

typedef struct BuildUse {
        char digest[41];
        unsigned n;
} BuildUse;

/* A removal of a build moved aside (trash-*), by sbx-image-build remove. */
typedef struct Removal {
        TAILQ_ENTRY(Removal) link;
        EventSource pidfd_src;
} Removal;

struct Image {
        TAILQ_ENTRY(Image) link;
        char name[SBX_NAME_MAX + 1];
        char digest[41];                /* of spec */
        char *description, *suite, *components, *variant, *packages, *npm, *unavailable;
        char *refused;                  /* why its definition file is refused */
        char *spec;                     /* the canonical definition */
        char *env[SBX_IMAGE_ENV_MAX + 1];
        size_t n_env;
        char *version_names[SBX_IMAGE_VERSIONS_MAX], *version_cmds[SBX_IMAGE_VERSIONS_MAX];
        size_t n_versions;
        bool defined;                   /* at the last read of images_dir */
        /* its build */
        bool building, failed;
        char build_digest[41];          /* what is being built */
        char step[SBX_IMAGE_PROGRESS_MAX];
        char helper_error[IMAGE_ERROR_MAX];
        char error[IMAGE_ERROR_MAX];
        EventSource pidfd_src, out_src;
        char out[1024];
        size_t out_len;
        pid_t pid;
        unsigned long long start_usec;
        uint64_t build_seconds;
        TAILQ_HEAD(, ImageWaiter) waiters;
};

struct ImageSet {
        int dirfd;                      /* STATE/images */
        char *dir;
        char *builder;                  /* sbx-image-build */
        TAILQ_HEAD(, Image) images;
        TAILQ_HEAD(, Removal) removals;
        BuildUse *uses;
        size_t n_uses, cap_uses;
        uint64_t next_ticket;           /* of the next ImageWaiter (image_waiters_done) */
};

/* ---- definitions ------------------------------------------------------------------ */

static bool word_ok(const char *w, const char *extra) {
        if (!*w)
                return false;
        for (; *w; w++)
                if (!((*w >= 'a' && *w <= 'z') || (*w >= '0' && *w <= '9') || strchr(extra, *w)))
                        return false;
        return true;
}

static bool image_name_ok(const char *n) {
        return strlen(n) <= SBX_NAME_MAX && n[0] != '-' && word_ok(n, "-_");
}

/* Each space-separated word of list is word_ok(extra). */
static bool list_ok(const char *list, const char *extra) {
        _cleanup_free_ char *copy = strdup(list);
        char *save = NULL;

        if (!copy)
                return false;
        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
                if (!word_ok(w, extra))
                        return false;
        return true;
}

static Image *image_def_free(Image *img) {
        char **fields[] = { &img->description, &img->suite, &img->components, &img->variant, &img->packages,
                            &img->npm, &img->unavailable, &img->refused, &img->spec };

        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                *fields[i] = mfree(*fields[i]);
        for (size_t i = 0; i < img->n_env; i++)
                img->env[i] = mfree(img->env[i]);
        for (size_t i = 0; i < img->n_versions; i++) {
                img->version_names[i] = mfree(img->version_names[i]);
                img->version_cmds[i] = mfree(img->version_cmds[i]);
        }
        img->n_env = img->n_versions = 0;
        return img;
}

/* Append value to *dst with a space between (a multi-line value of inih). */
static int append(char **dst, const char *value) {
        char *n;

        if (asprintf(&n, "%s%s%s", *dst ? *dst : "", *dst ? " " : "", value) < 0)
                return -ENOMEM;
        free(*dst);
        *dst = n;
        return strlen(n) > SBX_IMAGE_VALUE_MAX ? -E2BIG : 0;
}

typedef struct DefParse {
        Image *img;
        char error[200];
} DefParse;

static int def_image_key(Image *img, const char *key, const char *value) {
        static const char *const keys[] = { "description", "suite", "components", "variant", "packages",
                                             "npm", "unavailable" };
        char **fields[] = { &img->description, &img->suite, &img->components, &img->variant, &img->packages,
                            &img->npm, &img->unavailable };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (strcmp(key, keys[i]) == 0)
                        return append(fields[i], value);
        return -ENOENT;
}

static int def_handler(void *user, const char *section, const char *key, const char *value) {
        DefParse *p = user;
        Image *img = p->img;
        int r = -ENOENT;

        if (strcmp(section, "image") == 0)
                r = def_image_key(img, key, value);
        else if (strcmp(section, "environment") == 0) {
                bool ok = key[0] && !(key[0] >= '0' && key[0] <= '9');
                for (const char *k = key; *k; k++)
                        ok = ok && ((*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_');
                if (!ok || img->n_env >= SBX_IMAGE_ENV_MAX || strlen(value) > SBX_IMAGE_VALUE_MAX) {
                        snprintf(p->error, sizeof(p->error), "[environment] %.64s: a name of A-Z 0-9 _ "
                                 "(at most %u of them, values of %u bytes)", key, SBX_IMAGE_ENV_MAX, SBX_IMAGE_VALUE_MAX);
                        return 0;
                }
                r = asprintf(&img->env[img->n_env], "%s=%s", key, value) < 0 ? -ENOMEM : 0;
                if (r >= 0)
                        img->n_env++;
        } else if (strcmp(section, "versions") == 0) {
                if (!word_ok(key, "-_") || strlen(key) > SBX_NAME_MAX || img->n_versions >= SBX_IMAGE_VERSIONS_MAX ||
                    !value[0] || strlen(value) > SBX_IMAGE_VALUE_MAX) {
                        snprintf(p->error, sizeof(p->error), "[versions] %.64s: a name of a-z 0-9 - _ and a command "
                                 "(at most %u of them)", key, SBX_IMAGE_VERSIONS_MAX);
                        return 0;
                }
                img->version_names[img->n_versions] = strdup(key);
                img->version_cmds[img->n_versions] = strdup(value);
                r = img->version_names[img->n_versions] && img->version_cmds[img->n_versions++] ? 0 : -ENOMEM;
        }
        if (r == -ENOENT)
                snprintf(p->error, sizeof(p->error), "unknown key %.64s in [%.32s] (see sbx-images(7))", key, section);
        else if (r < 0)
                snprintf(p->error, sizeof(p->error), "[%.32s] %.64s: %s", section, key,
                         r == -E2BIG ? "the value is too long" : strerror(-r));
        return r < 0 ? 0 : 1;
}

/* The canonical definition (what makes the build) and its digest: the git
 * blob id of that text. */
static int def_canonical(Image *img, char *err, size_t size) {
        _cleanup_free_ char *v = NULL;
        git_oid oid;
        size_t len;

        if (asprintf(&img->spec, "sbx-image=%s\nsuite=%s\ncomponents=%s\nvariant=%s\npackages=%s\nnpm=%s\n",
                     IMAGE_SPEC_VERSION, img->suite, img->components, img->variant, img->packages,
                     img->npm ? img->npm : "") < 0) {
                img->spec = NULL;
                return -ENOMEM;
        }
        for (size_t i = 0; i < img->n_versions; i++) {
                if (strchr(img->version_cmds[i], '\n'))
                        return -EINVAL;
                if (asprintf(&v, "%sversion.%s=%s\n", img->spec, img->version_names[i], img->version_cmds[i]) < 0) {
                        v = NULL;
                        return -ENOMEM;
                }
                free(img->spec);
                img->spec = TAKE_PTR(v);
        }
        len = strlen(img->spec);
        if (git_odb_hash(&oid, img->spec, len, GIT_OBJECT_BLOB) < 0) {
                snprintf(err, size, "cannot digest the definition");
                return -EIO;
        }
        git_oid_tostr(img->digest, sizeof(img->digest), &oid);
        return 0;
}

/* Defaults, then every value checked: what reaches sbx-image-build is words. */
static int def_check(Image *img, char *err, size_t size) {
        static const char *const variants[] = { "minbase", "apt", "required", "important", "standard", "essential" };
        bool variant_ok = false;

        if (!img->components && !(img->components = strdup("main")))
                return -ENOMEM;
        if (!img->variant && !(img->variant = strdup("minbase")))
                return -ENOMEM;
        if (!img->description && !(img->description = strdup("")))
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(variants); i++)
                variant_ok = variant_ok || strcmp(img->variant, variants[i]) == 0;
        if (img->unavailable)
                return 0;
        if (!img->suite || !word_ok(img->suite, "-.")) {
                snprintf(err, size, "suite: a Debian suite (such as bookworm) of a-z 0-9 - .");
                return -EINVAL;
        }
        if (!variant_ok) {
                snprintf(err, size, "variant: one of minbase, apt, required, important, standard, essential");
                return -EINVAL;
        }
        if (!list_ok(img->components, "-")) {
                snprintf(err, size, "components: words of a-z 0-9 -");
                return -EINVAL;
        }
        if (!img->packages || !list_ok(img->packages, "-.+:=~")) {
                snprintf(err, size, "packages: Debian package names (a-z 0-9 - . + : = ~)");
                return -EINVAL;
        }
        if (img->npm && !list_ok(img->npm, "-._/@~^=+ABCDEFGHIJKLMNOPQRSTUVWXYZ")) {
                snprintf(err, size, "npm: npm package specifications (letters, digits and - . _ / @ ~ ^ = +)");
                return -EINVAL;
        }
        return def_canonical(img, err, size);
}

static void _printf_(2, 3) refuse(Image *img, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&img->refused, fmt, ap) < 0)
                img->refused = strdup("the definition is refused (out of memory)");
        va_end(ap);
}

/* Read and check the file NAME.conf of dirfd into img (its fields were free). */
static void def_read(int dirfd, const char *file, Image *img) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        DefParse p = { .img = img };
        char why[300] = "";
        ssize_t n;
        int r, line;

        fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        r = fd < 0 ? -errno : fd_trusted(fd, why, sizeof(why));
        if (r < 0) {
                refuse(img, "the definition %s is refused: %s", file,
                                why[0] ? why : strerror(-r));
                return;
        }
        text = malloc(SBX_IMAGE_DEF_MAX + 1);
        n = text ? loop_read(fd, text, SBX_IMAGE_DEF_MAX + 1) : -ENOMEM;
        if (n < 0 || n > (ssize_t) SBX_IMAGE_DEF_MAX) {
                refuse(img, "the definition %s cannot be read: %s", file,
                                n < 0 ? strerror((int) -n) : "larger than 64 KiB");
                return;
        }
        text[n] = '\0';
        line = ini_parse_string(text, def_handler, &p);
        if (line != 0 || p.error[0]) {
                if (p.error[0])
                        refuse(img, "%s:%d: %s", file, line, p.error);
                else
                        refuse(img, "%s:%d: not INI (a line of more than 200 bytes is one: continue long values "
                               "on indented lines)", file, line);
                return;
        }
        r = def_check(img, why, sizeof(why));
        if (r < 0)
                refuse(img, "%s: %s", file, why[0] ? why : strerror(-r));
}

static struct ImageSet *set_of(Server *s) {
        return s->images;
}

static Image *image_find(Server *s, const char *name) {
        Image *img;

        TAILQ_FOREACH(img, &set_of(s)->images, link)
                if (strcmp(img->name, name) == 0)
                        return img;
        return NULL;
}

static Image *image_new(struct ImageSet *set, const char *name) {
        Image *img = calloc(1, sizeof(*img));

        if (!img)
                return NULL;
        strlcpy(img->name, name, sizeof(img->name));
        img->pidfd_src.fd = img->out_src.fd = -EBADF;
        TAILQ_INIT(&img->waiters);
        TAILQ_INSERT_TAIL(&set->images, img, link);
        return img;
}

/* One NAME.conf into its Image; an image that is building keeps the
 * definition it builds until it is done. */
static void images_read_one(Server *s, int dirfd, const char *file) {
        char name[SBX_NAME_MAX + 1];
        size_t len = strlen(file);
        Image *img;

        if (len < 6 || len - 5 > SBX_NAME_MAX || strcmp(file + len - 5, ".conf") != 0)
                return;
        snprintf(name, sizeof(name), "%.*s", (int) (len - 5), file);
        if (!image_name_ok(name))
                return;
        img = image_find(s, name);
        if (!img) {
                unsigned n = 0;
                TAILQ_FOREACH(img, &set_of(s)->images, link)
                        n++;
                if (n >= SBX_IMAGES_MAX)
                        return;
                img = image_new(set_of(s), name);
                if (!img)
                        return;
        }
        img->defined = true;
        if (img->building)
                return;
        image_def_free(img);
        def_read(dirfd, file, img);
}

static void image_free(Image *img) {
        image_def_free(img);
        free(img);
}

/* images_dir again: an edited, added or removed file counts from now on. */
static void images_reload(Server *s) {
        _cleanup_close_ int dirfd = -EBADF;
        Image *img, *next;
        DIR *d = NULL;
        struct dirent *de;

        TAILQ_FOREACH(img, &set_of(s)->images, link)
                img->defined = false;
        dirfd = open(s->cfg.images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd >= 0) {
                int dup = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                d = dup >= 0 ? fdopendir(dup) : NULL;
                if (!d && dup >= 0)
                        close(dup);
        }
        while (d && (de = readdir(d)))
                images_read_one(s, dirfd, de->d_name);
        if (d)
                closedir(d);
        TAILQ_FOREACH_SAFE(img, &set_of(s)->images, link, next)
                if (!img->defined && !img->building) {
                        TAILQ_REMOVE(&set_of(s)->images, img, link);
                        image_free(img);
                }
}

bool image_exists(Server *s, const char *name) {
        Image *img;

        if (strcmp(name, SBX_IMAGE_DEFAULT_NAME) == 0)
                return true;
        images_reload(s);
        img = image_find(s, name);
        return img && img->defined;
}

/* ---- builds on disk ------------------------------------------------------------------ */

static bool built(Server *s, const char *digest) {
        char path[64];

        snprintf(path, sizeof(path), "%s/built", digest);
        return digest[0] && faccessat(set_of(s)->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

/* key=value of DIGEST/FILE (written by sbx-image-build), as a number. */
static uint64_t build_number(Server *s, const char *digest, const char *key) {
        _cleanup_free_ char *text = NULL;
        char path[64], *p;
        size_t klen = strlen(key);
        uint64_t v = 0;

        snprintf(path, sizeof(path), "%s/built", digest);
        if (read_file_at(set_of(s)->dirfd, path, &text) < 0)
                return 0;
        for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
                        char *end = strchr(p, '\n');
                        if (end)
                                *end = '\0';
                        (void) parse_u64(p + klen + 1, &v);
                        break;
                }
        return v;
}

static bool is_digest(const char *name) {
        if (strlen(name) != 40)
                return false;
        for (const char *c = name; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

/* Bytes of every build on disk. */
static uint64_t builds_size(Server *s) {
        _cleanup_close_ int dup = openat(set_of(s)->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        struct dirent *de;
        uint64_t sum = 0;

        if (!d)
                return 0;
        dup = -EBADF; /* the DIR has it */
        while ((de = readdir(d)))
                if (is_digest(de->d_name))
                        sum += build_number(s, de->d_name, "size_bytes");
        closedir(d);
        return sum;
}

static BuildUse *use_find(struct ImageSet *set, const char *digest) {
        for (size_t i = 0; i < set->n_uses; i++)
                if (strcmp(set->uses[i].digest, digest) == 0)
                        return &set->uses[i];
        return NULL;
}

void image_use_hold(Server *s, const char *digest) {
        struct ImageSet *set = set_of(s);
        BuildUse *u = use_find(set, digest);

        if (!u) {
                if (ARRAY_RESERVE(set->uses, set->cap_uses, set->n_uses + 1) < 0) {
                        log_warning("Out of memory: the build %s is not marked in use", digest);
                        return;
                }
                u = &set->uses[set->n_uses++];
                *u = (BuildUse) {};
                strlcpy(u->digest, digest, sizeof(u->digest));
        }
        u->n++;
}

void image_use_release(Server *s, const char *digest) {
        struct ImageSet *set = set_of(s);
        BuildUse *u = use_find(set, digest);

        if (u && --u->n == 0)
                *u = set->uses[--set->n_uses];
}

void image_use_done(ImageUse *u) {
        u->root_dir = mfree(u->root_dir);
        for (size_t i = 0; u->env && i < u->n_env; i++)
                free(u->env[i]);
        free(u->env);
        u->env = NULL;
        u->n_env = 0;
}

/* ---- removal: off the loop ------------------------------------------------------------- */

typedef struct HelperExec {
        const char *builder;
        char *const *argv;
        int out, log;
        int err;
} HelperExec;

/* By clone_vfork: sbx-image-build with a clean environment, its own
 * process group (so that all it started can be killed), stdout out, stderr
 * log. Touches nothing of sbxd's memory but a->err. */
static int exec_helper(void *userdata) {
        HelperExec *a = userdata;
        char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *) "LANG=C.UTF-8",
                               (char *) "HOME=/root", NULL };
        sigset_t none;
        int null;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || setpgid(0, 0) < 0)
                goto fail;
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) signal(SIGPIPE, SIG_DFL);
        null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, STDIN_FILENO) < 0 || (a->out >= 0 && dup2(a->out, STDOUT_FILENO) < 0) ||
            (a->log >= 0 && dup2(a->log, STDERR_FILENO) < 0))
                goto fail;
        if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
                goto fail;
        execve("/bin/bash", a->argv, envp);
fail:
        a->err = errno > 0 ? -errno : -EIO;
        _exit(127);
}

static int helper_start(HelperExec *a, int *ret_pidfd) {
        int pidfd = -EBADF;
        pid_t pid = clone_vfork(exec_helper, 0, a, &pidfd);

        if (pid < 0)
                return (int) pid;
        if (a->err < 0) {
                (void) waitid((idtype_t) P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                safe_close(pidfd);
                return a->err;
        }
        *ret_pidfd = pidfd;
        return (int) pid;
}

/* Kill, wait for and close a helper's pidfd that could not be watched. */
static void pidfd_reap(int pidfd) {
        pidfd_kill_wait(pidfd);
        (void) waitid((idtype_t) P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
        safe_close(pidfd);
}

static void removal_dispatch(Server *s, EventSource *src, uint32_t events) {
        Removal *rm = container_of(src, Removal, pidfd_src);
        siginfo_t si = {};

        if (waitid((idtype_t) P_PIDFD, (id_t) src->fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return;
        if (si.si_code != CLD_EXITED || si.si_status != 0)
                log_warning("Removing an image build failed (%s %d); sbxctl gc tries again",
                            si.si_code == CLD_EXITED ? "exit status" : "signal", si.si_status);
        server_unwatch(s, src);
        TAILQ_REMOVE(&set_of(s)->removals, rm, link);
        free(rm);
}

/* Move the build aside at once (it is gone for everyone), remove its files
 * in a child. */
static int build_remove(Server *s, const char *digest) {
        struct ImageSet *set = set_of(s);
        char trash[64], hex[17], path[SBX_PATH_MAX + 64];
        char *argv[] = { (char *) "bash", set->builder, (char *) "remove", path, NULL };
        HelperExec a = { .builder = set->builder, .argv = argv, .out = -EBADF, .log = -EBADF };
        Removal *rm;
        int pidfd = -EBADF, r;

        r = random_hex(hex, 16);
        if (r < 0)
                return r;
        snprintf(trash, sizeof(trash), "trash-%s", hex);
        if (renameat(set->dirfd, digest, set->dirfd, trash) < 0)
                return -errno;
        snprintf(path, sizeof(path), "%s/%s", set->dir, trash);
        rm = calloc(1, sizeof(*rm));
        if (!rm)
                return -ENOMEM;
        r = helper_start(&a, &pidfd);
        if (r >= 0) {
                r = server_watch(s, &rm->pidfd_src, pidfd, EPOLLIN);
                if (r < 0)
                        pidfd_reap(pidfd);
        }
        if (r < 0) {
                free(rm);
                return log_warning_errno(r, "Cannot remove %s now (sbxctl gc tries again): %m", path);
        }
        rm->pidfd_src.dispatch = removal_dispatch;
        TAILQ_INSERT_TAIL(&set->removals, rm, link);
        return 0;
}

/* ---- building ---------------------------------------------------------------------- */

/* Those waiting now: one that waits again (its definition changed meanwhile,
 * so it waits for the next build) has a later ticket and is not told twice. */
static void image_waiters_done(Server *s, Image *img, int r, const char *why) {
        uint64_t last = set_of(s)->next_ticket;
        ImageWaiter *w;

        while ((w = TAILQ_FIRST(&img->waiters)) && w->ticket < last) {
                TAILQ_REMOVE(&img->waiters, w, link);
                w->image = NULL;
                w->done(s, w, r, why);
        }
}

static void image_waiters_progress(Server *s, Image *img) {
        ImageWaiter *w;

        TAILQ_FOREACH(w, &img->waiters, link)
                if (w->progress)
                        w->progress(s, w, img->name, img->step);
}

/* The helper's stdout: "step NAME" and "error TEXT" lines. */
static void build_read_output(Server *s, Image *img) {
        char *nl;
        ssize_t n;

        for (;;) {
                if (img->out_len == sizeof(img->out) - 1)
                        img->out_len = 0; /* a line too long: dropped */
                n = read(img->out_src.fd, img->out + img->out_len, sizeof(img->out) - 1 - img->out_len);
                if (n <= 0)
                        return;
                img->out_len += (size_t) n;
                img->out[img->out_len] = '\0';
                while ((nl = strchr(img->out, '\n'))) {
                        *nl = '\0';
                        if (strncmp(img->out, "step ", 5) == 0) {
                                strlcpy(img->step, img->out + 5, sizeof(img->step));
                                image_waiters_progress(s, img);
                        }
                        else if (strncmp(img->out, "error ", 6) == 0)
                                strlcpy(img->helper_error, img->out + 6, sizeof(img->helper_error));
                        img->out_len -= (size_t) (nl + 1 - img->out);
                        memmove(img->out, nl + 1, img->out_len + 1);
                }
        }
}

static void build_output_dispatch(Server *s, EventSource *src, uint32_t events) {
        Image *img = container_of(src, Image, out_src);

        build_read_output(s, img);
        if (!(events & EPOLLIN) || (events & EPOLLHUP)) {
                char c;
                if (read(src->fd, &c, 1) == 0)
                        server_unwatch(s, src);
        }
}

static void build_finish(Server *s, Image *img, const siginfo_t *si) {
        char spec[64];

        if (img->out_src.fd >= 0) {
                build_read_output(s, img);
                server_unwatch(s, &img->out_src);
        }
        server_unwatch(s, &img->pidfd_src);
        img->building = false;
        img->pid = 0;
        img->build_seconds = (now_usec() - img->start_usec + 500000) / 1000000;
        snprintf(spec, sizeof(spec), "%s.spec", img->build_digest);
        (void) unlinkat(set_of(s)->dirfd, spec, 0);
        if (si->si_code == CLD_EXITED && si->si_status == 0 && built(s, img->build_digest)) {
                img->failed = false;
                img->error[0] = '\0';
                log_info("Built image '%s' (%s) in %llu s", img->name, img->build_digest,
                         (unsigned long long) img->build_seconds);
                image_waiters_done(s, img, 0, NULL);
                return;
        }
        img->failed = true;
        snprintf(img->error, sizeof(img->error), "image '%s': the build failed at step %.60s: %.300s (log: %.200s/%s.log)",
                 img->name, img->step[0] ? img->step : "start",
                 img->helper_error[0] ? img->helper_error
                 : si->si_code == CLD_EXITED ? "sbx-image-build exited without saying why" : "sbx-image-build was killed",
                 set_of(s)->dir, img->name);
        log_error("%s", img->error);
        image_waiters_done(s, img, -EIO, img->error);
}

static void build_pidfd_dispatch(Server *s, EventSource *src, uint32_t events) {
        Image *img = container_of(src, Image, pidfd_src);
        siginfo_t si = {};

        if (waitid((idtype_t) P_PIDFD, (id_t) src->fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return;
        build_finish(s, img, &si);
}

/* What image_disk_max leaves for a new build: -ENOSPC with err if nothing. */
static int build_disk_left(Server *s, uint64_t *ret, char *err, size_t size) {
        uint64_t used = builds_size(s);

        if (used >= s->cfg.image_disk_max) {
                snprintf(err, size, "image_disk_max (%llu bytes) is used up by the builds there (%llu bytes): "
                         "sbxctl image rm or sbxctl gc makes room", (unsigned long long) s->cfg.image_disk_max,
                         (unsigned long long) used);
                return -ENOSPC;
        }
        *ret = s->cfg.image_disk_max - used;
        return 0;
}

/* sbx-image-build runs as root: it must be root's alone, as sbx-worker. */
static int builder_trusted(const char *path, char *err, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        char why[200] = "";
        int r = fd < 0 ? -errno : fd_trusted(fd, why, sizeof(why));

        if (r < 0)
                snprintf(err, size, "the image builder %s is refused: %s", path, why[0] ? why : strerror(-r));
        return r;
}

static int build_start(Server *s, Image *img, char *err, size_t size) {
        struct ImageSet *set = set_of(s);
        char spec[SBX_PATH_MAX], out[SBX_PATH_MAX], left[24], uid[16], specname[64], logname[SBX_NAME_MAX + 8];
        char *argv[] = { (char *) "bash", set->builder, (char *) "build", spec, out, s->cfg.image_cache_dir,
                         left, uid, NULL };
        _cleanup_close_ int log = -EBADF, rd = -EBADF, wr = -EBADF;
        HelperExec a = { .builder = set->builder, .argv = argv };
        uint64_t disk_left;
        int pipefd[2], pidfd = -EBADF, r;
        pid_t pid;

        r = build_disk_left(s, &disk_left, err, size);
        if (r < 0)
                return r;
        r = builder_trusted(set->builder, err, size);
        if (r < 0)
                return r;
        snprintf(specname, sizeof(specname), "%s.spec", img->digest);
        r = write_file_atomic_at(set->dirfd, specname, img->spec, strlen(img->spec), 0644);
        snprintf(logname, sizeof(logname), "%s.log", img->name);
        log = r < 0 ? r : openat(set->dirfd, logname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (log < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
                r = log < 0 ? (r < 0 ? r : -errno) : -errno;
                snprintf(err, size, "image '%s': cannot prepare its build: %s", img->name, strerror(-r));
                return r;
        }
        rd = pipefd[0];
        wr = pipefd[1];
        snprintf(spec, sizeof(spec), "%s/%s", set->dir, specname);
        snprintf(out, sizeof(out), "%s/%s", set->dir, img->digest);
        snprintf(left, sizeof(left), "%llu", (unsigned long long) disk_left);
        snprintf(uid, sizeof(uid), "%u", SBX_IMAGE_BUILD_UID_BASE);
        a.out = wr;
        a.log = log;
        pid = helper_start(&a, &pidfd);
        if (pid < 0) {
                snprintf(err, size, "image '%s': cannot start sbx-image-build: %s", img->name, strerror((int) -pid));
                return (int) pid;
        }
        wr = safe_close(wr);
        (void) fd_nonblock(rd, true);
        r = server_watch(s, &img->pidfd_src, pidfd, EPOLLIN);
        if (r >= 0)
                r = server_watch(s, &img->out_src, TAKE_FD(rd), EPOLLIN);
        if (r < 0) {
                (void) kill(-pid, SIGKILL);
                if (img->pidfd_src.fd >= 0) {
                        (void) waitid((idtype_t) P_PIDFD, (id_t) img->pidfd_src.fd, &(siginfo_t) {}, WEXITED);
                        server_unwatch(s, &img->pidfd_src);
                } else
                        pidfd_reap(pidfd);
                snprintf(err, size, "image '%s': cannot watch its build: %s", img->name, strerror(-r));
                return r;
        }
        img->pidfd_src.dispatch = build_pidfd_dispatch;
        img->out_src.dispatch = build_output_dispatch;
        img->pid = pid;
        img->building = true;
        img->failed = false;
        img->step[0] = img->helper_error[0] = img->out[0] = '\0';
        img->out_len = 0;
        img->start_usec = now_usec();
        strlcpy(img->build_digest, img->digest, sizeof(img->build_digest));
        log_info("Building image '%s' (%s): %s", img->name, img->digest, img->packages);
        return 0;
}

/* The defined, buildable image called name (reloaded), or -errno with err. */
static int image_usable(Server *s, const char *name, Image **ret, char *err, size_t size) {
        Image *img;

        if (strcmp(name, SBX_IMAGE_DEFAULT_NAME) == 0) {
                snprintf(err, size, "image '%s' is built into sbxd: there is nothing to build", name);
                return -EINVAL;
        }
        images_reload(s);
        img = image_find(s, name);
        if (!img || !img->defined) {
                snprintf(err, size, "image '%s' has no definition %s/%s.conf (sbxctl image list shows the images)",
                         name, s->cfg.images_dir, name);
                return -ENOENT;
        }
        if (img->refused) {
                snprintf(err, size, "image '%s': %s", name, img->refused);
                return -EPERM;
        }
        if (img->unavailable) {
                snprintf(err, size, "image '%s' cannot be built: %s", name, img->unavailable);
                return -EOPNOTSUPP;
        }
        *ret = img;
        return 0;
}

int image_build(Server *s, const char *name, ImageWaiter *w, char *err, size_t size) {
        Image *img;
        int r;

        r = image_usable(s, name, &img, err, size);
        if (r < 0)
                return r;
        if (!img->building && built(s, img->digest))
                return 1;
        if (!img->building) {
                r = build_start(s, img, err, size);
                if (r < 0)
                        return r;
        }
        if (w) {
                w->image = img;
                w->ticket = set_of(s)->next_ticket++;
                TAILQ_INSERT_TAIL(&img->waiters, w, link);
        }
        return 0;
}

int image_acquire(Server *s, const char *name, ImageWaiter *w, ImageUse *ret, char *err, size_t size) {
        Image *img;
        int r;

        r = image_build(s, name, w, err, size);
        if (r <= 0)
                return r;
        img = image_find(s, name);
        *ret = (ImageUse) {};
        strlcpy(ret->digest, img->digest, sizeof(ret->digest));
        ret->env = calloc(img->n_env + 1, sizeof(char *));
        if (!ret->env || asprintf(&ret->root_dir, "%s/%s/root", set_of(s)->dir, img->digest) < 0) {
                ret->root_dir = NULL;
                image_use_done(ret);
                snprintf(err, size, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < img->n_env; i++) {
                ret->env[i] = strdup(img->env[i]);
                if (!ret->env[i]) {
                        image_use_done(ret);
                        snprintf(err, size, "out of memory");
                        return -ENOMEM;
                }
                ret->n_env++;
        }
        return 1;
}

void image_waiter_cancel(ImageWaiter *w) {
        if (!w->image)
                return;
        TAILQ_REMOVE(&w->image->waiters, w, link);
        w->image = NULL;
}

/* ---- listing, removal, collection ---------------------------------------------------- */

typedef struct ListItem {
        Sbx__ImageInfo info;            /* first: the reply's items are freed as ListItems */
        Sbx__ImageVersion versions[SBX_IMAGE_VERSIONS_MAX];
        Sbx__ImageVersion *version_ptrs[SBX_IMAGE_VERSIONS_MAX];
        char *sandboxes[SBX_MAX_SANDBOXES];
        char *versions_text;
} ListItem;

void image_list_free(void *p) {
        Sbx__ImageListReply *l = p;

        if (!l)
                return;
        for (size_t i = 0; i < l->n_images; i++) {
                ListItem *it = (ListItem *) l->images[i];
                free(it->versions_text);
                free(it);
        }
        free(l->images);
        free(l);
}

/* DIGEST/versions: "program=first line" each. */
static void item_versions(Server *s, ListItem *it, const char *digest) {
        char path[64];
        char *save = NULL;

        snprintf(path, sizeof(path), "%s/versions", digest);
        if (read_file_at(set_of(s)->dirfd, path, &it->versions_text) < 0)
                return;
        for (char *line = strtok_r(it->versions_text, "\n", &save); line && it->info.n_versions < SBX_IMAGE_VERSIONS_MAX;
             line = strtok_r(NULL, "\n", &save)) {
                char *eq = strchr(line, '=');
                Sbx__ImageVersion *v = &it->versions[it->info.n_versions];
                if (!eq)
                        continue;
                *eq = '\0';
                sbx__image_version__init(v);
                v->program = line;
                v->version = eq + 1;
                it->version_ptrs[it->info.n_versions++] = v;
        }
        it->info.versions = it->version_ptrs;
}

static void item_fill(Server *s, ListItem *it, Image *img, uid_t uid) {
        Sbx__ImageInfo *o = &it->info;
        Sandbox *sb;

        o->name = img->name;
        o->kind = (char *) "debian";
        o->description = img->description ? img->description : (char *) "";
        o->digest = img->building ? img->build_digest : img->digest;
        o->suite = img->suite ? img->suite : (char *) "";
        o->packages = img->packages ? img->packages : (char *) "";
        o->npm = img->npm ? img->npm : (char *) "";
        o->env = img->env;
        o->n_env = img->n_env;
        o->build_seconds = img->build_seconds;
        if (img->building) {
                o->state = (char *) "building";
                o->step = img->step;
        } else if (img->refused || img->unavailable) {
                o->state = (char *) "failed";
                o->error = img->refused ? img->refused : img->unavailable;
        } else if (built(s, img->digest)) {
                o->state = (char *) "built";
                o->size_bytes = build_number(s, img->digest, "size_bytes");
                o->built_unix = (int64_t) build_number(s, img->digest, "built_unix");
                item_versions(s, it, img->digest);
        } else if (img->failed) {
                o->state = (char *) "failed";
                o->error = img->error;
        } else
                o->state = (char *) "absent";
        o->sandboxes = it->sandboxes;
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (o->n_sandboxes < SBX_MAX_SANDBOXES && strcmp(sb->image, img->name) == 0 &&
                    (uid == 0 || sb->owner_uid == uid))
                        it->sandboxes[o->n_sandboxes++] = sb->name;
}

static int info_cmp(const void *a, const void *b) {
        return strcmp((*(Sbx__ImageInfo *const *) a)->name, (*(Sbx__ImageInfo *const *) b)->name);
}

int image_list(Server *s, uid_t uid, Sbx__ImageListReply **ret) {
        Sbx__ImageListReply *l = calloc(1, sizeof(*l));
        size_t n = 1;
        Image *img;

        images_reload(s);
        TAILQ_FOREACH(img, &set_of(s)->images, link)
                n++;
        if (l) {
                sbx__image_list_reply__init(l);
                l->images = calloc(n, sizeof(*l->images));
        }
        if (!l || !l->images) {
                free(l);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                ListItem *it = calloc(1, sizeof(*it));
                if (!it) {
                        image_list_free(l);
                        return -ENOMEM;
                }
                sbx__image_info__init(&it->info);
                l->images[l->n_images++] = &it->info;
        }
        image_default_info(&((ListItem *) l->images[0])->info);
        n = 1;
        TAILQ_FOREACH(img, &set_of(s)->images, link)
                item_fill(s, (ListItem *) l->images[n++], img, uid);
        qsort(l->images + 1, l->n_images - 1, sizeof(*l->images), info_cmp);
        *ret = l;
        return 0;
}

/* The sandboxes that name image, "a, b" into buf; how many. */
static unsigned image_users(Server *s, const char *name, char *buf, size_t size) {
        unsigned n = 0;
        size_t len = 0;
        Sandbox *sb;

        buf[0] = '\0';
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->image, name) == 0) {
                        if (len < size)
                                len += (size_t) snprintf(buf + len, size - len, "%s%s", n ? ", " : "", sb->name);
                        n++;
                }
        return n;
}

int image_remove(Server *s, const char *name, char *err, size_t size) {
        char users[600];
        Image *img;
        int r;

        images_reload(s);
        img = image_find(s, name);
        if (!img) {
                snprintf(err, size, strcmp(name, SBX_IMAGE_DEFAULT_NAME) == 0
                         ? "image '%s' is built into sbxd and cannot be removed"
                         : "no image '%s' (sbxctl image list shows the images)", name);
                return -ENOENT;
        }
        if (image_users(s, name, users, sizeof(users)) > 0) {
                snprintf(err, size, "image '%s' is used by sandbox(es) %s: delete them first", name, users);
                return -EBUSY;
        }
        if (img->building) {
                snprintf(err, size, "image '%s' is being built", name);
                return -EBUSY;
        }
        if (!built(s, img->digest)) {
                snprintf(err, size, "image '%s' is not built", name);
                return -ENOENT;
        }
        if (use_find(set_of(s), img->digest)) {
                snprintf(err, size, "image '%s': a workspace session still runs on its build", name);
                return -EBUSY;
        }
        r = build_remove(s, img->digest);
        if (r < 0)
                snprintf(err, size, "image '%s': cannot remove its build: %s", name, strerror(-r));
        else
                log_info("Removed the build %s of image '%s'", img->digest, name);
        return r;
}

static bool build_wanted(Server *s, const char *digest) {
        Image *img;

        if (use_find(set_of(s), digest))
                return true;
        TAILQ_FOREACH(img, &set_of(s)->images, link)
                if ((img->defined && !img->refused && strcmp(img->digest, digest) == 0) ||
                    (img->building && strcmp(img->build_digest, digest) == 0))
                        return true;
        return false;
}

unsigned images_collect(Server *s, uint64_t *ret_bytes) {
        _cleanup_close_ int dup = -EBADF;
        char (*victims)[41] = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        uint64_t bytes = 0;
        unsigned removed = 0;
        DIR *d;

        images_reload(s);
        dup = openat(set_of(s)->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* an offset of its own */
        d = dup >= 0 ? fdopendir(dup) : NULL;
        if (!d)
                return 0;
        dup = -EBADF;
        while ((de = readdir(d)))
                if (is_digest(de->d_name) && !build_wanted(s, de->d_name) &&
                    ARRAY_RESERVE(victims, cap, n + 1) >= 0)
                        strlcpy(victims[n++], de->d_name, sizeof(victims[0]));
        closedir(d);
        for (size_t i = 0; i < n; i++) {
                uint64_t size = build_number(s, victims[i], "size_bytes");
                if (build_remove(s, victims[i]) < 0)
                        continue;
                bytes += size;
                removed++;
        }
        free(victims);
        *ret_bytes = bytes;
        return removed;
}

/* ---- the set ---------------------------------------------------------------------- */

/* sbx-image-build beside sbxd (a build tree), else in LIBEXECDIR/sbx. */
static int builder_find(char **ret) {
        char self[SBX_PATH_MAX], *slash, *path;
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (n > 0) {
                self[n] = '\0';
                slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        if (asprintf(&path, "%s/sbx-image-build", self) < 0)
                                return -ENOMEM;
                        if (access(path, R_OK) >= 0) {
                                *ret = path;
                                return 0;
                        }
                        free(path);
                }
        }
        if (asprintf(&path, "%s/sbx/sbx-image-build", SBX_LIBEXECDIR) < 0)
                return -ENOMEM;
        *ret = path;
        return 0;
}

/* Leftovers of builds sbxd did not see end (it stopped, or crashed): *.tmp,
 * *.spec and trash-*. Before the loop runs. */
static void images_clean_leftovers(struct ImageSet *set) {
        _cleanup_close_ int dup = openat(set->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        struct dirent *de;

        if (!d)
                return;
        dup = -EBADF;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                bool tmp = len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0;
                bool spec = len > 5 && strcmp(de->d_name + len - 5, ".spec") == 0;
                if (!tmp && !spec && strncmp(de->d_name, "trash-", 6) != 0)
                        continue;
                if (tree_remove_at(set->dirfd, de->d_name) < 0)
                        log_warning("Cannot remove the leftover images/%s, ignoring", de->d_name);
                else
                        log_notice("Removed the leftover images/%s of an unfinished build", de->d_name);
        }
        closedir(d);
}

int images_init(Server *s) {
        _cleanup_free_ struct ImageSet *set = calloc(1, sizeof(*set));
        int r;

        if (!set)
                return -ENOMEM;
        TAILQ_INIT(&set->images);
        TAILQ_INIT(&set->removals);
        set->dirfd = -EBADF;
        if (mkdirat(s->state_fd, "images", 0700) < 0 && errno != EEXIST)
                return -errno;
        set->dirfd = openat(s->state_fd, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (set->dirfd < 0)
                return -errno;
        if (asprintf(&set->dir, "%s/images", s->cfg.state_dir) < 0) {
                safe_close(set->dirfd);
                return -ENOMEM;
        }
        r = builder_find(&set->builder);
        if (r < 0) {
                free(set->dir);
                safe_close(set->dirfd);
                return r;
        }
        images_clean_leftovers(set);
        s->images = TAKE_PTR(set);
        return 0;
}

void images_free(Server *s) {
        struct ImageSet *set = s->images;
        Image *img;
        Removal *rm;

        if (!set)
                return;
        while ((img = TAILQ_FIRST(&set->images))) {
                TAILQ_REMOVE(&set->images, img, link);
                if (img->building) {
                        /* Its whole process group: mmdebstrap and what it runs. */
                        (void) kill(-img->pid, SIGKILL);
                        pidfd_kill_wait(img->pidfd_src.fd);
                        (void) waitid((idtype_t) P_PIDFD, (id_t) img->pidfd_src.fd, &(siginfo_t) {}, WEXITED);
                        image_waiters_done(s, img, -ECANCELED, "sbxd is stopping");
                }
                server_unwatch(s, &img->pidfd_src);
                server_unwatch(s, &img->out_src);
                image_free(img);
        }
        while ((rm = TAILQ_FIRST(&set->removals))) {
                TAILQ_REMOVE(&set->removals, rm, link);
                server_unwatch(s, &rm->pidfd_src);
                free(rm);
        }
        free(set->uses);
        free(set->builder);
        free(set->dir);
        safe_close(set->dirfd);
        free(set);
        s->images = NULL;
}
