/* libFuzzer target: the payload of a FILE_EDIT frame, which sbxd unpacks from
 * the broker's memfd (sbx__edit_list__unpack), then applies with
 * file_apply_edits() to a small text, as handle_file_edit() does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../supervisor/fileops.h"
#include "sbx-limits.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char text[] = "alpha beta\nbeta gamma\r\ndelta";
        Sbx__EditList *list;
        FileEditSpec *specs;
        char *out = NULL, err[256];
        size_t out_len = 0;
        uint64_t replacements = 0;

        if (size > (1u << 20))
                return 0;
        list = sbx__edit_list__unpack(NULL, size, data);
        if (!list)
                return 0;
        specs = calloc(list->n_edits + 1, sizeof(*specs));
        if (specs && list->n_edits > 0) {
                for (size_t i = 0; i < list->n_edits; i++)
                        specs[i] = (FileEditSpec) {
                                .old_string = (const char *) list->edits[i]->old_string.data,
                                .old_len = list->edits[i]->old_string.len,
                                .new_string = (const char *) list->edits[i]->new_string.data,
                                .new_len = list->edits[i]->new_string.len,
                                .replace_all = list->edits[i]->replace_all,
                        };
                if (file_apply_edits(text, strlen(text), specs, list->n_edits, &out, &out_len, &replacements, err,
                                     sizeof(err)) == 0)
                        free(out);
        }
        free(specs);
        sbx__edit_list__free_unpacked(list, NULL);
        return 0;
}
