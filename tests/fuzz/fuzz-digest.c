/* libFuzzer target over the digest parsers (broker/digest.c): text a sandbox
 * printed, so less-privileged input. The input is split at its first NUL
 * byte into stdout and stderr, and the first line of stdout is also taken as
 * the command line; the digest must stay within its bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/digest.h"
#include "sbx-limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data, *nul = memchr(data, '\0', size), *nl;
        size_t out_len = nul ? (size_t) (nul - text) : size;
        char cmd[256] = "";
        json_t *d;

        nl = memchr(text, '\n', out_len);
        if (nl && (size_t) (nl - text) < sizeof(cmd))
                memcpy(cmd, text, (size_t) (nl - text));
        d = digest_make(cmd, text, out_len, nul ? nul + 1 : "", nul ? size - out_len - 1 : 0, size % 2 == 0);
        if (!d)
                return 0;
        if (json_array_size(json_object_get(d, "failures")) > SBX_DIGEST_MAX_FAILURES)
                abort();
        json_decref(d);
        return 0;
}
