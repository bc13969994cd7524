/* libFuzzer target: wire_parse(), the decoder of every frame sbxd reads from
 * a less-privileged peer (sbx-worker, sandbox-mcp, sbxctl) and every frame
 * the worker reads from sbxd: header checks, then protobuf-c unpacking and
 * the type/oneof agreement. The fd count is taken from the header, so that
 * inputs get past that check and into the decoder. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sbx-limits.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Sbx__Msg *msg = NULL;
        uint32_t seq;
        size_t n_fds = size > 10 ? (size_t) (data[10] & 0xff) : 0;

        if (wire_parse(data, size, n_fds, &msg, &seq) == 0) {
                /* a parsed message must pack again within the frame limit */
                uint8_t *buf = malloc(SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
                if (buf) {
                        (void) wire_pack(msg, seq, n_fds > SBX_WIRE_MAX_FDS ? 0 : n_fds, buf,
                                         SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
                        free(buf);
                }
                sbx__msg__free_unpacked(msg, NULL);
        }
        return 0;
}
