/* Layers on disk: copying an overlayfs upper directory (files, symlinks,
 * whiteouts, opaque directories, ownership) into an atomically named layer,
 * the clean-up of unrecorded layers after a crash, and host id ranges: the
 * lowest free one of the pool, and moving a layer tree's owners to another.
 * Needs root for mknod/chown/trusted xattrs; skipped otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "data/layer.h"
#include "data/store.h"
#include "os/uidrange.h"
#include "macro.h"
#include "sbx-limits.h"

typedef struct Fixture {
        char root[64];
        int root_fd;
        int src_fd;
        int layers_fd;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        strcpy(f->root, "/tmp/sbx-test-layer-XXXXXX");
        assert_non_null(mkdtemp(f->root));
        f->root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(mkdirat(f->root_fd, "src", 0755), 0);
        assert_int_equal(mkdirat(f->root_fd, "layers", 0755), 0);
        f->src_fd = openat(f->root_fd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        f->layers_fd = openat(f->root_fd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->src_fd >= 0 && f->layers_fd >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        safe_close(f->src_fd);
        safe_close(f->layers_fd);
        safe_close(f->root_fd);
        assert_int_equal(tree_remove_at(AT_FDCWD, f->root), 0);
        free(f);
        return 0;
}

static void put_file(int dirfd, const char *name, const char *content, mode_t mode) {
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, content, strlen(content)), 0);
        assert_int_equal(fchmod(fd, mode), 0);
}

static void assert_file(int dirfd, const char *name, const char *content) {
        char buf[256];
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
        ssize_t n;
        assert_true(fd >= 0);
        n = loop_read(fd, buf, sizeof(buf) - 1);
        assert_true(n >= 0);
        buf[n] = '\0';
        assert_string_equal(buf, content);
}

/* n directories "d", each inside the one before, below dirfd. */
static void make_nested(int dirfd, unsigned n) {
        int fd = dup(dirfd);
        for (unsigned i = 0; i < n; i++) {
                int next;
                assert_int_equal(mkdirat(fd, "d", 0755), 0);
                next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = next;
        }
        close(fd);
}

static void test_copy_upper(void **state) {
        Fixture *f = *state;
        TreeReport rep;
        struct stat st;
        char target[64];
        char opaque[4];
        _cleanup_close_ int layer = -EBADF;

        if (geteuid() != 0)
                skip();
        put_file(f->src_fd, "a.txt", "alpha\n", 0640);
        put_file(f->src_fd, "run.sh", "#!/bin/sh\n", 0755);
        assert_int_equal(fchownat(f->src_fd, "a.txt", 100000, 100001, 0), 0);
        assert_int_equal(symlinkat("a.txt", f->src_fd, "link"), 0);
        assert_int_equal(mknodat(f->src_fd, "deleted", S_IFCHR | 0, makedev(0, 0)), 0);
        assert_int_equal(mkfifoat(f->src_fd, "fifo", 0600), 0);
        assert_int_equal(mkdirat(f->src_fd, "dir", 0750), 0);
        {
                _cleanup_close_ int d = openat(f->src_fd, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_int_equal(fsetxattr(d, "trusted.overlay.opaque", "y", 1, 0), 0);
                put_file(d, "inner", "in\n", 0600);
        }
        /* A real device node has no place in a layer. */
        assert_int_equal(mknodat(f->src_fd, "null", S_IFCHR | 0666, makedev(1, 3)), 0);

        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, NULL, &rep), 0);
        /* a.txt run.sh link deleted fifo dir(opaque) dir/inner */
        assert_int_equal(rep.entries, 7);
        assert_int_equal(rep.unreadable, 0);
        assert_string_equal(rep.where, "");
        layer = openat(f->layers_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(layer >= 0);
        assert_file(layer, "a.txt", "alpha\n");
        assert_int_equal(fstatat(layer, "a.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 100000);
        assert_int_equal(st.st_gid, 100001);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(fstatat(layer, "run.sh", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(readlinkat(layer, "link", target, sizeof(target)), 5);
        assert_int_equal(fstatat(layer, "deleted", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        assert_int_equal(fstatat(layer, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISFIFO(st.st_mode));
        assert_int_equal(fstatat(layer, "null", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        {
                _cleanup_close_ int d = openat(layer, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(d >= 0);
                assert_int_equal(fgetxattr(d, "trusted.overlay.opaque", opaque, sizeof(opaque)), 1);
                assert_file(d, "inner", "in\n");
                assert_int_equal(fstat(d, &st), 0);
                assert_int_equal(st.st_mode & 07777, 0750);
        }
        /* No temporary directory is left behind. */
        assert_int_equal(fstatat(f->layers_fd, ".tmp-1", &st, 0), -1);
}

static void test_force_owner(void **state) {
        Fixture *f = *state;
        struct stat st;
        _cleanup_close_ int layer = -EBADF;

        if (geteuid() != 0)
                skip();
        put_file(f->src_fd, "x", "x\n", 0600);
        assert_int_equal(mkdirat(f->src_fd, "d", 0700), 0);
        assert_int_equal(layer_create(f->layers_fd, 0, f->src_fd, 100000, 0, NULL, NULL, NULL), 0);
        layer = openat(f->layers_fd, "0", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(fstat(layer, &st), 0);
        assert_int_equal(st.st_uid, 100000);
        assert_int_equal(fstatat(layer, "x", &st, 0), 0);
        assert_int_equal(st.st_uid, 100000);
        assert_int_equal(fstatat(layer, "d", &st, 0), 0);
        assert_int_equal(st.st_gid, 100000);
}

/* A tree of sbxd's own: its files become the layer's (the same inodes), its
 * directories are copied. */
static void test_link_files(void **state) {
        Fixture *f = *state;
        struct stat src, st;
        TreeReport rep;
        _cleanup_close_ int layer = -EBADF, d = -EBADF;

        put_file(f->src_fd, "a.txt", "alpha\n", 0640);
        assert_int_equal(mkdirat(f->src_fd, "dir", 0750), 0);
        d = openat(f->src_fd, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        put_file(d, "inner", "in\n", 0600);
        assert_int_equal(layer_create(f->layers_fd, 3, f->src_fd, -1, LAYER_LINK_FILES, NULL, NULL, &rep), 0);
        assert_int_equal(rep.entries, 2);
        layer = openat(f->layers_fd, "3", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(layer >= 0);
        assert_file(layer, "a.txt", "alpha\n");
        assert_int_equal(fstatat(f->src_fd, "a.txt", &src, 0), 0);
        assert_int_equal(fstatat(layer, "a.txt", &st, 0), 0);
        assert_int_equal(st.st_ino, src.st_ino);
        assert_int_equal(st.st_nlink, 2);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(fstatat(d, "inner", &src, 0), 0);
        assert_int_equal(fstatat(layer, "dir/inner", &st, 0), 0);
        assert_int_equal(st.st_ino, src.st_ino);
        assert_int_equal(fstatat(d, ".", &src, 0), 0);
        assert_int_equal(fstatat(layer, "dir", &st, 0), 0);
        assert_int_not_equal(st.st_ino, src.st_ino);
        assert_int_equal(st.st_mode & 07777, 0750);
        /* The tree goes; the layer keeps the files. */
        safe_close(d);
        d = -EBADF;
        assert_int_equal(tree_remove_at(f->root_fd, "src"), 0);
        assert_file(layer, "dir/inner", "in\n");
        assert_int_equal(fstatat(layer, "a.txt", &st, 0), 0);
        assert_int_equal(st.st_nlink, 1);
}

static void test_existing_layer_refused(void **state) {
        Fixture *f = *state;

        put_file(f->src_fd, "x", "x\n", 0644);
        assert_int_equal(layer_create(f->layers_fd, 2, f->src_fd, -1, 0, NULL, NULL, NULL), 0);
        /* Publishing the same sequence again must not replace what is there. */
        put_file(f->src_fd, "x", "changed\n", 0644);
        assert_true(layer_create(f->layers_fd, 2, f->src_fd, -1, 0, NULL, NULL, NULL) < 0);
        {
                _cleanup_close_ int layer = openat(f->layers_fd, "2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_file(layer, "x", "x\n");
        }
}

static void test_remove_unrecorded(void **state) {
        Fixture *f = *state;
        struct stat st;

        /* As a crash could leave them: recorded 0..1, a renamed but unrecorded 2, a half-built 3. */
        assert_int_equal(layer_create(f->layers_fd, 0, f->src_fd, -1, 0, NULL, NULL, NULL), 0);
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, NULL, NULL), 0);
        put_file(f->src_fd, "late", "late\n", 0644);
        assert_int_equal(layer_create(f->layers_fd, 2, f->src_fd, -1, 0, NULL, NULL, NULL), 0);
        assert_int_equal(mkdirat(f->layers_fd, ".tmp-3", 0755), 0);
        put_file(f->layers_fd, ".tmp-3/partial", "p", 0644);

        assert_int_equal(layer_remove_unrecorded(f->layers_fd, 1, NULL), 0);
        assert_int_equal(fstatat(f->layers_fd, "0", &st, 0), 0);
        assert_int_equal(fstatat(f->layers_fd, "1", &st, 0), 0);
        assert_int_equal(fstatat(f->layers_fd, "2", &st, 0), -1);
        assert_int_equal(fstatat(f->layers_fd, ".tmp-3", &st, 0), -1);
}

static void test_tree_is_empty_and_depth(void **state) {
        Fixture *f = *state;
        char path[16], message[256];
        TreeReport rep;
        int r;

        assert_int_equal(tree_is_empty(f->src_fd), 1);
        /* Deeper than SBX_TREE_DEPTH_MAX: refused, never a stack overflow. */
        make_nested(f->src_fd, SBX_TREE_DEPTH_MAX + 2);
        assert_int_equal(tree_is_empty(f->src_fd), 0);
        r = layer_create(f->layers_fd, 5, f->src_fd, -1, 0, NULL, NULL, &rep);
        assert_int_equal(r, -ELOOP);
        assert_true(rep.too_deep);
        /* The directory that passed the limit: SBX_TREE_DEPTH_MAX + 1 levels of "d". */
        assert_int_equal(strlen(rep.where), 2 * (SBX_TREE_DEPTH_MAX + 1) - 1);
        tree_depth_message(rep.where, message, sizeof(message));
        assert_non_null(strstr(message, "layer depth limit of 256 directory levels at 'd/d/d/"));
        assert_non_null(strstr(message, "..."));
        assert_non_null(strstr(message, "d/d/d'"));
        snprintf(path, sizeof(path), "%s", ".tmp-5");
        assert_int_equal(faccessat(f->layers_fd, path, F_OK, 0), -1);
}

/* tree_chown_at gives everything below to the owner, a symlink itself and
 * never its target (a file outside, as a job's /out could point to). */
static void test_chown_tree(void **state) {
        Fixture *f = *state;
        struct stat st;

        assert_int_equal(mkdirat(f->src_fd, "d", 0755), 0);
        assert_int_equal(close(openat(f->src_fd, "d/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
        assert_int_equal(close(openat(f->root_fd, "outside", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
        assert_int_equal(symlinkat("../../outside", f->src_fd, "d/link"), 0);
        assert_int_equal(symlinkat("/tmp", f->src_fd, "dirlink"), 0);
        assert_int_equal(tree_chown_at(f->root_fd, "src", 4242, 4343), 0);
        assert_int_equal(fstatat(f->src_fd, "d/file", &st, 0), 0);
        assert_true(st.st_uid == 4242 && st.st_gid == 4343);
        assert_int_equal(fstatat(f->src_fd, "d/link", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(st.st_uid == 4242 && st.st_gid == 4343);
        assert_int_equal(fstatat(f->root_fd, "outside", &st, 0), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(stat("/tmp", &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(fstatat(f->root_fd, "src", &st, 0), 0);
        assert_true(st.st_uid == 4242 && (st.st_mode & 07777) == 0700);
}

/* No file of a layer keeps a setuid or setgid bit, copied or linked;
 * directories keep setgid. */
static void test_setid_cleared(void **state) {
        Fixture *f = *state;
        struct stat st;
        _cleanup_close_ int layer = -EBADF, d = -EBADF;

        if (geteuid() != 0)
                skip();
        put_file(f->src_fd, "suid", "#!/bin/sh\n", 06755);
        assert_int_equal(mkdirat(f->src_fd, "shared", 0755), 0);
        assert_int_equal(fchmodat(f->src_fd, "shared", 02775, 0), 0);
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, 100000, 0, NULL, NULL, NULL), 0);
        layer = openat(f->layers_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(fstatat(layer, "suid", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(fstatat(layer, "shared", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 02775);
        /* sbxd's own staged tree: linked, and the shared inode loses the bits. */
        assert_int_equal(layer_create(f->layers_fd, 2, f->src_fd, -1, LAYER_LINK_FILES, NULL, NULL, NULL), 0);
        d = openat(f->layers_fd, "2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(fstatat(d, "suid", &st, 0), 0);
        assert_int_equal(st.st_nlink, 2);
        assert_int_equal(st.st_mode & 07777, 0755);
}

/* A source read as another user: what it may not read is left out, counted
 * and named; what it may read is copied; the excluded directory is refused. */
static void test_source_reader(void **state) {
        Fixture *f = *state;
        TreeSource as_nobody = { .uid = 65534, .gid = 65534 };
        TreeReport rep;
        struct stat st;
        _cleanup_close_ int layer = -EBADF, d = -EBADF;

        if (geteuid() != 0)
                skip();
        put_file(f->src_fd, "public", "p\n", 0644);
        put_file(f->src_fd, "secret", "s\n", 0600);
        assert_int_equal(mkdirat(f->src_fd, "closed", 0700), 0);
        d = openat(f->src_fd, "closed", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        put_file(d, "inner", "i\n", 0644);
        assert_int_equal(symlinkat("/etc/shadow", f->src_fd, "link"), 0);
        assert_int_equal(layer_create(f->layers_fd, 0, f->src_fd, 100000, 0, &as_nobody, NULL, &rep), 0);
        assert_int_equal(rep.unreadable, 2);
        assert_true((strcmp(rep.unreadable_paths[0], "secret") == 0 && strcmp(rep.unreadable_paths[1], "closed") == 0) ||
                    (strcmp(rep.unreadable_paths[0], "closed") == 0 && strcmp(rep.unreadable_paths[1], "secret") == 0));
        assert_int_equal(rep.entries, 2);
        layer = openat(f->layers_fd, "0", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_file(layer, "public", "p\n");
        assert_int_equal(fstatat(layer, "secret", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(fstatat(layer, "closed", &st, AT_SYMLINK_NOFOLLOW), -1);
        /* a symlink is copied as a link, never followed */
        assert_int_equal(fstatat(layer, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(st.st_mode));
        /* our own ids are back */
        assert_int_equal(setfsuid((uid_t) -1), 0);
        assert_int_equal(setfsgid((gid_t) -1), 0);

        assert_int_equal(fstat(d, &st), 0);
        as_nobody.excluded_dev = st.st_dev;
        as_nobody.excluded_ino = st.st_ino;
        assert_int_equal(fchmod(d, 0755), 0);
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, 100000, 0, &as_nobody, NULL, &rep), -EXDEV);
        assert_true(rep.excluded);
        assert_string_equal(rep.where, "closed");
}

/* ---- what a copy writes: holes, hard links, the budget (issue 15) ---- */

/* A sparse file stays sparse: 1 GiB of size, 1 MiB of data in the middle. */
static void test_sparse_copy(void **state) {
        Fixture *f = *state;
        static char data[1 << 20];
        char back[64];
        TreeReport rep;
        struct stat st;
        _cleanup_close_ int fd = -EBADF, layer = -EBADF, copy = -EBADF;

        memset(data, 'x', sizeof(data));
        fd = openat(f->src_fd, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 1ll << 30), 0);
        assert_int_equal(pwrite(fd, data, sizeof(data), 512ll << 20), (ssize_t) sizeof(data));
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, NULL, &rep), 0);
        layer = openat(f->layers_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        copy = openat(layer, "sparse", O_RDONLY | O_CLOEXEC);
        assert_true(copy >= 0);
        assert_int_equal(fstat(copy, &st), 0);
        assert_int_equal(st.st_size, 1ll << 30);
        /* The data and its few metadata blocks, not 1 GiB of zeros. */
        assert_true((uint64_t) st.st_blocks * 512 < (2u << 20));
        assert_true(rep.written.bytes < (2u << 20));
        assert_int_equal(rep.written.inodes, 1);
        assert_int_equal(pread(copy, back, sizeof(back), (512ll << 20) + 100), (ssize_t) sizeof(back));
        assert_memory_equal(back, data, sizeof(back));
        assert_int_equal(pread(copy, back, sizeof(back), 4096), (ssize_t) sizeof(back));
        for (size_t i = 0; i < sizeof(back); i++)
                assert_int_equal(back[i], 0);
}

/* Sizes come through whether a file ends in data or in a hole (only a
 * trailing hole sizes the copy): an empty file, a plain one, one that
 * begins with a hole and ends in data. */
static void test_copy_sizes(void **state) {
        Fixture *f = *state;
        static const struct { const char *name; off_t hole; const char *data; } files[] = {
                { "empty", 0, "" }, { "plain", 0, "abc" }, { "tail", 8ll << 20, "end" },
        };
        _cleanup_close_ int layer = -EBADF;
        TreeReport rep;

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_close_ int fd = openat(f->src_fd, files[i].name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                size_t n = strlen(files[i].data);
                assert_true(fd >= 0);
                assert_int_equal(pwrite(fd, files[i].data, n, files[i].hole), (ssize_t) n);
        }
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, NULL, &rep), 0);
        layer = openat(f->layers_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(layer >= 0);
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_close_ int copy = openat(layer, files[i].name, O_RDONLY | O_CLOEXEC);
                size_t n = strlen(files[i].data);
                char back[8] = "";
                struct stat st;
                assert_true(copy >= 0);
                assert_int_equal(fstat(copy, &st), 0);
                assert_int_equal(st.st_size, files[i].hole + (off_t) n);
                assert_int_equal(pread(copy, back, sizeof(back), files[i].hole), (ssize_t) n);
                assert_memory_equal(back, files[i].data, n);
        }
}

/* One file with names in two directories is one file in the layer, counted once. */
static void test_hard_links_kept(void **state) {
        Fixture *f = *state;
        static char data[1 << 20];
        TreeReport rep;
        TreeUsage usage;
        struct stat a, b;
        _cleanup_close_ int fd = -EBADF, layer = -EBADF;

        memset(data, 'y', sizeof(data));
        fd = openat(f->src_fd, "big", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, data, sizeof(data)), 0);
        assert_int_equal(mkdirat(f->src_fd, "d", 0755), 0);
        for (int i = 0; i < 8; i++) {
                char name[16];
                snprintf(name, sizeof(name), "%sl%d", i % 2 ? "d/" : "", i);
                assert_int_equal(linkat(f->src_fd, "big", f->src_fd, name, 0), 0);
        }
        assert_int_equal(tree_usage(f->src_fd, 4096, &usage), 0);
        assert_true(usage.bytes >= sizeof(data) && usage.bytes < sizeof(data) + 3 * 4096 + 65536);
        assert_int_equal(usage.inodes, 2); /* big, d */
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, NULL, &rep), 0);
        assert_int_equal(rep.entries, 9);
        assert_int_equal(rep.written.inodes, 2);
        assert_true(rep.written.bytes < 2 * sizeof(data));
        layer = openat(f->layers_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(fstatat(layer, "big", &a, 0), 0);
        assert_int_equal(fstatat(layer, "d/l7", &b, 0), 0);
        assert_int_equal(a.st_ino, b.st_ino);
        assert_int_equal(a.st_nlink, 9);
}

/* Past its bytes, its inodes or the reserve, a copy stops, says which, and
 * leaves no layer. */
static void test_budget_stops(void **state) {
        Fixture *f = *state;
        static char data[256 << 10];
        TreeReport rep;
        struct stat st;
        _cleanup_close_ int fd = -EBADF;

        memset(data, 'z', sizeof(data));
        fd = openat(f->src_fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_int_equal(loop_write(fd, data, sizeof(data)), 0);
        put_file(f->src_fd, "g", "g\n", 0644);
        put_file(f->src_fd, "h", "h\n", 0644);

        TreeBudget bytes = { .max_bytes = 64 << 10, .max_inodes = UINT64_MAX };
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, &bytes, &rep), -EDQUOT);
        assert_int_equal(rep.stopped, TREE_STOP_BYTES);
        assert_int_equal(fstatat(f->layers_fd, ".tmp-1", &st, 0), -1);
        assert_int_equal(fstatat(f->layers_fd, "1", &st, 0), -1);

        TreeBudget inodes = { .max_bytes = UINT64_MAX, .max_inodes = 2 };
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, &inodes, &rep), -EDQUOT);
        assert_int_equal(rep.stopped, TREE_STOP_INODES);

        TreeBudget reserve = { .max_bytes = UINT64_MAX, .max_inodes = UINT64_MAX, .reserve_bytes = UINT64_MAX / 2 };
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, &reserve, &rep), -ENOSPC);
        assert_int_equal(rep.stopped, TREE_STOP_RESERVE);
        assert_true(rep.free_bytes < UINT64_MAX / 2);
        assert_int_equal(fstatat(f->layers_fd, ".tmp-1", &st, 0), -1);

        /* sbxd stopping: the copy ends at its next entry, and leaves nothing either */
        atomic_bool stopping = true;
        TreeBudget cancelled = { .max_bytes = UINT64_MAX, .max_inodes = UINT64_MAX, .cancelled = &stopping };
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, &cancelled, &rep), -ECANCELED);
        assert_int_equal(rep.written.inodes, 0);
        assert_int_equal(fstatat(f->layers_fd, ".tmp-1", &st, 0), -1);
        assert_int_equal(fstatat(f->layers_fd, "1", &st, 0), -1);

        TreeBudget enough = { .max_bytes = 1 << 20, .max_inodes = 3, .reserve_bytes = 1 };
        assert_int_equal(layer_create(f->layers_fd, 1, f->src_fd, -1, 0, NULL, &enough, &rep), 0);
        assert_int_equal(rep.stopped, TREE_STOP_NONE);
        assert_int_equal(rep.written.inodes, 3);
        /* A small layer is fsynced file by file ... */
        assert_false(rep.unsynced);
        /* ... a larger one is left to one syncfs. */
        for (unsigned i = 0; i < SBX_LAYER_FSYNC_MAX; i++) {
                char name[16];
                snprintf(name, sizeof(name), "n%u", i);
                put_file(f->src_fd, name, "n\n", 0644);
        }
        assert_int_equal(layer_create(f->layers_fd, 2, f->src_fd, -1, 0, NULL, NULL, &rep), 0);
        assert_true(rep.unsynced);
}

/* ---- host id ranges (uidrange.c): allocation and moving a tree's owners ---- */

static void add_range(Store *st, const char *sandbox, uint32_t base, uint32_t count) {
        StoreUidRange u = { .base = base, .count = count };
        strlcpy(u.sandbox, sandbox, sizeof(u.sandbox));
        assert_int_equal(store_uid_range_insert(st, &u), 0);
}

static void test_find_free(void **state) {
        Fixture *f = *state;
        _cleanup_(store_closep) Store *st = NULL;
        uint32_t base;

        assert_int_equal(store_open(f->root_fd, &st), 0);

        assert_int_equal(uid_range_find_free(st, 100000, 65536, &base), 0);
        assert_int_equal(base, 100000);
        add_range(st, "a", 100000, 65536);
        add_range(st, "c", 100000 + 2 * 65536, 65536);
        /* The gap between a and c. */
        assert_int_equal(uid_range_find_free(st, 100000, 65536, &base), 0);
        assert_int_equal(base, 100000 + 65536);
        add_range(st, "b", base, 65536);
        assert_int_equal(uid_range_find_free(st, 100000, 65536, &base), 0);
        assert_int_equal(base, 100000 + 3 * 65536);
        /* A range off the grid (an earlier uid_count) pushes to the next grid point after it. */
        add_range(st, "odd", 100000 + 3 * 65536 + 10, 1000);
        assert_int_equal(uid_range_find_free(st, 100000, 65536, &base), 0);
        assert_int_equal(base, 100000 + 4 * 65536);
        /* Deleted: its range is the lowest free one again. */
        assert_int_equal(store_uid_range_delete(st, "b"), 0);
        assert_int_equal(store_uid_range_delete(st, "b"), -ENOENT);
        assert_int_equal(uid_range_find_free(st, 100000, 65536, &base), 0);
        assert_int_equal(base, 100000 + 65536);
        /* One row per sandbox and per base. */
        StoreUidRange dup = { .base = 100000, .count = 65536 };
        strlcpy(dup.sandbox, "other", sizeof(dup.sandbox));
        assert_int_equal(store_uid_range_insert(st, &dup), -EEXIST);
}

static void test_pool_end(void **state) {
        Fixture *f = *state;
        _cleanup_(store_closep) Store *st = NULL;
        uint32_t base;

        assert_int_equal(store_open(f->root_fd, &st), 0);

        /* The top range of the pool is the image builds' (sbx-images(7)): no sandbox gets it. */
        assert_int_equal(uid_range_find_free(st, SBX_IMAGE_BUILD_UID_BASE - 65536, 65536, &base), 0);
        assert_int_equal(base, SBX_IMAGE_BUILD_UID_BASE - 65536);
        add_range(st, "last", base, 65536);
        assert_int_equal(uid_range_find_free(st, SBX_IMAGE_BUILD_UID_BASE - 65536, 65536, &base), -ENOSPC);
        assert_int_equal(uid_range_find_free(st, SBX_IMAGE_BUILD_UID_BASE, 65536, &base), -ENOSPC);
        assert_int_equal(uid_range_find_free(st, 100000, 0, &base), -EINVAL);
}

static void test_shift(void **state) {
        Fixture *f = *state;
        _cleanup_close_ int fd = -EBADF;
        int t = f->src_fd;
        struct stat st;

        if (geteuid() != 0)
                skip();
        assert_int_equal(mkdirat(t, "d", 02750), 0);
        assert_int_equal(fchmodat(t, "d", 02750, 0), 0);
        assert_int_equal(fchownat(t, "d", 100000, 100005, 0), 0);
        fd = openat(t, "d/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(fchown(fd, 101000, 100000), 0);
        assert_int_equal(fchmod(fd, 04755), 0);
        assert_int_equal(symlinkat("f", t, "d/l"), 0);
        assert_int_equal(fchownat(t, "d/l", 100001, 100002, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(mknodat(t, "d/w", S_IFCHR | 0000, makedev(0, 0)), 0);
        assert_int_equal(fchownat(t, "d/w", 100000, 100000, 0), 0);
        assert_int_equal(linkat(t, "d/f", t, "hard", 0), 0);
        /* Outside the range: left alone. */
        assert_int_equal(mkdirat(t, "root-owned", 0755), 0);

        assert_int_equal(uid_tree_shift(t, 100000, 165536, 65536, 8), 0);
        /* A second run (after a crash) moves nothing twice. */
        assert_int_equal(uid_tree_shift(t, 100000, 165536, 65536, 8), 0);
        assert_int_equal(fstatat(t, "d", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 165536);
        assert_int_equal(st.st_gid, 165541);
        assert_int_equal(st.st_mode & 07777, 02750);
        assert_int_equal(fstatat(t, "d/f", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 166536);
        assert_int_equal(st.st_gid, 165536);
        assert_int_equal(st.st_mode & 07777, 04755);
        assert_int_equal(fstatat(t, "d/l", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 165537);
        assert_int_equal(st.st_gid, 165538);
        assert_int_equal(fstatat(t, "d/w", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 165536);
        assert_int_equal(fstatat(t, "root-owned", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, 0);
        /* Overlapping ranges would move ids twice on a rerun: refused. */
        assert_int_equal(uid_tree_shift(t, 100000, 100001, 65536, 8), -EINVAL);
}

static void test_shift_depth(void **state) {
        Fixture *f = *state;

        if (geteuid() != 0)
                skip();
        make_nested(f->src_fd, 5);
        assert_int_equal(uid_tree_shift(f->src_fd, 100000, 165536, 65536, 3), -ELOOP);
        assert_int_equal(uid_tree_shift(f->src_fd, 100000, 165536, 65536, 5), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_copy_upper, setup, teardown),
                cmocka_unit_test_setup_teardown(test_force_owner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_link_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_existing_layer_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove_unrecorded, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tree_is_empty_and_depth, setup, teardown),
                cmocka_unit_test_setup_teardown(test_setid_cleared, setup, teardown),
                cmocka_unit_test_setup_teardown(test_chown_tree, setup, teardown),
                cmocka_unit_test_setup_teardown(test_source_reader, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sparse_copy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_copy_sizes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hard_links_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_budget_stops, setup, teardown),
                cmocka_unit_test_setup_teardown(test_find_free, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pool_end, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shift, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shift_depth, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
