/* libFuzzer target over the digest's JUnit XML parser (broker/digest.c,
 * libxml2's streaming reader): a report a sandbox printed, so
 * less-privileged input. The input is the stdout of a command that printed
 * it (the seeds are real pytest reports and hostile DTDs); the digest must
 * stay within its bounds and never read a file an entity names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/digest.h"
#include "sbx-limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *d = digest_make("sh -c 'pytest --junitxml=r.xml; cat r.xml'", (const char *) data, size, "", 0, false);
        char *dump;

        if (!d)
                return 0;
        if (json_array_size(json_object_get(d, "failures")) > SBX_DIGEST_MAX_FAILURES)
                abort();
        dump = json_dumps(d, JSON_COMPACT);
        /* /etc/passwd's first line in the digest but not in the input: an external entity was read. */
        if (dump && strstr(dump, "root:x:0:0") && !memmem(data, size, "root:x:0:0", 10))
                abort();
        free(dump);
        json_decref(d);
        return 0;
}
