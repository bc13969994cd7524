/* libFuzzer target: sbx-egress's request head parser (egress/request.c),
 * fed what a sandbox's client may send. Whatever it accepts is bounded and
 * well formed: the head within the input, a host and a port, and a
 * forwarded head of plain HTTP that ends with its empty line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../egress/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EgressRequest req;

        if (egress_request_parse((const char *) data, size, &req) < 0)
                return 0;
        if (req.head_len > size || req.head_len > SBX_EGRESS_HEADER_MAX || !req.host[0] || req.port == 0)
                abort();
        if (!req.connect && (req.forward_len < 4 || strlen(req.forward) != req.forward_len ||
                             memcmp(req.forward + req.forward_len - 4, "\r\n\r\n", 4) != 0))
                abort();
        egress_request_done(&req);
        return 0;
}
