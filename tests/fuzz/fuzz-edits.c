/* libFuzzer target: the payload of a FILE_EDIT frame, which sbxd unpacks from
 * the broker's memfd (file_edit_list_parse), then applies with
 * file_apply_edits() to a small text, as handle_file_edit() does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/fileops.h"
#include "sbx-limits.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char text[] = "alpha beta\nbeta gamma\r\ndelta";
        FileEditList edits = {};
        char *out = NULL, err[256];
        size_t out_len = 0;
        uint64_t replacements = 0;

        if (size > (1u << 20))
                return 0;
        if (file_edit_list_parse(data, size, &edits) < 0)
                return 0;
        if (file_apply_edits(text, strlen(text), edits.specs, edits.n, &out, &out_len, &replacements, err,
                             sizeof(err)) == 0)
                free(out);
        file_edit_list_done(&edits);
        return 0;
}
