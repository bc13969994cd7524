/* A temporary directory for the files of one unit test: cmocka's setup makes
 * it (dir, open as dirfd_), teardown removes it and every file in it. */
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static int dirfd_ = -1;

static int setup(void **state) {
        strcpy(dir, "/tmp/sbx-unit.XXXXXX");
        assert_non_null(mkdtemp(dir));
        dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dirfd_ >= 0);
        return 0;
}

static int teardown(void **state) {
        DIR *d = fdopendir(dirfd_);
        struct dirent *de;

        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        assert_int_equal(unlinkat(dirfd(d), de->d_name, 0), 0);
        closedir(d);
        assert_int_equal(rmdir(dir), 0);
        return 0;
}
