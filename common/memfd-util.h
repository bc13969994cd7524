/* Sealed memory files: how sandbox-mcp hands a large payload (file_write
 * content, file_edit's packed edits) to sbxd as one SCM_RIGHTS fd whose
 * bytes cannot change after sbxd checked them. Non-logging. */
#pragma once

#include <stddef.h>

/* A memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) holding exactly size bytes of
 * data, sealed with F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE,
 * its offset back at 0. Returns 0 or -errno. */
int sealed_memfd_new(const char *name, const void *data, size_t size, int *ret_fd);
