/* libFuzzer target for blame_parse(), the parser of attribution records read
 * from disk. Whatever parses must serialize back to the same bytes (the
 * format is canonical). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/attribution.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Blame b = {};
        char *s = NULL;
        size_t len = 0;

        if (size > 1024 * 1024)
                return 0;
        if (blame_parse((const char *) data, size, &b) < 0)
                return 0;
        if (blame_serialize(&b, &s, &len) < 0 || len != size || memcmp(s, data, size) != 0)
                abort();
        free(s);
        blame_done(&b);
        return 0;
}
