#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "memfd-util.h"

int sealed_memfd_new(const char *name, const void *data, size_t size, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        /* Sized first, so a full tmpfs fails here and not halfway through. */
        if (ftruncate(fd, (off_t) size) < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
