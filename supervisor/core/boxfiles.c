#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "core/boxfiles.h"
#include "core/session.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"

#define BOX_FILES_DIR "box-files"
#define TAIL_MAX 1024u

/* STATE/box-files, root's and 0711 whatever sbxd's umask. */
static int open_top(Server *s) {
        int fd = dir_make_open_at(s->state_fd, BOX_FILES_DIR, 0711, NULL);

        if (fd >= 0 && fchmod(fd, 0711) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        return fd;
}

/* STATE/box-files/UID, the caller's and 0700. */
static int open_uid_dir(Server *s, uid_t uid, gid_t gid) {
        _cleanup_close_ int top = open_top(s);
        char name[16];
        int fd;

        if (top < 0)
                return top;
        snprintf(name, sizeof(name), "%u", (unsigned) uid);
        fd = dir_make_open_at(top, name, 0700, NULL);
        if (fd >= 0 && (fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0)) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        return fd;
}

/* Remove the expired placed files of the directory dfd (each sbxd's: a
 * regular file of root's; what its owner put there is left alone); how many
 * are left, and the oldest of them (for the count limit). */
static unsigned sweep_dir(int dfd, int64_t expired, char *oldest, size_t oldest_size) {
        _cleanup_(closedirp) DIR *d = opendir_at(dfd);
        int64_t oldest_mtime = INT64_MAX;
        unsigned left = 0;
        struct dirent *de;

        if (oldest_size)
                oldest[0] = '\0';
        while (d && (de = readdir(d))) {
                struct stat st;

                if (de->d_name[0] == '.' || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode) || st.st_uid != 0)
                        continue;
                if (st.st_mtim.tv_sec <= expired && unlinkat(dfd, de->d_name, 0) == 0)
                        continue;
                left++;
                if (oldest_size && st.st_mtim.tv_sec < oldest_mtime) {
                        oldest_mtime = st.st_mtim.tv_sec;
                        snprintf(oldest, oldest_size, "%s", de->d_name);
                }
        }
        return left;
}

static int copy_all(int out, int in, uint64_t size) {
        off_t off = 0;

        while ((uint64_t) off < size) {
                ssize_t n = sendfile(out, in, &off, (size_t) MIN(size - (uint64_t) off, (uint64_t) (1u << 20)));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
        }
        return 0;
}

int box_files_place(Server *s, uid_t uid, gid_t gid, int fd, uint64_t size, const char *name, BoxPlaced *ret) {
        _cleanup_close_ int dir = open_uid_dir(s, uid, gid), out = -EBADF;
        char oldest[NAME_MAX + 1], id[BOX_PLACED_ID_HEX + 1], file[NAME_MAX + 1];
        time_t now = time(NULL);
        struct timespec times[2] = { { .tv_sec = now }, { .tv_sec = now } };
        BoxPlaced p = {};
        int r;

        if (dir < 0)
                return dir;
        if (size > SBX_BOX_FILE_MAX)
                return -EFBIG;
        if (sweep_dir(dir, (int64_t) now - SBX_BOX_FILE_TTL_S, oldest, sizeof(oldest)) >= SBX_BOX_FILES_PER_UID &&
            oldest[0])
                (void) unlinkat(dir, oldest, 0);
        r = random_hex(id, BOX_PLACED_ID_HEX);
        if (r < 0)
                return r;
        id[BOX_PLACED_ID_HEX] = '\0';
        snprintf(file, sizeof(file), "%s-%.200s", id, name);
        out = openat(dir, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (out < 0)
                return -errno;
        r = copy_all(out, fd, size);
        if (r >= 0 && (fchmod(out, 0444) < 0 || futimens(out, times) < 0))
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir, file, 0);
                return r;
        }
        snprintf(p.path, sizeof(p.path), "%s/" BOX_FILES_DIR "/%u/%s", s->cfg.state_dir, (unsigned) uid, file);
        memcpy(p.id, id, sizeof(p.id));
        snprintf(p.name, sizeof(p.name), "%.200s", name);
        p.bytes = size;
        p.expires_unix = (int64_t) now + SBX_BOX_FILE_TTL_S;
        *ret = p;
        return 0;
}

int box_files_open(Server *s, uid_t uid, const char *id, int *ret_fd, BoxPlaced *ret) {
        _cleanup_close_ int top = -EBADF, dir = -EBADF, fd = -EBADF;
        _cleanup_(closedirp) DIR *d = NULL;
        int64_t expired = (int64_t) time(NULL) - SBX_BOX_FILE_TTL_S;
        size_t n = strlen(id);
        BoxPlaced p = {};
        struct dirent *de;
        struct stat st;
        char sub[16];

        if (n != BOX_PLACED_ID_HEX || strspn(id, "0123456789abcdef") != n)
                return -ENOENT;
        snprintf(sub, sizeof(sub), "%u", (unsigned) uid);
        top = openat(s->state_fd, BOX_FILES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        dir = top < 0 ? -errno : openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = dir < 0 ? NULL : opendir_at(dir);
        while (d && fd < 0 && (de = readdir(d)))
                if (strncmp(de->d_name, id, n) == 0 && de->d_name[n] == '-')
                        fd = openat(dir, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        /* Only sbxd's own (root's, regular) and not past its hour: the sweep may not have run yet. */
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_mtim.tv_sec <= expired)
                return -ENOENT;
        memcpy(p.id, id, sizeof(p.id));
        snprintf(p.name, sizeof(p.name), "%s", de->d_name + n + 1);
        p.bytes = (uint64_t) st.st_size;
        p.expires_unix = (int64_t) st.st_mtim.tv_sec + SBX_BOX_FILE_TTL_S;
        *ret_fd = TAKE_FD(fd);
        *ret = p;
        return 0;
}

unsigned long long box_files_next_deadline(Server *s) {
        return s->box_files_sweep_usec ?: 1;
}

void box_files_run_deadlines(Server *s) {
        _cleanup_close_ int top = -EBADF;
        _cleanup_(closedirp) DIR *d = NULL;
        int64_t expired = (int64_t) time(NULL) - SBX_BOX_FILE_TTL_S;
        unsigned long long now = now_usec();
        struct dirent *de;

        if (now < s->box_files_sweep_usec)
                return;
        s->box_files_sweep_usec = now + SBX_BOX_FILES_SWEEP_S * 1000000ull;
        top = openat(s->state_fd, BOX_FILES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return;
        d = opendir_at(top);
        while (d && (de = readdir(d))) {
                _cleanup_close_ int dfd = -EBADF;

                if (de->d_name[0] == '.')
                        continue;
                dfd = openat(top, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd >= 0)
                        (void) sweep_dir(dfd, expired, NULL, 0);
        }
}

/* ---- commands in a box -------------------------------------------------------- */

typedef struct BoxRun {
        Server *server;
        BoxRunDone done;
        void *userdata;
        size_t n;
        char tail[TAIL_MAX];
} BoxRun;

static void run_output(void *userdata, TranscriptStream stream, const void *data, size_t len) {
        BoxRun *run = userdata;

        tail_keep(run->tail, &run->n, TAIL_MAX - 1, data, len);
        run->tail[run->n] = '\0';
}

static void run_ended(Command *c, void *userdata) {
        BoxRun *run = userdata;
        WorkspaceSession *ws = c->session;

        c->observer = NULL;
        run->done(run->server, ws && ws->state == SESSION_READY ? ws : NULL, c->sent ? &c->rec : NULL, run->tail,
                  run->userdata);
        free(run);
}

static const CommandObserver box_run_observer = {
        .output = run_output,
        .ended = run_ended,
};

int box_run(Server *s, Box *box, const char *cmd, BoxRunDone done, void *userdata, char *err, size_t errsize) {
        BoxRun *run = calloc(1, sizeof(*run));
        Command *c;
        int r;

        if (!run)
                return -ENOMEM;
        *run = (BoxRun) { .server = s, .done = done, .userdata = userdata };
        r = box_command_start(s, box, cmd, "", SBX_BOX_FILE_CMD_S * 1000ull, &c, err, errsize);
        if (r < 0) {
                free(run);
                return r;
        }
        c->observer = &box_run_observer;
        c->observer_data = run;
        return 0;
}

int box_shell_quote(const char *s, char *buf, size_t size) {
        size_t n = 0;

        if (size < 3)
                return -ENAMETOOLONG;
        buf[n++] = '\'';
        for (; *s; s++) {
                const char *piece = *s == '\'' ? "'\\''" : NULL;
                size_t k = piece ? 4 : 1;

                if (n + k + 2 > size)
                        return -ENAMETOOLONG;
                if (piece)
                        memcpy(buf + n, piece, k);
                else
                        buf[n] = *s;
                n += k;
        }
        buf[n++] = '\'';
        buf[n] = '\0';
        return 0;
}
